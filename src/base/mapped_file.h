// Read-only memory mapping of a whole file (RAII). Model weights are used in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sy {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the resident pages of [p, p + n) (a range inside the mapping that will not be
  // read again, e.g. weights copied to another layout), so they stop counting in RSS.
  void drop_pages(const void* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sy
