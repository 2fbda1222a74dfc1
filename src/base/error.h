// The project's one exception type. Messages name the file, tensor, field or flag at
// fault and, where there is one, the way out; the CLI and server print them as they are.
#pragma once

#include <stdexcept>
#include <string>

namespace sy {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace sy
