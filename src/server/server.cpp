#include "server/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "base/ascii.h"
#include "base/error.h"
#include "base/json_text.h"
#include "server/completion.h"
#include "server/http_task_queue.h"
#include "server/json_fields.h"
#include "server/openai.h"
#include "server/tokenize_api.h"

namespace sy {

using json = nlohmann::json;

// cpp-httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once
// overflows it, and the dropped SYNs cost those clients a 1 s retransmission. Listening
// again on the bound socket raises the backlog (Linux allows it).
class HttpListener : public httplib::Server {
 public:
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }
};

namespace {

// The client port of the routed request this HTTP worker thread is answering, or -1
// (httplib serves a connection's requests one after another on one thread). A request
// httplib could not read is logged without being routed: it was never counted.
thread_local int t_request_peer = -1;

// Ends the reading side of every connection this server accepted (TCP sockets whose local
// port is `port`, the listener aside) but those whose client port is in `busy`: a worker
// waiting on an idle keep-alive connection sees its end at once, where httplib would wait
// out its 5 s keep-alive timeout before it noticed the server stopped (the OpenAI SDKs'
// connection pools hold such connections). A connection whose reply is still being written
// is left alone: httplib takes a connection that reads as ended for a client that left.
// The port of an IPv4 or IPv6 socket address, else -1.
int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return -1;
}

void end_connection_reads(int port, const std::multiset<int>& busy) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd <= 2 || fd == ::dirfd(dir) || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 || port_of(local) != port) continue;
    int listening = 0;
    socklen_t n = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n) != 0 || listening) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || busy.count(port_of(peer))) continue;
    ::shutdown(fd, SHUT_RD);
  }
  ::closedir(dir);
}

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(json_text(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, e.body());
}

// An answer after which the connection ends: for a request whose body is left unread, which
// the next request on a kept-alive connection would otherwise start with (httplib 0.11 keeps
// it open whatever the answer's Connection header says, but drops it when a content provider
// fails; this one fails once the whole answer is written). Not for HEAD, whose answer has no
// body for the provider to write: httplib gives no way to end that connection.
void send_json_and_close(httplib::Response& res, int status, const json& j) {
  res.status = status;
  auto text = std::make_shared<const std::string>(json_text(j));
  res.set_header("Connection", "close");
  res.set_content_provider(text->size(), "application/json",
                           [text](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(text->data() + offset, length);
                             return false;
                           });
}

// The most HTTP worker threads: `asked` (--http-threads), or by default room for every
// running and queued request plus idle keep-alive connections and probes, at least 512.
size_t http_thread_limit(int asked, const EngineConfig& ec) {
  if (asked > 0) return static_cast<size_t>(asked);
  return std::max<size_t>(512, static_cast<size_t>(ec.parallel) + ec.max_queue + 16);
}

// The route a path belongs to, for metrics (bounded label values).
// Every route and its method: /metrics labels, and 405 (with Allow) for a known path asked
// with another method.
struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/completions", "POST"},
    {"/chat/completions", "POST"}, {"/tokenize", "POST"}, {"/detokenize", "POST"},
    {"/v1/models", "GET"}, {"/v1/models/{id}", "GET"}, {"/health", "GET"}, {"/metrics", "GET"}};

