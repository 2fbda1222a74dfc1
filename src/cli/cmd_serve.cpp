// switchyard serve: the OpenAI-compatible HTTP server over the continuous-batching engine.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/whole_file.h"
#include "base/worker_signals.h"
#include "cli/common.h"
#include "cli/version.h"
#include "experts/trace.h"
#include "runtime/engine.h"
#include "server/cors.h"
#include "server/server.h"

namespace sy::cli {
namespace {

struct ServeArgs {
  ModelArgs m;
  EngineConfig e;
  ServerConfig s;
  double shutdown_timeout = 30.0;
  std::string alias;
  std::string trace;  // --trace-experts
  std::string chat_template_file;
  std::vector<std::string> cors_origins;  // --cors-origin as given (ServerConfig::cors holds them parsed)
};

// Waits for SIGINT/SIGTERM (blocked in every thread, so only this one sees them): the
// first starts a graceful shutdown, the second cancels what is still running.
class SignalWatcher {
 public:
  SignalWatcher(Server& server, std::chrono::milliseconds grace) : server_(server), grace_(grace) {
    thread_ = std::thread([this] { watch(); });
  }
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
    if (shutdown_.joinable()) shutdown_.join();
  }

 private:
  void watch() {
    const sigset_t set = stop_signals();
    const timespec tick{0, 100 * 1000 * 1000};
    int count = 0;
    while (!done_) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig < 0) continue;
      if (++count == 1) {
        std::fprintf(
            stderr,
            "serve: %s: no new requests; finishing the running ones (up to %g s; again to cancel them)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", grace_.count() / 1000.0);
        shutdown_ = std::thread([this] { server_.shutdown(grace_); });
      } else {
        std::fprintf(stderr, "serve: cancelling the running requests\n");
        server_.cancel_running();
      }
    }
  }

  Server& server_;
  std::chrono::milliseconds grace_;
  std::atomic<bool> done_{false};
  std::thread thread_, shutdown_;
};

}  // namespace

