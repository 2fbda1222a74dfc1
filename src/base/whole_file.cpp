#include "base/whole_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "base/error.h"

namespace sy {

std::string read_whole_file(const std::string& path, const std::string& who) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(who + ": cannot read " + path + ": " + std::strerror(errno));
  // A folder opens like a file; reading it fails inside the stream library, which would
  // report it without the path.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error(who + ": cannot read " + path + ": " + std::strerror(EISDIR));
  }
  std::string data;
  try {
    data.assign(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    in.setstate(std::ios::badbit);
  }
  if (in.bad()) throw Error(who + ": cannot read " + path + ": read error");
  return data;
}

std::string read_system_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_whole_file(const std::string& path, const void* data, size_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno));
  int err = std::fwrite(data, 1, bytes, f) == bytes ? 0 : errno;
  // fclose flushes: a disk that fills up may only say so here.
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err == 0) return;
  // Only a regular file is removed: never a device (/dev/full) or a pipe the user named.
  struct stat st;
  const bool removed =
      ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && std::remove(path.c_str()) == 0;
  throw Error("cannot write " + path + ": " + std::strerror(err) +
              (removed ? " (the incomplete file was removed)" : ""));
}

}  // namespace sy
