// `switchyard serve` as a process: it prints where it listens, shuts down cleanly on
// SIGTERM/SIGINT (finishing or cancelling running requests), and the official OpenAI
// Python client works against it (when the openai package is installed).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "experts/trace.h"
#include "server_fixture.h"
#include "support/run_cli.h"
#include "support/shared_data.h"

namespace sy {
namespace {

using json = nlohmann::json;

class ServeProcess {
 public:
  // With capture_log, stderr goes to the same pipe and the lines before "listening on"
  // are kept (log()); serve writes little after them, so the pipe does not fill.
  explicit ServeProcess(const std::vector<std::string>& extra, bool capture_log = false) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    std::vector<std::string> args = {
        SY_CLI_PATH, "serve", "-m", test::tiny_model_path(), "--port", "0", "-t", "2", "--alias", "tiny"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;  // built before fork: the child must not allocate
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      if (capture_log) dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    // "serve: listening on http://127.0.0.1:PORT"
    std::string line;
    auto whole_line = [&] {
      const size_t at = line.find("listening on");
      return at != std::string::npos && line.find('\n', at) != std::string::npos;
    };
    while (!whole_line()) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 20000) <= 0) break;
      char buf[256];
      const ssize_t n = read(out_, buf, sizeof(buf));
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    log_ = line.substr(0, line.find("serve: listening on"));
    line = line.substr(log_.size());
    line = line.substr(0, line.find('\n') + 1);
    const auto colon = line.rfind(':');
    EXPECT_NE(line.find("listening on http://127.0.0.1:"), std::string::npos) << line;
    if (colon != std::string::npos) port_ = std::atoi(line.c_str() + colon + 1);
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  void signal(int sig) { kill(pid_, sig); }
  const std::string& log() const { return log_; }
  // What the process wrote after its listening line, read to the end (call once it exited).
  std::string rest_of_output() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(out_, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  // Exit status, or -1 if it did not exit within `seconds`.
  int wait_exit(double seconds) {
    for (int i = 0; i < seconds * 100; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10000);
    }
    return -1;
  }
  HttpEndpoint endpoint() const {
    HttpEndpoint ep;
    ep.port = port_;
    ep.timeout_s = 30;
    return ep;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string log_;  // stderr before the listening line (capture_log)
  int port_ = 0;
  bool exited_ = false;
};

json long_stream() {
  return {{"model", "tiny"},   {"prompt", "In the beginning"},
          {"max_tokens", 200}, {"ignore_eos", true},
          {"stream", true},    {"stream_options", {{"include_usage", true}}}};
}

// SIGTERM while a stream runs: the stream finishes, then the server exits with status 0.
void sigterm_finishes_the_running_request(const std::vector<std::string>& args) {
  ServeProcess srv(args);
  ASSERT_GT(srv.endpoint().port, 0);
  std::atomic<int> events{0};
  HttpReply reply;
  int64_t generated = 0;
  std::thread client([&] {
    reply = http_post_sse(srv.endpoint(), "/v1/completions", long_stream().dump(), [&](const std::string& d) {
      events++;
      const json j = json::parse(d, nullptr, false);
      if (!j.is_discarded() && j.contains("usage") && j["usage"].is_object())
        generated = j["usage"]["completion_tokens"];
      return true;
    });
  });
  while (events == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  srv.signal(SIGTERM);
  client.join();
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.done) << "the running request finished its stream";
  EXPECT_EQ(generated, 200);
  EXPECT_EQ(srv.wait_exit(20), 0);
  EXPECT_EQ(http_get(srv.endpoint(), "/health").status, 0) << "nothing listens any more";
}

TEST(ServerProcess, SigtermFinishesRunningRequestsThenExitsCleanly) {
  sigterm_finishes_the_running_request({"--parallel", "4"});
}

// The expert store's I/O threads start while the model loads, before `serve` blocks the
// signals; they must not take SIGTERM (whose default action would end the server at once).
TEST(ServerProcess, SigtermWithAnExpertCacheFinishesRunningRequestsToo) {
  sigterm_finishes_the_running_request({"--parallel", "4", "--expert-cache", "50%"});
}

TEST(ServerProcess, SigintWithoutGraceCancelsRunningRequests) {
  ServeProcess srv({"--shutdown-timeout", "0", "--parallel", "1"});
  std::atomic<int> events{0};
  std::string last;
  HttpReply reply;
  std::thread client([&] {
    json body = long_stream();
    body["max_tokens"] = 250;
    reply = http_post_sse(srv.endpoint(), "/v1/completions", body.dump(), [&](const std::string& d) {
      events++;
      last = d;
      return true;
    });
  });
  while (events == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  srv.signal(SIGINT);
  client.join();
  EXPECT_EQ(srv.wait_exit(20), 0);
  EXPECT_EQ(reply.status, 200);
  // Either it was fast enough to finish, or it was told why it ends early.
  if (!reply.done) {
    EXPECT_NE(last.find("shutting down"), std::string::npos) << last;
  }
}

// A client's idle keep-alive connection (what the OpenAI SDKs' pools hold) does not keep the
// process alive past its grace: httplib's worker waited out its 5 s keep-alive timeout on it.
TEST(ServerProcess, AnIdleKeepAliveConnectionDoesNotDelayTheExit) {
  ServeProcess srv({"--shutdown-timeout", "0", "--parallel", "1"});
  ASSERT_GT(srv.endpoint().port, 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(srv.endpoint().port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  char buf[1024];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // answered; the connection stays open, idle
  srv.signal(SIGTERM);
  // Well inside the 5 s wait, with room for a loaded machine.
  EXPECT_EQ(srv.wait_exit(3), 0) << "the server waited for the idle connection";
  ::close(fd);
}

// A JSON (non-streamed) reply's 200 goes out when it starts. Cancelled at shutdown, it must
// not end as a well-formed 200 holding an error: the transfer breaks, after the reason.
TEST(ServerProcess, JsonReplyCancelledAtShutdownIsABrokenTransfer) {
  ServeProcess srv({"--shutdown-timeout", "0", "--parallel", "1", "-c", "4096"});
  HttpReply reply;
  std::thread client([&] {
    json body = long_stream();
    body.erase("stream");
    body.erase("stream_options");
    body["max_tokens"] = 2000;  // seconds of work, even for the tiny model
    reply = http_post(srv.endpoint(), "/v1/completions", body.dump());
  });
  // Wait until it runs: the running-requests gauge counts it.
  for (int i = 0; i < 2000; ++i) {
    const std::string m = http_get(srv.endpoint(), "/metrics").body;
    if (m.find("\nswitchyard_running_requests 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  srv.signal(SIGINT);
  client.join();
  EXPECT_EQ(srv.wait_exit(20), 0);
  if (reply.status == 200 && reply.error.empty()) {  // fast enough to finish
    EXPECT_TRUE(json::parse(reply.body).contains("choices")) << reply.body;
  } else {
    EXPECT_NE(reply.error, "") << reply.status << " " << reply.body;
  }
}

// serve --trace-experts: the file holds every engine step, each MoE layer's counts sum to
// the step's tokens x top_k, the steps' tokens add up to what /metrics says the server
// computed, and `analyze` reads it.
TEST(ServerProcess, TraceExpertsRecordsEveryStepTheServerRan) {
  const std::string path = ::testing::TempDir() + "serve_trace.sytrace";
  std::remove(path.c_str());
  ServeProcess srv({"--parallel", "4", "--trace-experts", path});
  const std::vector<std::string> prompts = {"In the beginning", "A fool and his money", "Hello"};
  std::vector<std::thread> clients;
  for (const std::string& p : prompts) {
    clients.emplace_back([&srv, p] {
      const json body = {{"model", "tiny"}, {"prompt", p}, {"max_tokens", 12}, {"ignore_eos", true}};
      EXPECT_EQ(http_post(srv.endpoint(), "/v1/completions", body.dump()).status, 200);
    });
  }
  for (auto& c : clients) c.join();
  const HttpReply m = http_get(srv.endpoint(), "/metrics");
  const double computed = test::metric_in(m.body, "switchyard_computed_tokens_total");
  const double steps = test::metric_in(m.body, "switchyard_steps_total");
  ASSERT_GT(computed, 0) << m.body;
  srv.signal(SIGTERM);
  ASSERT_EQ(srv.wait_exit(20), 0);

  const Trace t = read_trace(path);
  EXPECT_EQ(static_cast<double>(t.n_steps()), steps);
  double tokens = 0;
  for (int64_t s = 0; s < t.n_steps(); ++s) {
    tokens += t.tokens[s];
    for (int l = 0; l < t.info.n_moe(); ++l) {
      uint32_t sum = 0;
      for (int e = 0; e < t.info.n_expert; ++e) sum += t.count(s, l, e);
      EXPECT_EQ(sum, t.tokens[s] * static_cast<uint32_t>(t.info.top_k)) << "step " << s << ", MoE layer " << l;
    }
  }
  EXPECT_EQ(tokens, computed);
  const test::CliRun a = test::run_command(std::string(SY_CLI_PATH) + " analyze " + path + " --out " +
                                           ::testing::TempDir() + "serve_trace_analysis");
  EXPECT_EQ(a.code, 0) << a.out;

  // A second server that cannot start (the port is taken) leaves an existing file alone:
  // the trace is created once the server listens.
  const std::string kept = test::read_text_file(path);
  ServeProcess busy({"--parallel", "1"});
  const test::CliRun refused =
      test::run_command(std::string(SY_CLI_PATH) + " serve -m " + test::tiny_model_path() + " --port " +
                        std::to_string(busy.endpoint().port) + " --trace-experts " + path);
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_EQ(test::read_text_file(path), kept);
}

// --log-requests prints paths as they arrive, percent-decoded: control characters are
// escaped, so that a client cannot write lines of its own into the log.
TEST(ServerProcess, RequestLogEscapesControlCharacters) {
  {
    ServeProcess srv({"--log-requests"}, true);
    EXPECT_EQ(http_get(srv.endpoint(), "/x%0Aserve:%20POST%20/v1/completions%20200").status, 404);
    srv.signal(SIGTERM);
    ASSERT_EQ(srv.wait_exit(20), 0);
    const std::string out = srv.rest_of_output();
    EXPECT_NE(out.find("serve: GET /x\\x0Aserve: POST /v1/completions 200 404"), std::string::npos) << out;
    EXPECT_EQ(out.find("\nserve: POST /v1/completions 200"), std::string::npos) << out;
  }
}

// Connections that stay open hold an HTTP thread each (idle keep-alive connections of a
// client's pool, or ones that send nothing until the 5 s read timeout). With more of them
// than the running and queued requests (2 + 4 here), the server still answers at once: a
// fixed pool of parallel + max-queue + 16 threads made the next request wait for one to
// time out, and a 3 s client gave up.
TEST(ServerProcess, ManyOpenConnectionsDoNotStallTheNextRequest) {
  ServeProcess srv({"--parallel", "2", "--max-queue", "4"});
  ASSERT_GT(srv.endpoint().port, 0);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(srv.endpoint().port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);
  }
  HttpEndpoint ep = srv.endpoint();
  ep.timeout_s = 3;
  const HttpReply m = http_get(ep, "/metrics");
  EXPECT_EQ(m.status, 200) << "the request waited behind the silent connections";
  EXPECT_GE(test::metric_in(m.body, "switchyard_http_threads "), 41) << m.body;
  EXPECT_EQ(test::metric_in(m.body, "switchyard_http_threads_limit "), 512);
  const json body = {{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 4}};
  EXPECT_EQ(http_post(ep, "/v1/completions", body.dump()).status, 200);
  for (int fd : idle) close(fd);
}

// --cors-origin: the startup log says which pages may call the server, and warns when any
// page may and no API key is asked for.
TEST(ServerProcess, TheStartupLogNamesTheCorsOrigins) {
  {
    ServeProcess srv({"--cors-origin", "http://localhost:3000", "--cors-origin", "https://a.example"}, true);
    ASSERT_GT(srv.endpoint().port, 0);
    EXPECT_NE(srv.log().find("serve: web pages from http://localhost:3000, https://a.example may call the API"),
              std::string::npos)
        << srv.log();
    EXPECT_EQ(srv.log().find("warning: --cors-origin"), std::string::npos) << srv.log();
  }
  ServeProcess any({"--cors-origin", "*"}, true);
  ASSERT_GT(any.endpoint().port, 0);
  EXPECT_NE(any.log().find("warning: --cors-origin '*' without --api-key"), std::string::npos) << any.log();
}

// `loadgen` as a script sees it: a clean run exits 0; a run whose requests the server
// refuses (prompts longer than its context) still prints its table, then exits non-zero
// naming how many failed and the server's first error.
TEST(ServerProcess, LoadgenExitsNonZeroWhenRequestsFail) {
  ServeProcess srv({"--parallel", "2", "-c", "64"});
  ASSERT_GT(srv.endpoint().port, 0);
  const std::string loadgen = std::string(SY_CLI_PATH) + " loadgen -q --url http://127.0.0.1:" +
                              std::to_string(srv.endpoint().port) + " --concurrency 2 --requests 4 --gen-len 4:4";
  const test::CliRun ok = test::run_command(loadgen + " --prompt-len 8:16");
  EXPECT_EQ(ok.code, 0) << ok.out;
  const test::CliRun bad = test::run_command(loadgen + " --prompt-len 100:100");
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find("concurrency 2"), std::string::npos) << "the table still comes first: " << bad.out;
  EXPECT_NE(bad.out.find("4 of 4 requests failed"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("maximum context length is 64 tokens"), std::string::npos) << bad.out;
}

// Random request bodies (valid and invalid values of every field) from 6 clients at once,
// a third of the streams hung up on, against a scarce KV pool (preemptions) and a 50% expert
// cache: every answer is a 2xx, a 4xx with an error object or a 503, the server keeps
// answering, and once idle it holds no KV block (tests/server/random_requests_check.py).
TEST(ServerProcess, RandomRequestsGetWellFormedAnswers) {
  ServeProcess srv({"--parallel", "4", "-c", "128", "--kv-size", "160", "--kv-block-size", "8", "--expert-cache",
                    "50%"});
  const test::CliRun r = test::run_command("python3 " + std::string(SY_SOURCE_DIR) +
                                           "/tests/server/random_requests_check.py " +
                                           std::to_string(srv.endpoint().port) + " tiny 100 6 1");
  EXPECT_EQ(r.code, 0) << r.out;
  // Streams hung up on last are noticed at their next write: give them a moment to go.
  HttpReply m;
  for (int i = 0; i < 100; ++i) {
    m = http_get(srv.endpoint(), "/metrics");
    const bool idle = test::metric_in(m.body, "switchyard_running_requests") == 0 &&
                      test::metric_in(m.body, "switchyard_queue_depth") == 0;
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(test::metric_in(m.body, "switchyard_running_requests"), 0) << m.body;
  EXPECT_EQ(test::metric_in(m.body, "switchyard_kv_blocks_used"), 0) << m.body;
  EXPECT_GT(test::metric_in(m.body, "switchyard_preemptions_total"), 0) << "the pool was not scarce";
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait_exit(30), 0);
}

TEST(ServerProcess, OfficialOpenAIPythonClient) {
  if (std::system("python3 -c 'import openai' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openai Python package is not installed (scripts/install-deps installs it when pip "
                    "is available)";
  }
  ServeProcess srv({"--parallel", "4"});
  const test::CliRun r = test::run_command("python3 " + std::string(SY_SOURCE_DIR) +
                                           "/tests/server/openai_client_check.py http://127.0.0.1:" +
                                           std::to_string(srv.endpoint().port) + "/v1 tiny");
  EXPECT_EQ(r.code, 0) << r.out;
  srv.signal(SIGTERM);
  EXPECT_EQ(srv.wait_exit(20), 0);
}

}  // namespace
}  // namespace sy
