// Cross-origin requests (CORS) from web pages: a browser lets a page on another origin read
// the server's answers only when they name its origin in Access-Control-Allow-Origin, and
// it first asks with an OPTIONS "preflight" for requests with JSON bodies or an
// Authorization header. Off unless `serve --cors-origin` lists the origins (or "*"): any page
// the user opens could otherwise use a server on their machine.
#pragma once

#include <string>
#include <vector>

namespace sy {

class CorsPolicy {
 public:
  CorsPolicy() = default;
  // Origins as given to --cors-origin: "*" or scheme://host[:port]. Throws sy::Error naming
  // the flag for anything else (a path, a trailing slash, no scheme).
  explicit CorsPolicy(const std::vector<std::string>& origins);

  bool enabled() const { return any_ || !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request's Origin header: "*", the origin
  // itself, or empty when it is not allowed (or the request has none).
  std::string allow_origin(const std::string& origin) const;
  bool any() const { return any_; }  // "*": every origin
  // Whether the answer depends on the Origin header (caches must then keep one per origin).
  bool varies() const { return !any_; }

 private:
  bool any_ = false;
  std::vector<std::string> origins_;  // lower-case
};

}  // namespace sy