void add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  c->footer(
      "Example: switchyard serve -m models/tiny-mixtral-f16.gguf --port 8080 --parallel 16\n"
      "  then:  curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\\n"
      "           -d '{\"model\": \"tiny-mixtral-f16\", \"prompt\": \"In the beginning\", \"max_tokens\": "
      "32}'\n"
      "Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health, GET "
      "/metrics.");
  a->m.add_to(*c);
  c->add_option("--host", a->s.host, "Address to listen on (default: loopback only)")
      ->check(CLI::Validator([](const std::string& h) { return h.empty() ? std::string("must not be empty") : ""; },
                             "ADDRESS"))
      ->capture_default_str();
  c->add_option("--port", a->s.port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--parallel", a->e.parallel, "Requests in the running batch at most (KV slots)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c->add_option("-c,--ctx-size", a->e.ctx_size,
                "Context per request: prompt + generated tokens (default: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
  c->add_option("--kv-size", a->e.kv_tokens,
                "KV cache pool in token positions, shared by all requests (default: parallel x ctx-size, at "
                "most ~2 GiB or half the memory left)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  c->add_option("--kv-block-size", a->e.block_size, "Positions per KV cache block")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  c->add_option("-b,--batch-size", a->e.batch_tokens,
                "Tokens per engine step (decode tokens plus prefill chunks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  c->add_option("--max-queue", a->e.max_queue, "Waiting requests beyond which new ones get 503 + Retry-After")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  c->add_flag_callback(
      "--no-prefix-reuse", [a] { a->e.prefix_reuse = false; },
      "Recompute shared prompt prefixes instead of reusing the K/V blocks of earlier requests");
  c->add_option("--api-key", a->s.api_key,
                "Require 'Authorization: Bearer KEY' on /v1/* (also from $SWITCHYARD_API_KEY)")
      ->envname("SWITCHYARD_API_KEY");
  c->add_option("--cors-origin", a->cors_origins,
                "Let web pages from this origin call the API from a browser (scheme://host[:port], or '*' for "
                "any); repeat for several. Off by default: any page the user opens could use the server");
  c->add_option("--alias", a->alias,
                "Model name clients pass as \"model\" (default: the file name without .gguf)");
  auto* named = c->add_option(
      "--chat-template", a->s.chat_template,
      "Chat format instead of the model's tokenizer.chat_template: " + ChatTemplate::supported_names());
  c->add_option("--chat-template-file", a->chat_template_file,
                "Jinja chat template to use instead of the model's (its family and variant are read from it)")
      ->excludes(named);
  c->add_option("--max-body", a->s.max_body_bytes, "Largest request body in bytes (larger: 413)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  c->add_option("--http-threads", a->s.http_threads,
                "Most HTTP worker threads, one per open connection (a stream holds one for its whole "
                "generation, an idle keep-alive connection until it times out); they start as connections "
                "need them and idle ones end (default: 512, or parallel + max-queue + 16 if more)")
      ->check(CLI::Range(1, 65536));
  c->add_option("--shutdown-timeout", a->shutdown_timeout,
                "Seconds running requests get to finish after SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 86400.0) &
              CLI::Validator([](const std::string& v) { return std::isnan(std::strtod(v.c_str(), nullptr)) ? "must be a number" : ""; },
                             "", "not NaN"))
      ->capture_default_str();
  c->add_flag("--log-requests", a->s.log_requests, "Log every HTTP request to stderr");
  c->add_option("--trace-experts", a->trace,
                "Record each engine step's per-expert token counts to FILE (binary; *.jsonl: JSON lines), "
                "written out when the server stops");
  c->callback([a] {
    if (!a->chat_template_file.empty()) {
      a->s.chat_template_text = read_whole_file(a->chat_template_file, "--chat-template-file");
      if (a->s.chat_template_text.empty()) throw Error("--chat-template-file: " + a->chat_template_file + " is empty");
      a->s.chat_template_origin = "--chat-template-file " + a->chat_template_file;
    }
    a->s.cors = CorsPolicy(a->cors_origins);  // a bad origin stops serve before the model loads
    auto model = load_model(a->m);
    // Ctrl-C during the load just ends the process. After it, block the shutdown signals
    // before any serving thread exists, so that only the watcher sees them. (Threads the
    // load started, the expert store's readers and thread pools, block them themselves:
    // base/worker_signals.h.)
    block_stop_signals_in_this_thread();
    signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

    a->e.n_threads = a->m.n_threads();
    a->e.moe = a->m.moe();
    std::unique_ptr<TraceWriter> trace;  // declared before the engine, which holds a pointer to it
    a->s.model_id = a->alias.empty() ? std::filesystem::path(a->m.model).stem().string() : a->alias;
    Engine engine(*model, a->e);
    Server server(engine, a->s);
    const int port = server.bind();
    if (!a->trace.empty()) {
      // Created once the server can start, so that a failed start leaves an existing file
      // alone. Its counts are sized for the most tokens a step carries: --batch-size.
      trace = std::make_unique<TraceWriter>(a->trace, TraceInfo::from_hparams(model->hparams(), a->m.gating == "static"),
                                            engine.config().batch_tokens);
      engine.set_routing_observer(trace.get());
    }
    const EngineConfig& ec = engine.config();
    std::fprintf(stderr, "serve: %s\n", version_line().c_str());
    warn_beyond_training_context("serve", model->hparams(), ec.ctx_size);
    const ChatTemplate& ct = server.chat_template();
    if (!ct.supported()) {
      std::fprintf(
          stderr,
          "serve: warning: the model's chat template is not supported (%s); /v1/chat/completions will "
          "answer 400 until the server is started with --chat-template one of: %s (or --chat-template-file)\n",
          ct.origin().c_str(), ChatTemplate::supported_names().c_str());
    } else {
      const std::string variant = describe_chat_style(ct.style());
      std::fprintf(stderr, "serve: chat template %s (%s%s%s)\n", ct.name().c_str(), ct.origin().c_str(),
                   variant.empty() ? "" : "; ", variant.c_str());
    }
    if (a->s.api_key.empty() && a->s.host != "127.0.0.1" && a->s.host != "localhost" && a->s.host != "::1") {
      std::fprintf(stderr,
                   "serve: warning: listening on %s without --api-key: anyone who can reach it can use it\n",
                   a->s.host.c_str());
    }
    if (a->s.cors.enabled()) {
      std::string list;
      for (const std::string& o : a->cors_origins) list += (list.empty() ? "" : ", ") + o;
      std::fprintf(stderr, "serve: web pages from %s may call the API from a browser (--cors-origin)\n", list.c_str());
      if (a->s.cors.any() && a->s.api_key.empty()) {
        std::fprintf(stderr,
                     "serve: warning: --cors-origin '*' without --api-key: any web page opened on a machine that "
                     "reaches the server can use it\n");
      }
    }
    std::fprintf(
        stderr,
        "serve: model %s | parallel %d | ctx %lld per request | KV pool %lld blocks x %lld positions | "
        "batch %lld tokens | queue %zu | %d threads\n",
        a->s.model_id.c_str(), ec.parallel, static_cast<long long>(ec.ctx_size),
        static_cast<long long>(engine.stats().snapshot().kv_blocks_total),
        static_cast<long long>(ec.block_size), static_cast<long long>(ec.batch_tokens), ec.max_queue,
        a->e.n_threads);
    // An IPv6 address goes in brackets in a URL ("http://[::1]:8080"), as clients expect it.
    const bool ipv6 = a->s.host.find(':') != std::string::npos;
    std::printf("serve: listening on http://%s%s%s:%d\n", ipv6 ? "[" : "", a->s.host.c_str(), ipv6 ? "]" : "",
                port);
    std::fflush(stdout);
    {
      SignalWatcher watcher(server,
                            std::chrono::milliseconds(static_cast<int64_t>(a->shutdown_timeout * 1000)));
      server.run();
    }
    engine.stop();
    if (trace) {
      trace->close();
      std::fprintf(stderr, "serve: expert trace %s: %lld steps\n", trace->path().c_str(),
                   static_cast<long long>(trace->n_steps()));
    }
    std::fprintf(stderr, "serve: stopped\n");
  });
}

}  // namespace sy::cli
