// Whole files in and out (prompts, templates, traces, /proc and /sys files; logits, reports,
// plots), with errors that name the file and give the system's reason (a missing folder, a
// full disk); a file that could not be completed is not left behind.
#pragma once

#include <cstddef>
#include <string>

namespace sy {

// The bytes of `path`. Throws sy::Error "WHO: cannot read PATH: REASON".
std::string read_whole_file(const std::string& path, const std::string& who);

// A /proc or /sys file's text, "" when it cannot be read (no such limit on this machine):
// for what may be absent, where read_whole_file's error would be wrong.
std::string read_system_file(const std::string& path);

// Writes `bytes` bytes at `data` to `path` (replacing it). Throws sy::Error naming the path
// and the reason; a regular file it could not complete is removed.
void write_whole_file(const std::string& path, const void* data, size_t bytes);
inline void write_whole_file(const std::string& path, const std::string& text) {
  write_whole_file(path, text.data(), text.size());
}

}  // namespace sy
