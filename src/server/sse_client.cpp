#include "server/sse_client.h"

#include <httplib.h>

#include "base/error.h"

namespace sy {
namespace {

constexpr time_t kConnectSeconds = 10;

std::unique_ptr<httplib::Client> client(const HttpEndpoint& ep) {
  auto c = std::make_unique<httplib::Client>(ep.host, ep.port);
  const auto sec = static_cast<time_t>(ep.timeout_s);
  const auto usec = static_cast<time_t>((ep.timeout_s - static_cast<double>(sec)) * 1e6);
  c->set_read_timeout(sec, usec);
  c->set_write_timeout(sec, usec);
  c->set_connection_timeout(kConnectSeconds, 0);
  if (!ep.api_key.empty()) c->set_bearer_token_auth(ep.api_key);
  return c;
}

// What went wrong, in words: httplib's own names ("Connection", "Read") say too little.
std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect (is a server listening there?)";
    case httplib::Error::ConnectionTimeout: return "no connection within " + std::to_string(kConnectSeconds) + " s";
    case httplib::Error::Read: return "the connection failed or timed out while reading the reply";
    case httplib::Error::Write: return "the connection failed while sending the request";
    case httplib::Error::Canceled: return "cancelled by the client";
    default: return "HTTP client error: " + httplib::to_string(e);
  }
}

HttpReply from(const httplib::Result& r) {
  HttpReply out;
  if (!r) {
    out.error = describe(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  return out;
}

}  // namespace

HttpEndpoint HttpEndpoint::parse(const std::string& url) {
  HttpEndpoint ep;
  std::string rest = url;
  const auto scheme_end = rest.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = rest.substr(0, scheme_end);
    if (scheme != "http") throw Error("--url: " + scheme + " is not supported; use http://HOST:PORT");
    rest = rest.substr(scheme_end + 3);
  }
  const auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  ep.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  if (ep.prefix.size() >= 3 && ep.prefix.compare(ep.prefix.size() - 3, 3, "/v1") == 0)
    ep.prefix.resize(ep.prefix.size() - 3);
  // An IPv6 address comes in brackets ("[::1]:8080"), so its colons are not the port's.
  std::string port;
  if (!hostport.empty() && hostport.front() == '[') {
    const auto close = hostport.find(']');
    if (close == std::string::npos) throw Error("--url: no ']' after the IPv6 address in '" + url + "'");
    const std::string after = hostport.substr(close + 1);
    if (!after.empty() && after.front() != ':') throw Error("--url: unexpected '" + after + "' in '" + url + "'");
    port = after.empty() ? "80" : after.substr(1);
    hostport = hostport.substr(1, close - 1);
  } else if (const auto colon = hostport.rfind(':'); colon != std::string::npos) {
    port = hostport.substr(colon + 1);
    hostport = hostport.substr(0, colon);
  } else {
    port = "80";
  }
  const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  ep.port = digits ? std::stoi(port) : 0;
  if (ep.port < 1 || ep.port > 65535) throw Error("--url: bad port in '" + url + "' (expected 1-65535)");
  if (hostport.empty()) throw Error("--url: no host in '" + url + "'");
  ep.host = hostport;
  return ep;
}

HttpReply http_get(const HttpEndpoint& ep, const std::string& path) {
  return from(client(ep)->Get(ep.prefix + path));
}

HttpReply http_post(const HttpEndpoint& ep, const std::string& path, const std::string& json_body) {
  return from(client(ep)->Post(ep.prefix + path, json_body, "application/json"));
}

HttpReply http_post_sse(const HttpEndpoint& ep, const std::string& path, const std::string& json_body,
                        const std::function<bool(const std::string&)>& on_event) {
  auto c = client(ep);
  httplib::Request req;
  req.method = "POST";
  req.path = ep.prefix + path;
  req.body = json_body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  HttpReply out;
  bool event_stream = false;
  std::string pending;
  req.response_handler = [&](const httplib::Response& res) {
    out.status = res.status;
    event_stream = res.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (!event_stream) {
      out.body.append(data, len);
      return true;
    }
    pending.append(data, len);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      size_t line_start = 0;
      while (line_start < event.size()) {
        size_t line_end = event.find('\n', line_start);
        if (line_end == std::string::npos) line_end = event.size();
        const std::string line = event.substr(line_start, line_end - line_start);
        line_start = line_end + 1;
        if (line.rfind("data:", 0) != 0) continue;  // comments and other fields
        std::string payload = line.substr(5);
        if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
        if (payload == "[DONE]") out.done = true;
        if (!on_event(payload)) return false;
      }
    }
    return true;
  };
  const httplib::Result r = c->send(req);
  if (!r) out.error = describe(r.error());
  return out;
}

}  // namespace sy
