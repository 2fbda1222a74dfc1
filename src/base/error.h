// The project's one exception type. Messages name the file, tensor, field or flag at
// fault and, where there is one, the way out; the CLI and server print them as they are.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace sy {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// What a caught exception says: its what(), or `fallback` for one that is no std::exception.
inline std::string message_of(const std::exception_ptr& e, const std::string& fallback) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return fallback;
}

}  // namespace sy
