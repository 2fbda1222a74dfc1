// A small HTTP client for OpenAI-style endpoints: JSON GET/POST, and POST with a
// server-sent-events response read event by event as it arrives. Used by the load
// generator and the tests.
#pragma once

#include <functional>
#include <string>

namespace sy {

struct HttpEndpoint {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string prefix;   // path before /v1/... (usually empty)
  std::string api_key;  // sent as a bearer token when set
  double timeout_s = 600;

  // "http://host[:port][/prefix]" (the scheme may be left out; an IPv6 host in brackets,
  // "[::1]:8080"); a trailing "/v1" is dropped. Throws sy::Error.
  static HttpEndpoint parse(const std::string& url);
};

struct HttpReply {
  int status = 0;     // 0: no response (error says why)
  std::string body;   // the body when it is not an event stream
  std::string error;  // transport error
  bool done = false;  // saw "data: [DONE]"
};

HttpReply http_get(const HttpEndpoint& ep, const std::string& path);
HttpReply http_post(const HttpEndpoint& ep, const std::string& path, const std::string& json_body);

// POSTs json_body and calls on_event with the payload of each "data:" event ("[DONE]"
// included) as it arrives. on_event returns false to hang up at once.
HttpReply http_post_sse(const HttpEndpoint& ep, const std::string& path, const std::string& json_body,
                        const std::function<bool(const std::string&)>& on_event);

}  // namespace sy
