// Stop strings over streamed text. Text that could still be the start of a stop string is
// held back until the next piece decides it, so a client never receives part of a stop
// string; once one matches, the text from it on is dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sy {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Adds text; returns the part that is safe to send now.
  std::string push(std::string_view text);
  // End of generation: whatever was held back (nothing after a match).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sy
