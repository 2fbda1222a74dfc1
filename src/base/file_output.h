// Writes a whole output file (logits, reports, plots) or says why it could not: the
// system's reason (a full disk, a missing folder) and no truncated file left behind.
#pragma once

#include <cstddef>
#include <string>

namespace sy {

// Writes `bytes` bytes at `data` to `path` (replacing it). Throws sy::Error naming the path
// and the reason; a regular file it could not complete is removed.
void write_whole_file(const std::string& path, const void* data, size_t bytes);
inline void write_whole_file(const std::string& path, const std::string& text) {
  write_whole_file(path, text.data(), text.size());
}

}  // namespace sy
