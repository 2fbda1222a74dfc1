#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "base/ascii.h"
#include "base/error.h"

namespace sy {
namespace {

// An origin as browsers send it: http or https, "://", a host, an optional port, nothing after.
bool is_origin(const std::string& o) {
  const size_t sep = o.find("://");
  if (sep == std::string::npos) return false;
  const std::string scheme = o.substr(0, sep), rest = o.substr(sep + 3);
  if (scheme != "http" && scheme != "https") return false;
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos) return false;
  const size_t colon = rest.rfind(':');
  const bool bracketed = rest.front() == '[';  // IPv6 literal: [::1]:8080
  if (colon != std::string::npos && (!bracketed || colon > rest.find(']'))) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
      return false;
    return colon > 0;
  }
  return !bracketed || rest.back() == ']';
}

}  // namespace

CorsPolicy::CorsPolicy(const std::vector<std::string>& origins) {
  for (const std::string& o : origins) {
    if (o == "*") {
      any_ = true;
    } else if (is_origin(ascii_lower(o))) {
      origins_.push_back(ascii_lower(o));
    } else {
      throw Error("--cors-origin: '" + o +
                  "' is not an origin; give '*' or scheme://host[:port] as the browser sends it, for example "
                  "http://localhost:3000 (no path, no trailing slash)");
    }
  }
}

std::string CorsPolicy::allow_origin(const std::string& origin) const {
  if (origin.empty()) return "";
  if (any_) return "*";
  return std::find(origins_.begin(), origins_.end(), ascii_lower(origin)) != origins_.end() ? origin : "";
}

}  // namespace sy
