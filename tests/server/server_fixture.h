// A real server on a loopback port, in process: the tiny model, an Engine and the HTTP
// Server on a free port, served from a background thread. Plus small HTTP helpers.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "model/model.h"
#include "runtime/engine.h"
#include "server/server.h"
#include "server/sse_client.h"

namespace sy::test {

inline std::string tiny_model_path() {
  return std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
}

inline const Model& tiny_model() {
  static std::unique_ptr<Model> m = Model::load(tiny_model_path());
  return *m;
}

// A gauge or counter in a /metrics page: the first sample whose name and labels start with
// `prefix` (-1, and a test failure, when there is none).
inline double metric_in(const std::string& page, const std::string& prefix) {
  size_t pos = 0;
  while ((pos = page.find(prefix, pos)) != std::string::npos) {
    if (pos == 0 || page[pos - 1] == '\n') {
      const size_t sp = page.find(' ', pos);
      return std::stod(page.substr(sp + 1, page.find('\n', sp) - sp - 1));
    }
    pos += prefix.size();
  }
  ADD_FAILURE() << "no metric " << prefix;
  return -1;
}

class TestServer {
 public:
  explicit TestServer(EngineConfig ec = {}, ServerConfig sc = {}) : TestServer(tiny_model(), ec, sc) {}
  TestServer(const Model& model, EngineConfig ec, ServerConfig sc = {}) {
    if (ec.n_threads == 0) ec.n_threads = 2;
    engine_ = std::make_unique<Engine>(model, ec);
    sc.port = 0;
    if (sc.model_id.empty()) sc.model_id = "tiny";
    server_ = std::make_unique<Server>(*engine_, sc);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() {
    server_->shutdown(std::chrono::milliseconds(0));
    thread_.join();
    engine_->stop();
  }

  HttpEndpoint endpoint(double timeout_s = 60) const {
    HttpEndpoint ep;
    ep.port = port_;
    ep.timeout_s = timeout_s;
    return ep;
  }
  Engine& engine() { return *engine_; }
  int port() const { return port_; }

  // A gauge or counter from /metrics (the first sample whose name and labels start so).
  double metric(const std::string& prefix) const {
    const HttpReply r = http_get(endpoint(), "/metrics");
    EXPECT_EQ(r.status, 200);
    return metric_in(r.body, prefix);
  }

  // Waits until metric(prefix) == value (a second at most, in small steps).
  bool wait_metric(const std::string& prefix, double value, double seconds = 5) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (metric(prefix) == value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return metric(prefix) == value;
  }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  int port_ = -1;
};

// The text of one completion from a streamed response (choice 0), the finish reason and
// the usage when the stream carried it.
struct Streamed {
  int status = 0;
  std::string text, finish;
  nlohmann::json usage;
  bool done = false;
  int chunks = 0;
  std::string body;
};

inline Streamed post_stream(const HttpEndpoint& ep, const std::string& path, const nlohmann::json& body) {
  Streamed s;
  const HttpReply r = http_post_sse(ep, path, body.dump(), [&](const std::string& data) {
    if (data == "[DONE]") return true;
    const auto j = nlohmann::json::parse(data);
    if (j.contains("usage") && j["usage"].is_object()) s.usage = j["usage"];
    for (const auto& c : j["choices"]) {
      s.chunks++;
      if (c.contains("text")) s.text += c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].contains("content"))
        s.text += c["delta"]["content"].get<std::string>();
      if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
    }
    return true;
  });
  s.status = r.status;
  s.done = r.done;
  s.body = r.body;
  return s;
}

// `switchyard generate` as a user runs it: the continuation it prints after the prompt.
inline std::string generate_cli(const std::string& prompt, int n) {
  const std::string cmd = std::string(SY_CLI_PATH) + " generate -m " + tiny_model_path() +
                          " -t 2 --temp 0 -n " + std::to_string(n) + " -p '" + prompt + "' 2>/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::array<char, 4096> buf;
  size_t k;
  while ((k = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), k);
  EXPECT_EQ(pclose(p), 0) << cmd;
  EXPECT_EQ(out.rfind(prompt, 0), 0u) << out;
  EXPECT_FALSE(out.empty() || out.back() != '\n') << out;
  return out.substr(prompt.size(), out.size() - prompt.size() - 1);
}

}  // namespace sy::test