std::string route_of(const std::string& path) {
  for (const Route& r : kRoutes) {
    if (path == r.path) return r.path;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// The methods a known route takes, as an Allow header says them ("" for an unknown path).
std::string allowed_methods(const std::string& path) {
  const std::string route = route_of(path);
  for (const Route& r : kRoutes) {
    if (route == r.path) return std::string(r.method) == "GET" ? "GET, HEAD" : r.method;  // httplib answers HEAD
  }
  return "";
}

json too_large_error(size_t limit) {
  return error_json("The request body is too large: the limit is " + std::to_string(limit) + " bytes.",
                    "invalid_request_error", "", "request_too_large");
}

// 404 for a path no route has, 405 (with Allow) for a known path asked with another method.
void send_no_route(const httplib::Request& req, httplib::Response& res) {
  const std::string allow = allowed_methods(req.path);
  if (allow.empty()) {
    send_json(res, 404,
              error_json("Invalid URL (" + req.method + " " + req.path + ")", "invalid_request_error", "",
                         "unknown_url"));
    return;
  }
  res.set_header("Allow", allow);
  send_json(res, 405,
            error_json("Method not allowed: " + req.method + " " + req.path + " (use " + allow + ")",
                       "invalid_request_error", "", "method_not_allowed"));
}

// The requests whose body httplib reads before routing them (its expect_content).
bool httplib_reads_body(const httplib::Request& req) {
  return req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI" ||
         (req.method == "DELETE" && req.has_header("Content-Length"));
}

bool equal_const_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

// The API key check (--api-key); false after answering 401.
bool authorized(const ServerConfig& cfg, const httplib::Request& req, httplib::Response& res) {
  if (cfg.api_key.empty() || req.path == "/health" || req.path == "/metrics") return true;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme's name is case-insensitive (RFC 9110): "bearer KEY" is as good.
  const size_t n = std::string("Bearer ").size();
  if (ascii_lower(auth.substr(0, n)) == "bearer " && equal_const_time(auth.substr(n), cfg.api_key)) return true;
  res.set_header("WWW-Authenticate", "Bearer");
  send_json(res, 401,
            error_json(auth.empty() ? "You didn't provide an API key. Pass it in the Authorization header: "
                                      "'Authorization: Bearer KEY'."
                                    : "Incorrect API key provided.",
                       "invalid_request_error", "", "invalid_api_key"));
  return false;
}

using BodyHandler = std::function<void(const httplib::Request&, httplib::Response&, const std::string& body)>;

// A route that reads its request's body first, within --max-body whatever its transfer or
// content encoding, then checks the API key, then runs `handler` on the body. httplib holds
// the limit against Content-Length only: a chunked body, or a gzip one it unpacks, would be
// read whole whatever its size. And a 401 before the body is read would leave that body to
// be read as the next request on a kept-alive connection.
httplib::Server::HandlerWithContentReader read_body_then(const ServerConfig& cfg, BodyHandler handler) {
  return [&cfg, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& read) {
    // httplib's plain reader throws on a multipart body (it feeds the form parser null
    // callbacks); no route here takes one.
    if (req.is_multipart_form_data()) {
      send_json_and_close(res, 415,
                          error_json("multipart/form-data bodies are not accepted (no file or audio endpoints "
                                     "here); send JSON.",
                                     "invalid_request_error", "", "unsupported_media_type"));
      return;
    }
    std::string body;
    bool too_large = false;
    const bool whole = read([&](const char* data, size_t n) {
      too_large = body.size() + n > cfg.max_body_bytes;
      if (!too_large) body.append(data, n);
      return !too_large;
    });
    // A Content-Length past the limit: httplib reads and drops the body itself and sets 413,
    // so the connection is in step and may stay open.
    if (!whole && !too_large && res.status == 413) {
      send_json(res, 413, too_large_error(cfg.max_body_bytes));
      return;
    }
    if (!whole && !too_large) {
      send_json_and_close(res, 400,
                          error_json("The request body could not be read (cut short, or a bad chunked or gzip "
                                     "encoding).",
                                     "invalid_request_error", "", "bad_http_request"));
      return;
    }
    if (too_large) {  // the rest of the body is not read: the connection ends with the answer
      send_json_and_close(res, 413, too_large_error(cfg.max_body_bytes));
      return;
    }
    if (authorized(cfg, req, res)) handler(req, res, body);
  };
}

}  // namespace

Server::Server(Engine& engine, ServerConfig cfg)
    : engine_(engine),
      cfg_(std::move(cfg)),
      http_(std::make_unique<HttpListener>()),
      started_(Clock::now()) {
  const Tokenizer& tok = engine_.model().tokenizer();
  const std::string bos = tok.bos_id() >= 0 ? tok.token_text(tok.bos_id()) : "";
  const std::string eos = tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : "";
  if (!cfg_.chat_template.empty()) {
    chat_ = ChatTemplate::named(cfg_.chat_template, bos, eos);
  } else if (!cfg_.chat_template_text.empty()) {
    chat_ = ChatTemplate::detect(cfg_.chat_template_text, bos, eos, cfg_.chat_template_origin);
    if (!chat_.supported())
      throw Error(cfg_.chat_template_origin + ": the template is none of the chat formats switchyard renders; "
                  "pick the closest with --chat-template (" + ChatTemplate::supported_names() + ")");
  } else {
    chat_ = ChatTemplate::detect(engine_.model().file().get_string("tokenizer.chat_template", ""), bos, eos);
  }
  const size_t most = http_thread_limit(cfg_.http_threads, engine_.config());
  http_->new_task_queue = [this, most] {
    auto* q = new ElasticTaskQueue(std::min<size_t>(most, 8), most);
    http_queue_.store(q);
    return q;
  };
  http_->set_payload_max_length(cfg_.max_body_bytes);
  // cpp-httplib's default sets SO_REUSEPORT, with which a second server on a busy port
  // binds too and the kernel splits the connections between the two, silently. Only
  // SO_REUSEADDR: a restart may still bind while old connections sit in TIME_WAIT.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http_->set_keep_alive_max_count(1000);
  routes();
}

Server::~Server() = default;

int Server::bind() {
  if (cfg_.port == 0) {
    port_ = http_->bind_to_any_port(cfg_.host);
  } else {
    port_ = http_->bind_to_port(cfg_.host, cfg_.port) ? cfg_.port : -1;
  }
  if (port_ >= 0) http_->widen_backlog();
  if (port_ < 0) {
    throw Error("cannot listen on " + cfg_.host + ":" + std::to_string(cfg_.port) +
                " (in use, or not an address of this machine); pick another --host/--port");
  }
  return port_;
}

void Server::run() {
  {
    std::lock_guard lock(lifecycle_mu_);
    if (draining_) return;
    listening_ = true;
  }
  http_->listen_after_bind();
  http_queue_.store(nullptr);  // httplib deletes it once its threads are joined
}

void Server::shutdown(std::chrono::milliseconds grace) {
  bool listening;
  {
    std::lock_guard lock(lifecycle_mu_);
    draining_ = true;
    listening = listening_;
  }
  engine_.stop_accepting();
  if (listening) {
    for (int i = 0; i < 200 && !http_->is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_->stop();  // closes the listener; handlers in flight run to their end
  }
  if (!engine_.wait_idle(grace)) {
    std::fprintf(stderr, "serve: cancelling the requests still running after %.1f s\n",
                 grace.count() / 1000.0);
    engine_.cancel_all();
    engine_.wait_idle(std::chrono::seconds(30));
  }
  if (!listening) return;
  // Idle connections are ended now; those still writing a reply (a stream's last chunks
  // to a slow client) as they finish, for up to 2 s. A reply longer than that goes on to
  // its end, and its connection's worker then sees the stop after httplib's own wait.
  for (int i = 0; i < 100; ++i) {
    std::multiset<int> busy;
    {
      std::lock_guard lock(in_flight_mu_);
      busy = in_flight_peers_;
    }
    end_connection_reads(port_, busy);
    if (busy.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Server::note_request_start(int peer_port) {
  note_request_end();  // a request this thread routed but never logged (no such path is known) is over
  std::lock_guard lock(in_flight_mu_);
  t_request_peer = peer_port;
  in_flight_peers_.insert(peer_port);
}

void Server::note_request_end() {
  std::lock_guard lock(in_flight_mu_);
  if (const auto it = in_flight_peers_.find(t_request_peer); t_request_peer >= 0 && it != in_flight_peers_.end())
    in_flight_peers_.erase(it);
  t_request_peer = -1;
}

void Server::cancel_running() {
  engine_.cancel_all();
}

std::string Server::metrics_text() const {
  ServerInfo info;
  info.model_id = cfg_.model_id;
  info.parallel = engine_.config().parallel;
  info.ctx_size = engine_.config().ctx_size;
  info.max_queue = engine_.config().max_queue;
  info.uptime_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  // Handlers run on the queue's threads, so it outlives this call when one asks.
  if (const ElasticTaskQueue* q = http_queue_.load()) {
    info.http_threads = static_cast<int64_t>(q->threads());
    info.http_threads_limit = static_cast<int64_t>(q->limit());
  }
  const TieredExpertStore* store = engine_.model().tiered_experts();
  ExpertCacheInfo cache;
  if (store) cache = {store->policy_name(), store->capacity(), store->stats()};
  return render_metrics(engine_.stats().snapshot(), http_metrics_.snapshot(), info, store ? &cache : nullptr);
}

void Server::routes() {
  httplib::Server& s = *http_;
  const int64_t created = static_cast<int64_t>(std::time(nullptr));

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    note_request_start(req.remote_port);
    // Bodies httplib would not read, or would read in a way that can desync: refused, and the
    // connection ends (what follows on it is not a request a client meant): a body on a
    // method that takes none, both a length and a chunked encoding (a classic way to smuggle
    // a request past a proxy), an HTTP/2 preface.
    const bool has_body = req.has_header("Transfer-Encoding") ||
                          (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
    const char* refused = req.method == "PRI" ? "HTTP/2 is not served; use HTTP/1.1"
                          : req.has_header("Transfer-Encoding") && req.has_header("Content-Length")
                              ? "a request may not give both Content-Length and Transfer-Encoding"
                          : has_body && !httplib_reads_body(req) ? "this method takes no request body"
                                                                 : nullptr;
    if (refused) {
      send_json_and_close(res, 400,
                          error_json(std::string("The HTTP request was refused: ") + refused + ".",
                                     "invalid_request_error", "", "bad_http_request"));
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib decodes gzip, deflate and br bodies (these exact names); any other encoding
    // it would read as plain bytes, to fail as JSON with a misleading message. Refused
    // before the body is read, with the connection.
    const std::string encoding = req.get_header_value("Content-Encoding");
    const bool decoded = encoding.empty() || encoding == "gzip" || encoding == "deflate" || encoding == "br" ||
                         ascii_iequals(encoding, "identity");
    if (has_body && !decoded) {
      send_json_and_close(res, 415,
                          error_json("Content-Encoding '" + escape_controls(encoding) +
                                         "' is not supported: send the body as it is, or as one of gzip, "
                                         "deflate, br.",
                                     "invalid_request_error", "", "unsupported_content_encoding"));
      return httplib::Server::HandlerResponse::Handled;
    }
    // A browser's preflight carries no API key: answered before the key check. Its
    // Access-Control-Allow-Origin comes with every answer's, in the post-routing handler.
    if (cfg_.cors.enabled() && req.method == "OPTIONS") {
      const std::string origin = req.get_header_value("Origin");
      if (cfg_.cors.allow_origin(origin).empty()) {
        send_json(res, 403,
                  error_json("Origin '" + origin + "' may not call this server; start it with --cors-origin " +
                                 (origin.empty() ? std::string("ORIGIN") : origin) + " (or '*') to allow it.",
                             "invalid_request_error", "", "origin_not_allowed"));
        return httplib::Server::HandlerResponse::Handled;
      }
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      // Whatever headers the page asks to send (client libraries add their own, such as the
      // OpenAI SDKs' x-stainless-*): they are only request headers.
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
      res.set_header("Access-Control-Max-Age", "600");
      return httplib::Server::HandlerResponse::Handled;
    }
    // Requests with a body are checked once it is read (read_body_then): an answer now would
    // leave the body to be read as the next request on a kept-alive connection.
    if (httplib_reads_body(req) || authorized(cfg_, req, res)) return httplib::Server::HandlerResponse::Unhandled;
    return httplib::Server::HandlerResponse::Handled;
  });

  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return;  // our own errors already carry an OpenAI body
    if (res.status == 404) {
      send_no_route(req, res);
    } else if (res.status == 413) {
      send_json(res, 413, too_large_error(cfg_.max_body_bytes));
    } else if (res.status == 400) {  // httplib could not read the request: what follows on it is no request
      send_json_and_close(res, 400,
                error_json("The HTTP request could not be read: check its request line and headers; a POST needs "
                           "a body with a Content-Length header or chunked transfer encoding.",
                           "invalid_request_error", "", "bad_http_request"));
    } else {
      send_json(res, res.status,
                error_json("The request could not be handled (HTTP " + std::to_string(res.status) + ").",
                           res.status >= 500 ? "server_error" : "invalid_request_error", "", ""));
    }
  });

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    // Thrown anywhere, maybe with a body half read: the connection ends with the answer.
    send_json_and_close(res, 500, error_json(message_of(ep, "internal error"), "server_error", "", ""));
  });

  // Counted before the response is written (the logger runs after the client already has it,
  // so a client reading /metrics right after a reply could miss its own request).
  s.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    http_metrics_.record(route_of(req.path), res.status);
    // Every answer, errors and streams included (this runs before the headers are written).
    if (cfg_.cors.enabled()) {
      const std::string allowed = cfg_.cors.allow_origin(req.get_header_value("Origin"));
      if (!allowed.empty()) {
        res.set_header("Access-Control-Allow-Origin", allowed);
        res.set_header("Access-Control-Expose-Headers", "Retry-After");
      }
      if (cfg_.cors.varies()) res.set_header("Vary", "Origin");
    }
  });
  // httplib logs a request once its answer is written, streams included.
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    note_request_end();
    if (!cfg_.log_requests) return;
    // The path arrives percent-decoded: control characters (a "%0A") would forge log lines.
    std::fprintf(stderr, "serve: %s %s %d\n", req.method.c_str(), escape_controls(req.path).c_str(), res.status);
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const auto st = engine_.stats().snapshot();
    json j = {{"status", draining_ ? "shutting down" : "ok"},
              {"queue_depth", st.queue_depth},
              {"running", st.running}};
    send_json(res, draining_ ? 503 : 200, j);
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });

  auto model_json = [this, created] {
    const HParams& hp = engine_.model().hparams();
    const Tokenizer& tok = engine_.model().tokenizer();
    return json{{"id", cfg_.model_id},
                {"object", "model"},
                {"created", created},
                {"owned_by", "switchyard"},
                {"meta",
                 {{"n_vocab", tok.n_vocab()},
                  {"n_ctx", engine_.config().ctx_size},
                  {"n_ctx_train", hp.n_ctx_train},
                  {"n_layer", hp.n_layer},
                  {"n_embd", hp.n_embd},
                  {"n_expert", hp.n_expert},
                  {"n_expert_used", hp.n_expert_used},
                  {"parallel", engine_.config().parallel},
                  {"chat_template", chat_.name()}}}};
  };
  s.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_json()})}});
  });
  s.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == cfg_.model_id) return send_json(res, 200, model_json());
    send_error(res, model_not_found(req.matches[1].str(), cfg_.model_id));
  });

  // Tokenizer endpoints (server/tokenize_api.h).
  auto tokenizer_endpoint = [this](bool decode) {
    return read_body_then(cfg_, [this, decode](const httplib::Request&, httplib::Response& res, const std::string& text) {
      const Tokenizer& tok = engine_.model().tokenizer();
      try {
        const json body = parse_json_body(text);
        send_json(res, 200,
                  decode ? detokenize_response(body, tok, cfg_.model_id)
                         : tokenize_response(body, tok, cfg_.model_id, engine_.config().ctx_size));
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
  };
  s.Post("/tokenize", tokenizer_endpoint(false));
  s.Post("/detokenize", tokenizer_endpoint(true));

  auto completion = [this](Endpoint ep) {
    return read_body_then(cfg_, [this, ep](const httplib::Request&, httplib::Response& res, const std::string& text) {
      const Tokenizer& tok = engine_.model().tokenizer();
      try {
        if (draining_)
          throw ApiError(503, "The server is shutting down.", "", "server_shutting_down", "server_error");
        const json body = parse_json_body(text);
        static thread_local std::mt19937_64 seeds{std::random_device{}()};
        ApiContext ctx{
            &tok, &chat_, cfg_.model_id, engine_.config().ctx_size, engine_.config().max_queue, seeds() >> 1};
        CompletionJob job = parse_completion_request(body, ep, ctx);
        const bool stream = job.stream;
        CompletionRun::Meta meta{random_id(ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-"),
                                 static_cast<int64_t>(std::time(nullptr)), cfg_.model_id, "fp_switchyard"};
        // The completion's id as the request id OpenAI's SDKs read (`_request_id`), for logs.
        res.set_header("x-request-id", meta.id);
        auto run = std::make_shared<CompletionRun>(engine_, tok, std::move(job), std::move(meta));
        Engine::Submit st;
        try {
          st = run->submit();
        } catch (const ApiError&) {
          throw;
        } catch (const Error& e) {
          throw ApiError(400, e.what());
        }
        if (st == Engine::Submit::QueueFull) {
          res.set_header("Retry-After", "1");
          throw ApiError(
              503,
              "The server is overloaded: its queue of waiting requests is full. Retry after a short wait.",
              "", "queue_full", "server_error");
        }
        if (st == Engine::Submit::ShuttingDown)
          throw ApiError(503, "The server is shutting down.", "", "server_shutting_down", "server_error");

        auto provider = [run, stream](size_t, httplib::DataSink& sink) {
          ResponseSink out{[&sink](const std::string& d) { return sink.write(d.data(), d.size()); },
                           [&sink] { return sink.is_writable(); }};
          // False: the client went away, or a JSON reply failed after its status went out.
          if (!(stream ? run->stream(out) : run->respond(out))) return false;
          sink.done();
          return true;
        };
        if (stream) {
          res.set_header("Cache-Control", "no-cache");
          res.set_header("X-Accel-Buffering", "no");
        }
        // Chunked even for JSON: the handler keeps watching the connection while the
        // engine works, and cancels the request if the client leaves.
        res.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider,
                                         [run](bool) { run->cancel(); });
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    });
  };
  for (const char* prefix : {"/v1", ""}) {
    s.Post(std::string(prefix) + "/completions", completion(Endpoint::Completions));
    s.Post(std::string(prefix) + "/chat/completions", completion(Endpoint::Chat));
  }
  // Any other path with a body: read it within --max-body too (httplib would read it whole
  // into the request first), then 404 or 405 as for a request without one.
  auto elsewhere = read_body_then(cfg_, [](const httplib::Request& req, httplib::Response& res, const std::string&) {
    send_no_route(req, res);
  });
  s.Post(".*", elsewhere);
  s.Put(".*", elsewhere);
  s.Patch(".*", elsewhere);
  s.Delete(".*", elsewhere);
}

}  // namespace sy
