// Temporary files for tests that write or corrupt model files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace sy::test {

class TempFile {
 public:
  explicit TempFile(const std::string& suffix = ".gguf") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("sy_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + suffix)).string();
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

  void write(const std::vector<uint8_t>& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string path_;
};

// A folder of its own, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() { std::filesystem::create_directory(name_.path()); }
  ~TempDir() { std::filesystem::remove_all(name_.path()); }
  const std::string& path() const { return name_.path(); }

 private:
  TempFile name_{"_dir"};
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace sy::test
