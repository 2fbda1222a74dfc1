// The OpenAI-compatible HTTP server on cpp-httplib: /v1/completions and
// /v1/chat/completions (JSON or server-sent events), /v1/models, /health and /metrics.
// Handler threads parse and check requests, submit them to the Engine and stream its
// tokens back; they never touch the model.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "runtime/engine.h"
#include "server/chat_template.h"
#include "server/cors.h"
#include "server/metrics.h"

namespace sy {

class HttpListener;  // an httplib::Server
class ElasticTaskQueue;  // the HTTP worker threads

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (see bind())
  std::string api_key;        // when set, /v1/* need "Authorization: Bearer KEY"
  std::string model_id;       // the name clients pass as "model"
  std::string chat_template;  // a format name overriding the model's template
  std::string chat_template_text;    // or a Jinja template overriding it (must be a supported family)
  std::string chat_template_origin = "the given chat template";  // where that text came from
  size_t max_body_bytes = 8u << 20;
  CorsPolicy cors;  // web origins allowed to call the API (--cors-origin); default: none, no CORS
  int http_threads = 0;  // the most HTTP worker threads (0: 512, or parallel + max_queue + 16 if more)
  bool log_requests = false;
};

class Server {
 public:
  // Throws sy::Error for a bad --chat-template, or a chat_template_text of no supported family.
  Server(Engine& engine, ServerConfig cfg);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws sy::Error when it cannot.
  int bind();
  // Serves until shutdown() has stopped the listener and every handler has returned.
  void run();
  // From any thread: stop accepting connections (new API calls get 503 meanwhile), give
  // running requests up to `grace` to finish, cancel the rest. Returns when the engine is
  // idle; run() returns once the last handler has written its response.
  void shutdown(std::chrono::milliseconds grace);
  // Cancels whatever is running now (a second Ctrl-C).
  void cancel_running();

  const ChatTemplate& chat_template() const { return chat_; }
  int port() const { return port_; }

 private:
  void routes();
  std::string metrics_text() const;
  void note_request_start(int peer_port);  // on an HTTP worker thread, when a request is routed
  void note_request_end();                 // there, once its answer is written

  Engine& engine_;
  ServerConfig cfg_;
  ChatTemplate chat_;
  std::unique_ptr<HttpListener> http_;
  HttpMetrics http_metrics_;
  std::atomic<const ElasticTaskQueue*> http_queue_{nullptr};  // while run() serves
  Clock::time_point started_;
  std::mutex lifecycle_mu_;  // orders run() against shutdown()
  std::atomic<bool> draining_{false};
  std::mutex in_flight_mu_;
  std::multiset<int> in_flight_peers_;  // client ports of requests routed and not yet answered in full
  bool listening_ = false;
  int port_ = -1;
};

}  // namespace sy
