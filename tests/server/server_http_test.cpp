// The real server on a loopback port: exact-text parity with `generate` under concurrency,
// streaming against non-streaming, OpenAI-style errors, cancellation and overload.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <map>
#include <random>

#include "base/error.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "support/shared_data.h"
#include "server_fixture.h"

namespace sy {
namespace {

using json = nlohmann::json;
using test::TestServer;

EngineConfig suite_engine() {
  EngineConfig ec;
  ec.parallel = 8;
  ec.ctx_size = 128;
  ec.batch_tokens = 48;  // small, so prompts are prefilled in chunks beside decode tokens
  ec.max_queue = 64;
  return ec;
}

ServerConfig suite_server() {
  ServerConfig sc;
  sc.max_body_bytes = 64 << 10;
  return sc;
}

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { srv_ = new TestServer(suite_engine(), suite_server()); }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static HttpEndpoint ep(double timeout = 60) { return srv_->endpoint(timeout); }
  static TestServer* srv_;
};
TestServer* ServerHttp::srv_ = nullptr;

json completion_body(const std::string& prompt, int max_tokens, bool stream) {
  return {{"model", "tiny"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

TEST_F(ServerHttp, ConcurrentGreedyRequestsMatchGenerate) {
  const std::vector<std::string> prompts = {"A fool and his money",
                                            "In the beginning God",
                                            "The trouble with computers is",
                                            "And the LORD spake unto Moses, saying",
                                            "Hello",
                                            "Q: What is a computer?\nA:"};
  const int n = 24;
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(test::generate_cli(p, n));

  // Every prompt twice at once, streamed and not, so the batch mixes prefill chunks and decodes.
  std::vector<std::string> got(2 * prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      const std::string& p = prompts[i / 2];
      if (i % 2 == 0) {
        const auto s = test::post_stream(ep(), "/v1/completions", completion_body(p, n, true));
        EXPECT_EQ(s.status, 200);
        EXPECT_TRUE(s.done);
        got[i] = s.text;
      } else {
        const HttpReply r = http_post(ep(), "/v1/completions", completion_body(p, n, false).dump());
        EXPECT_EQ(r.status, 200) << r.body;
        got[i] = json::parse(r.body)["choices"][0]["text"];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i / 2]) << "prompt: " << prompts[i / 2];
}

// n choices: the first is the request's own seed's text (what n = 1 gives), the others
// differ from it and from the texts of neighbouring seeds (seed + i once gave choice i of
// seed S the text of seed S + i).
TEST_F(ServerHttp, ChoicesOfOneSeedRepeatNoOtherSeed) {
  const auto texts = [&](int seed, int n) {
    const json body = {{"model", "tiny"}, {"prompt", "The trouble with computers is"}, {"max_tokens", 24},
                       {"temperature", 1.0}, {"seed", seed}, {"n", n}};
    const HttpReply r = http_post(ep(), "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    std::vector<std::string> out;
    for (const auto& c : j["choices"]) out.push_back(c["text"]);
    return out;
  };
  const std::vector<std::string> four = texts(11, 4);
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(texts(11, 1), std::vector<std::string>{four[0]});
  EXPECT_EQ(texts(11, 4), four) << "reproducible";
  for (int i = 1; i < 4; ++i) {
    EXPECT_NE(four[i], four[0]) << "choice " << i;
    EXPECT_NE(texts(11 + i, 1)[0], four[i]) << "choice " << i << " repeats seed " << 11 + i;
  }
}

// Each completion names itself in x-request-id (the header OpenAI's SDKs expose as the
// request id): the id in its body.
TEST_F(ServerHttp, CompletionsCarryTheirIdAsRequestId) {
  httplib::Client cli("127.0.0.1", ep().port);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    json body = {{"model", "tiny"}, {"max_tokens", 2}};
    if (std::string(path) == "/v1/completions")
      body["prompt"] = "Hello";
    else
      body["messages"] = {{{"role", "user"}, {"content", "Hello"}}};
    auto r = cli.Post(path, body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("x-request-id"), json::parse(r->body)["id"]) << path;
  }
}

TEST_F(ServerHttp, StreamedAndNonStreamedAgree) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    json body = {{"model", "tiny"}, {"max_tokens", 20}, {"temperature", 0.9}, {"seed", 1234}, {"n", 2}};
    if (std::string(path) == "/v1/completions")
      body["prompt"] = "The trouble with computers is";
    else
      body["messages"] = {{{"role", "system"}, {"content", "Be brief."}},
                          {{"role", "user"}, {"content", "Tell me a fortune."}}};
    const HttpReply plain = http_post(ep(), path, body.dump());
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json pj = json::parse(plain.body);
    ASSERT_EQ(pj["choices"].size(), 2u);

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    std::vector<std::string> text(2), finish(2);
    json usage;
    bool first_chunk_has_role[2] = {false, false};
    int chunks[2] = {0, 0};
    const HttpReply r = http_post_sse(ep(), path, body.dump(), [&](const std::string& d) {
      if (d == "[DONE]") return true;
      const json j = json::parse(d);
      EXPECT_EQ(
          j["id"].get<std::string>().rfind(std::string(path) == "/v1/completions" ? "cmpl-" : "chatcmpl-", 0),
          0u);
      if (j["usage"].is_object()) usage = j["usage"];
      for (const auto& c : j["choices"]) {
        const int i = c["index"];
        if (c.contains("delta")) {
          if (chunks[i] == 0) first_chunk_has_role[i] = c["delta"].value("role", "") == "assistant";
          text[i] += c["delta"].value("content", "");
        } else {
          text[i] += c["text"].get<std::string>();
        }
        chunks[i]++;
        if (!c["finish_reason"].is_null()) finish[i] = c["finish_reason"];
      }
      return true;
    });
    ASSERT_EQ(r.status, 200);
    EXPECT_TRUE(r.done);
    for (int i = 0; i < 2; ++i) {
      const json& c = pj["choices"][i];
      EXPECT_EQ(c["index"], i);
      const std::string want =
          c.contains("message") ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
      EXPECT_EQ(text[i], want) << "choice " << i;
      EXPECT_EQ(finish[i], c["finish_reason"]);
      if (c.contains("message")) {
        EXPECT_TRUE(first_chunk_has_role[i]);
      }
    }
    EXPECT_NE(text[0], text[1]) << "n choices are different draws";
    // The same prompt again: more of it may come from the prefix cache the second time.
    const int cached_then = pj["usage"]["prompt_tokens_details"]["cached_tokens"];
    const int cached_now = usage["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GE(cached_now, cached_then);
    EXPECT_LT(cached_now, usage["prompt_tokens"].get<int>());
    json plain_usage = pj["usage"];
    plain_usage.erase("prompt_tokens_details");
    usage.erase("prompt_tokens_details");
    EXPECT_EQ(usage, plain_usage);
    EXPECT_EQ(pj["usage"]["total_tokens"],
              pj["usage"]["prompt_tokens"].get<int>() + pj["usage"]["completion_tokens"].get<int>());
    // A seed makes it reproducible.
    body.erase("stream");
    body.erase("stream_options");
    const HttpReply again = http_post(ep(), path, body.dump());
    EXPECT_EQ(json::parse(again.body)["choices"], pj["choices"]);
  }
}

// Log-softmax of the model's logits, computed here in double from a plain Session.
std::vector<double> reference_logprobs(const std::string& prompt, const std::vector<std::string>& pieces_out,
                                       int n) {
  const Model& m = test::tiny_model();
  const Tokenizer& tok = m.tokenizer();
  ThreadPool pool(1);
  Session s(m, pool, 128);
  s.eval(tok.encode(prompt, tok.add_bos_default(), true));
  std::vector<double> out;
  const int64_t nv = m.hparams().n_vocab;
  for (int i = 0; i < n; ++i) {
    const float* row = s.logits();
    const int32_t t = static_cast<int32_t>(std::max_element(row, row + nv) - row);  // greedy
    EXPECT_EQ(tok.token_to_piece(t), pieces_out[static_cast<size_t>(i)]) << "token " << i;
    double sum = 0.0;
    for (int64_t v = 0; v < nv; ++v) sum += std::exp(static_cast<double>(row[v]) - row[t]);
    out.push_back(-std::log(sum));
    s.eval({t});
  }
  return out;
}

TEST_F(ServerHttp, LogprobsAreTheModelsAndAgreeWhenStreamed) {
  const std::string prompt = "A fool and his money";
  json body = completion_body(prompt, 6, false);
  body["logprobs"] = 3;
  const HttpReply r = http_post(ep(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  const json& lp = j["choices"][0]["logprobs"];
  const auto pieces = lp["tokens"].get<std::vector<std::string>>();
  ASSERT_EQ(pieces.size(), 6u) << lp;
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i].get<int64_t>(), static_cast<int64_t>(joined.size()));  // ASCII here
    joined += pieces[i];
    // Greedy: the chosen token is the most likely one, first of 3 alternatives.
    ASSERT_EQ(lp["top_logprobs"][i].size(), 3u);  // the chosen token is among the 3
    double best = -INFINITY;
    for (const auto& [piece, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_EQ(best, lp["token_logprobs"][i].get<double>());
  }
  EXPECT_EQ(joined, j["choices"][0]["text"].get<std::string>());
  const std::vector<double> want = reference_logprobs(prompt, pieces, 6);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LT(want[i], 0.0);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), want[i], 1e-4) << "token " << i;
  }

  // Streamed: the same tokens and log-probabilities, spread over the chunks. The second
  // request finds the first's K/V for every prompt position but the last, which it computes
  // alone: a one-token step sums in another order than a many-token one, so the values
  // agree to float rounding, not bit for bit.
  body["stream"] = true;
  json streamed = json::array();
  const HttpReply rs = http_post_sse(ep(), "/v1/completions", body.dump(), [&](const std::string& d) {
    if (d == "[DONE]") return true;
    const json chunk = json::parse(d);
    for (const auto& c : chunk["choices"])
      if (c["logprobs"].is_object())
        for (size_t i = 0; i < c["logprobs"]["tokens"].size(); ++i)
          streamed.push_back({c["logprobs"]["tokens"][i], c["logprobs"]["token_logprobs"][i],
                              c["logprobs"]["top_logprobs"][i], c["logprobs"]["text_offset"][i]});
    return true;
  });
  ASSERT_EQ(rs.status, 200);
  ASSERT_EQ(streamed.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    SCOPED_TRACE("token " + std::to_string(i));
    EXPECT_EQ(streamed[i][0], lp["tokens"][i]);
    EXPECT_NEAR(streamed[i][1].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-5);
    ASSERT_EQ(streamed[i][2].size(), lp["top_logprobs"][i].size());
    for (const auto& [piece, v] : lp["top_logprobs"][i].items()) {
      ASSERT_TRUE(streamed[i][2].contains(piece)) << piece;
      EXPECT_NEAR(streamed[i][2][piece].get<double>(), v.get<double>(), 1e-5) << piece;
    }
    EXPECT_EQ(streamed[i][3], lp["text_offset"][i]);
  }

  // Chat: per-token objects whose bytes spell the message.
  const json chat = {{"model", "tiny"},
                     {"messages", {{{"role", "user"}, {"content", "Tell me a fortune."}}}},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const HttpReply rc = http_post(ep(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(rc.status, 200) << rc.body;
  const json jc = json::parse(rc.body);
  const json& content = jc["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content.size(), jc["usage"]["completion_tokens"].get<size_t>());
  std::string bytes;
  for (const auto& t : content) {
    for (int b : t["bytes"]) bytes.push_back(static_cast<char>(b));
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);
    EXPECT_LE(t["top_logprobs"][1]["logprob"].get<double>(), t["logprob"].get<double>());
  }
  EXPECT_EQ(bytes, jc["choices"][0]["message"]["content"].get<std::string>());
  // Streamed: each choice opens with OpenAI's role chunk, which carries no text and no
  // log-probabilities (the SDKs' stream helpers count a first chunk's entries twice); the
  // chunks after it carry each token's entry once.
  json chat_stream = chat;
  chat_stream["stream"] = true;
  chat_stream["n"] = 2;
  std::vector<json> firsts(2);
  std::vector<json> entries(2, json::array());
  const HttpReply rcs = http_post_sse(ep(), "/v1/chat/completions", chat_stream.dump(), [&](const std::string& d) {
    if (d == "[DONE]") return true;
    const json chunk = json::parse(d);
    for (const auto& c : chunk["choices"]) {
      const int i = c["index"];
      if (firsts[i].is_null()) firsts[i] = c;
      if (c["logprobs"].is_object())
        for (const auto& e : c["logprobs"]["content"]) entries[i].push_back(e);
    }
    return true;
  });
  ASSERT_EQ(rcs.status, 200);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("choice " + std::to_string(i));
    EXPECT_EQ(firsts[i]["delta"], json({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}));
    EXPECT_TRUE(firsts[i]["logprobs"].is_null());
    // Greedy: both choices are the non-streamed one (to float rounding: the prompt's K/V
    // comes from the prefix cache, as above).
    ASSERT_EQ(entries[i].size(), content.size());
    for (size_t t = 0; t < content.size(); ++t) {
      EXPECT_EQ(entries[i][t]["token"], content[t]["token"]);
      EXPECT_NEAR(entries[i][t]["logprob"].get<double>(), content[t]["logprob"].get<double>(), 1e-5);
    }
  }
  // The prompt's own, with echo and max_tokens 0 (scoring a text): a Session's logits at
  // position i - 1 score prompt token i; the first has nothing before it.
  json score = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}};
  const HttpReply rp = http_post(ep(), "/v1/completions", score.dump());
  ASSERT_EQ(rp.status, 200) << rp.body;
  const json jp = json::parse(rp.body);
  EXPECT_EQ(jp["choices"][0]["text"], prompt);
  EXPECT_EQ(jp["usage"]["completion_tokens"], 0);
  const json& plp = jp["choices"][0]["logprobs"];
  const Model& m = test::tiny_model();
  const std::vector<int32_t> ids = m.tokenizer().encode(prompt, m.tokenizer().add_bos_default(), true);
  ASSERT_EQ(plp["tokens"].size(), ids.size());
  EXPECT_TRUE(plp["token_logprobs"][0].is_null());
  EXPECT_TRUE(plp["top_logprobs"][0].is_null());
  ThreadPool pool(1);
  Session sess(m, pool, 128);
  sess.eval(ids, /*all_logits=*/true);
  for (size_t i = 1; i < ids.size(); ++i) {
    const float* row = sess.logits(static_cast<int64_t>(i - 1));
    double sum = 0.0;
    for (int64_t v = 0; v < m.hparams().n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - row[ids[i]]);
    EXPECT_NEAR(plp["token_logprobs"][i].get<double>(), -std::log(sum), 1e-4) << "prompt token " << i;
    // The best alternative, and the prompt's own token (the legacy API always lists it).
    const std::string own = plp["tokens"][i];
    EXPECT_LE(plp["top_logprobs"][i].size(), 2u);
    ASSERT_TRUE(plp["top_logprobs"][i].contains(own)) << plp["top_logprobs"][i];
    EXPECT_EQ(plp["top_logprobs"][i][own], plp["token_logprobs"][i]);
    // Offsets point into the echoed text: each later token's piece starts there.
    if (i >= 2) {
      const std::string piece = plp["tokens"][i];
      EXPECT_EQ(prompt.compare(plp["text_offset"][i].get<size_t>(), piece.size(), piece), 0) << piece;
    }
  }
  // Byte-fallback tokens (an emoji's four bytes) are named "bytes:\xNN" as OpenAI's legacy
  // API names them, so each is its own top_logprobs key, not one shared U+FFFD.
  json smile = score;
  smile["prompt"] = "A smile \xF0\x9F\x98\x8A here";
  smile["logprobs"] = 5;
  const json js = json::parse(http_post(ep(), "/v1/completions", smile.dump()).body);
  const json& slp = js["choices"][0]["logprobs"];
  std::vector<std::string> byte_tokens;
  for (size_t i = 0; i < slp["tokens"].size(); ++i) {
    const std::string t = slp["tokens"][i];
    if (t.rfind("bytes:", 0) == 0) byte_tokens.push_back(t);
    if (i > 0) {
      EXPECT_EQ(slp["top_logprobs"][i][t], slp["token_logprobs"][i]) << t;
    }
  }
  EXPECT_EQ(byte_tokens, (std::vector<std::string>{"bytes:\\xf0", "bytes:\\x9f", "bytes:\\x98", "bytes:\\x8a"}));
  EXPECT_EQ(js["choices"][0]["text"], smile["prompt"]);
  // The same prompt as token ids (BOS first) echoes the same text at the same offsets: no
  // space in front of the first word, which SPM's decoding after a BOS keeps.
  json by_ids = score;
  by_ids["prompt"] = ids;
  const json ji = json::parse(http_post(ep(), "/v1/completions", by_ids.dump()).body);
  EXPECT_EQ(ji["choices"][0]["text"], prompt);
  EXPECT_EQ(ji["choices"][0]["logprobs"]["text_offset"], plp["text_offset"]);
  // Scored and continued: the prompt's entries, then the generated tokens' as before.
  score["max_tokens"] = 6;
  score["temperature"] = 0;
  score["logprobs"] = 3;
  const json jc2 = json::parse(http_post(ep(), "/v1/completions", score.dump()).body);
  const json& both = jc2["choices"][0]["logprobs"];
  ASSERT_EQ(both["tokens"].size(), ids.size() + 6);
  for (size_t i = 0; i < 6; ++i) {
    // Near, not equal: with every prompt row wanting logits the last layer runs a wider tile.
    EXPECT_NEAR(both["token_logprobs"][ids.size() + i].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-5);
    EXPECT_EQ(both["tokens"][ids.size() + i], lp["tokens"][i]);
    EXPECT_EQ(both["text_offset"][ids.size() + i].get<int64_t>(),
              static_cast<int64_t>(prompt.size()) + lp["text_offset"][i].get<int64_t>());
  }

  // Without the flag there are none.
  json plain = chat;
  plain.erase("logprobs");
  plain.erase("top_logprobs");
  EXPECT_TRUE(json::parse(http_post(ep(), "/v1/chat/completions", plain.dump()).body)["choices"][0]["logprobs"].is_null());
}

TEST_F(ServerHttp, StopStringsCutTheTextInBothModes) {
  const HttpReply full =
      http_post(ep(), "/v1/completions", completion_body("A fool and his money", 16, false).dump());
  ASSERT_EQ(full.status, 200);
  const std::string text = json::parse(full.body)["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(8, 3);
  const std::string want = text.substr(0, text.find(stop));
  const double stops0 = srv_->metric("switchyard_requests_finished_total{reason=\"stop\"}");
  const double cancelled0 = srv_->metric("switchyard_requests_finished_total{reason=\"cancelled\"}");
  json body = completion_body("A fool and his money", 16, false);
  body["stop"] = {"zzzz-never", stop};
  const json j = json::parse(http_post(ep(), "/v1/completions", body.dump()).body);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 16);
  body["stream"] = true;
  const auto s = test::post_stream(ep(), "/v1/completions", body);
  EXPECT_EQ(s.text, want);
  EXPECT_EQ(s.finish, "stop");
  // /metrics counts both as stops, not as cancelled requests.
  EXPECT_TRUE(srv_->wait_metric("switchyard_requests_finished_total{reason=\"stop\"}", stops0 + 2));
  EXPECT_EQ(srv_->metric("switchyard_requests_finished_total{reason=\"cancelled\"}"), cancelled0);
  // A stop string completed by the last allowed token: a stop in the answer and in /metrics
  // (the engine had finished it at its length).
  const auto text_of = [&](int max_tokens) {
    return json::parse(http_post(ep(), "/v1/completions", completion_body("A fool and his money", max_tokens, false).dump())
                           .body)["choices"][0]["text"]
        .get<std::string>();
  };
  const std::string three = text_of(3), four = text_of(4);
  ASSERT_GT(four.size(), three.size());
  ASSERT_FALSE(three.empty());
  const std::string last = three.substr(three.size() - 1) + four.substr(three.size());
  ASSERT_EQ(four.find(last), three.size() - 1) << "the stop string first completes at the 4th token";
  const double stops1 = srv_->metric("switchyard_requests_finished_total{reason=\"stop\"}");
  const double lengths1 = srv_->metric("switchyard_requests_finished_total{reason=\"length\"}");
  body = completion_body("A fool and his money", 4, false);
  body["stop"] = {last};
  const json at_end = json::parse(http_post(ep(), "/v1/completions", body.dump()).body);
  EXPECT_EQ(at_end["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(at_end["choices"][0]["text"], three.substr(0, three.size() - 1));
  // (The engine may drop it at its next step, after the answer went out.)
  EXPECT_TRUE(srv_->wait_metric("switchyard_requests_finished_total{reason=\"stop\"}", stops1 + 1));
  EXPECT_EQ(srv_->metric("switchyard_requests_finished_total{reason=\"length\"}"), lengths1);
  // echo puts the prompt in front.
  body = completion_body("A fool and his money", 4, false);
  body["echo"] = true;
  const std::string echoed =
      json::parse(http_post(ep(), "/v1/completions", body.dump()).body)["choices"][0]["text"];
  EXPECT_EQ(echoed.rfind("A fool and his money" + text.substr(0, 3), 0), 0u) << echoed;
}

// max_tokens 0 with nothing to score runs no request at all; the answer is still a whole
// response (an empty choice, finished by length, with usage), in every mode, and the
// server stays up. (Building its usage once dereferenced the request that was never made.)
TEST_F(ServerHttp, MaxTokensZeroAnswersWithAnEmptyChoice) {
  const std::string prompt = "A fool and his money";
  json body = completion_body(prompt, 0, false);
  const HttpReply r = http_post(ep(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], "");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // n choices and echo: each choice is its prompt alone.
  body["n"] = 2;
  body["echo"] = true;
  const json e = json::parse(http_post(ep(), "/v1/completions", body.dump()).body);
  ASSERT_EQ(e["choices"].size(), 2u) << e.dump();
  for (const auto& c : e["choices"]) EXPECT_EQ(c["text"], prompt);

  json chat = {{"model", "tiny"},
               {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
               {"max_completion_tokens", 0}};
  const HttpReply rc = http_post(ep(), "/v1/chat/completions", chat.dump());
  ASSERT_EQ(rc.status, 200) << rc.body;
  const json jc = json::parse(rc.body);
  EXPECT_EQ(jc["choices"][0]["message"]["content"], "");
  EXPECT_EQ(jc["choices"][0]["finish_reason"], "length");

  chat["stream"] = true;
  chat["stream_options"] = {{"include_usage", true}};
  const auto s = test::post_stream(ep(), "/v1/chat/completions", chat);
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(s.finish, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 0) << s.body;
  EXPECT_EQ(http_get(ep(), "/health").status, 200);
}

// The options that shape a response, one combination of them.
struct ResponseOptions {
  bool chat = false;
  int max_tokens = 0, n = 1;
  bool echo = false;
  int logprobs = -1;  // -1: not asked
  int mode = 0;       // 0: not streamed, 1: streamed, 2: streamed with usage
  json prompt;
  size_t prompts = 1;  // a batch of prompts has several

  size_t choices() const { return static_cast<size_t>(n) * prompts; }
};

// max_tokens {0, 2} x n {1, 2} x echo x logprobs {none, 0, 2} x the three ways of
// streaming x a string, a batch of two strings or token ids as the prompt; chat takes
// neither echo nor a prompt other than text. Counted through one index, digit by digit.
std::vector<ResponseOptions> all_response_options() {
  const std::vector<json> prompts = {"A fool", json::array({"A", "B"}), json::array({1, 2, 3})};
  std::vector<ResponseOptions> all;
  for (int i = 0; i < 2 * 2 * 2 * 2 * 3 * 3 * 3; ++i) {
    int rest = i;
    auto digit = [&](int radix) {
      const int d = rest % radix;
      rest /= radix;
      return d;
    };
    ResponseOptions o;
    o.chat = digit(2) == 1;
    o.max_tokens = 2 * digit(2);
    o.n = 1 + digit(2);
    o.echo = digit(2) == 1;
    o.logprobs = std::array<int, 3>{-1, 0, 2}[digit(3)];
    o.mode = digit(3);
    const int p = digit(3);
    if (o.chat && (o.echo || p > 0)) continue;
    o.prompt = prompts[p];
    o.prompts = p == 1 ? 2 : 1;
    all.push_back(o);
  }
  return all;
}

json response_options_body(const ResponseOptions& o) {
  json body = {{"model", "tiny"}, {"max_tokens", o.max_tokens}, {"n", o.n}, {"stop", {"e"}}};
  if (o.chat) {
    body["messages"] = {{{"role", "user"}, {"content", o.prompt}}};
    if (o.logprobs >= 0) body["logprobs"] = true, body["top_logprobs"] = o.logprobs;
  } else {
    body["prompt"] = o.prompt;
    body["echo"] = o.echo;
    if (o.logprobs >= 0) body["logprobs"] = o.logprobs;
  }
  if (o.mode > 0) body["stream"] = true;
  if (o.mode == 2) body["stream_options"] = {{"include_usage", true}};
  return body;
}

// One finished choice per prompt and per n, usage where asked, [DONE] at the end of a
// stream.
void expect_whole_answer(const HttpEndpoint& ep, const ResponseOptions& o) {
  const size_t want = o.choices();
  const std::string path = o.chat ? "/v1/chat/completions" : "/v1/completions";
  const std::string what = response_options_body(o).dump();
  if (o.mode == 0) {
    const HttpReply r = http_post(ep, path, what);
    ASSERT_EQ(r.status, 200) << what << "\n" << r.body;
    const json j = json::parse(r.body);
    ASSERT_EQ(j["choices"].size(), want) << what;
    for (const json& c : j["choices"]) {
      EXPECT_TRUE(c["finish_reason"] == "length" || c["finish_reason"] == "stop") << what;
    }
    EXPECT_LE(j["usage"]["completion_tokens"].get<size_t>(), want * o.max_tokens) << what;
    return;
  }
  std::map<int, std::string> finish;
  json usage;
  const HttpReply r = http_post_sse(ep, path, what, [&](const std::string& data) {
    if (data == "[DONE]") return true;
    const json j = json::parse(data);
    if (j.contains("usage") && j["usage"].is_object()) usage = j["usage"];
    for (const json& c : j["choices"]) {
      if (!c["finish_reason"].is_null()) finish[c["index"].get<int>()] = c["finish_reason"];
    }
    return true;
  });
  ASSERT_EQ(r.status, 200) << what << "\n" << r.body;
  EXPECT_TRUE(r.done) << what;
  EXPECT_EQ(finish.size(), want) << what;
  if (o.mode == 2) {
    EXPECT_TRUE(usage.is_object()) << what;
  }
}

// Every combination of the options that shape a response (max_tokens 0 and more, n, echo,
// logprobs, a stop string, streamed with and without usage; a string, a batch of strings or
// token ids as the prompt) gets a whole answer. Never a server error, and the server stays
// up.
TEST_F(ServerHttp, EveryCombinationOfResponseOptionsGetsAWholeAnswer) {
  const std::vector<ResponseOptions> all = all_response_options();
  EXPECT_EQ(all.size(), 252u);
  for (const ResponseOptions& o : all) ASSERT_NO_FATAL_FAILURE(expect_whole_answer(ep(), o));
  EXPECT_EQ(http_get(ep(), "/health").status, 200);
}

TEST_F(ServerHttp, EveryBadInputGetsItsStatusAndNamesTheField) {
  struct Case {
    std::string path, body;
    int status;
    std::string param;  // "" -> null
  };
  const std::string longp(1200, 'x');
  std::string words;
  for (int i = 0; i < 200; ++i) words += "word ";
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, ""},
      {"/v1/completions", "[1, 2]", 400, ""},
      {"/v1/completions", R"({"prompt": "hi"})", 400, "model"},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "hi"})", 404, "model"},
      {"/v1/completions", R"({"model": 7, "prompt": "hi"})", 400, "model"},
      {"/v1/completions", R"({"model": "tiny"})", 400, "prompt"},
      {"/v1/completions", R"({"model": "tiny", "prompt": 42})", 400, "prompt"},
      {"/v1/completions", R"({"model": "tiny", "prompt": [1, 99999999]})", 400, "prompt"},
      {"/v1/completions", R"({"model": "tiny", "prompt": []})", 400, "prompt"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": "ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": -1})", 400, "max_tokens"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": 1000})", 400, "max_tokens"},
      {"/v1/completions", json{{"model", "tiny"}, {"prompt", words}}.dump(), 400, "prompt"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "temperature": 5})", 400, "temperature"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "top_p": "high"})", 400, "top_p"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "stream": "yes"})", 400, "stream"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "stream_options": {"include_usage": true}})",
       400, "stream_options"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "n": 0})", 400, "n"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "n": 100})", 400, "n"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "stop": [1]})", 400, "stop[0]"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "stop": ["a","b","c","d","e"]})", 400, "stop"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "seed": "x"})", 400, "seed"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "logit_bias": {"abc": 1}})", 400,
       "logit_bias"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "logprobs": 6})", 400, "logprobs"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "logprobs": true})", 400, "logprobs"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "top_logprobs": 1})", 400, "top_logprobs"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       400, "top_logprobs"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
       400, "top_logprobs"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "presence_penalty": 3})", 400,
       "presence_penalty"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": "hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": []})", 400, "messages"},
      {"/v1/chat/completions", R"({"model": "tiny"})", 400, "messages"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]})", 400,
       "messages[0].role"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user"}]})", 400,
       "messages[0].content"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
       "messages[0].content[0].type"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
       400, "tools"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 500})",
       400, "max_completion_tokens"},
      // Asked-for features this server lacks, which a text reply would silently break.
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       400, "tool_choice"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", "function": {"name": "f"}}})",
       400, "tool_choice"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "function_call": {"name": "f"}})",
       400, "function_call"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]})", 400,
       "modalities"},
      {"/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "audio": {"voice": "alloy", "format": "wav"}})",
       400, "audio"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "web_search_options": {}})",
       400, "web_search_options"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "grammar": "root ::= \"yes\""})", 400, "grammar"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "json_schema": {"type": "object"}})", 400, "json_schema"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "guided_choice": ["a"]})",
       400, "guided_choice"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "n_predict": 3})", 400, "n_predict"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "n_probs": 3})", 400, "n_probs"},
      {"/v1/completions", json{{"model", "tiny"}, {"prompt", std::string(100 << 10, 'a')}}.dump(), 413, ""},
      {"/v1/nothing", "{}", 404, ""},
      {"/tokenize", R"({"prompt": 5})", 400, "prompt"},
      {"/tokenize", R"({})", 400, "prompt"},
      {"/tokenize", R"({"prompt": "hi", "model": "other"})", 404, "model"},
      {"/tokenize", R"({"content": "hi", "add_special": "yes"})", 400, "add_special"},
      {"/detokenize", R"({"tokens": [1, 99999]})", 400, "tokens"},
      {"/detokenize", R"({"tokens": [1, "x"]})", 400, "tokens[1]"},
      {"/detokenize", R"({"tokens": "1 2"})", 400, "tokens"},
      // Integers no int64_t holds: refused, not clamped.
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "seed": 18446744073709551615})", 400, "seed"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": 1e30})", 400, "max_tokens"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path + " " + c.body.substr(0, 120));
    const HttpReply r = http_post(ep(), c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    ASSERT_TRUE(j.contains("error")) << r.body;
    const json& e = j["error"];
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("code"));
    if (c.param.empty()) {
      EXPECT_TRUE(e["param"].is_null()) << r.body;
    } else {
      EXPECT_EQ(e["param"], c.param) << r.body;
    }
  }
  // What asks for nothing beyond text is taken.
  const HttpReply harmless = http_post(
      ep(), "/v1/chat/completions",
      R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "tool_choice": "none",
          "function_call": "auto", "modalities": ["text"], "audio": null, "grammar": "", "json_schema": {},
          "n_probs": 0, "guided_choice": []})");
  EXPECT_EQ(harmless.status, 200) << harmless.body;
  const HttpReply huge = http_post(ep(), "/v1/completions", R"({"model": "tiny", "prompt": "hi", "seed": 18446744073709551615})");
  EXPECT_NE(huge.body.find("but got 18446744073709551615"), std::string::npos) << huge.body;
  // The wrong method on an endpoint, whichever endpoint and method.
  const HttpReply g = http_get(ep(), "/v1/completions");
  EXPECT_EQ(g.status, 405);
  EXPECT_EQ(json::parse(g.body)["error"]["code"], "method_not_allowed");
  for (const char* path : {"/v1/models", "/health", "/v1/models/tiny"}) {
    const HttpReply p = http_post(ep(), path, "{}");
    EXPECT_EQ(p.status, 405) << path;
    EXPECT_NE(json::parse(p.body)["error"]["message"].get<std::string>().find("use GET"), std::string::npos) << p.body;
  }
  EXPECT_EQ(http_get(ep(), "/tokenize").status, 405);
  EXPECT_EQ(http_get(ep(), "/no/such/path").status, 404);
  // Context errors say what the limit is.
  const HttpReply big =
      http_post(ep(), "/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": 1000})");
  EXPECT_NE(json::parse(big.body)["error"]["message"].get<std::string>().find("128"), std::string::npos);
  EXPECT_EQ(json::parse(big.body)["error"]["code"], "context_length_exceeded");
}

TEST_F(ServerHttp, TokenizeAndDetokenizeWithTheModelsTokenizer) {
  const Tokenizer& tok = test::tiny_model().tokenizer();
  const std::string text = "A fool and his money <s>";
  // vLLM's shape: special tokens added by default; text that spells one becomes it.
  json r = json::parse(http_post(ep(), "/tokenize", json{{"model", "tiny"}, {"prompt", text}}.dump()).body);
  const std::vector<int32_t> want = tok.encode(text, true, true);
  EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(r["tokens"].back(), tok.bos_id());
  EXPECT_EQ(r["count"], want.size());
  EXPECT_EQ(r["max_model_len"], 128);
  // llama.cpp's shape: none added by default; pieces on request.
  r = json::parse(http_post(ep(), "/tokenize", json{{"content", text}, {"with_pieces", true}}.dump()).body);
  ASSERT_EQ(r["tokens"].size(), want.size() - 1);
  EXPECT_EQ(r["tokens"][0]["id"], want[1]);
  EXPECT_EQ(r["tokens"][0]["piece"], tok.token_to_piece(want[1]));
  // llama.cpp's parse_special: false reads "<s>" as the three characters it spells.
  r = json::parse(http_post(ep(), "/tokenize", json{{"content", text}, {"parse_special", false}}.dump()).body);
  EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(), tok.encode(text, false, false));
  EXPECT_NE(r["tokens"].back(), tok.bos_id());
  // And back.
  r = json::parse(http_post(ep(), "/detokenize", json{{"tokens", want}}.dump()).body);
  EXPECT_EQ(r["prompt"], tok.decode(want));
  EXPECT_EQ(r["content"], r["prompt"]);
  EXPECT_NE(r["prompt"].get<std::string>().find("A fool and his money"), std::string::npos);
  EXPECT_EQ(r["prompt"].get<std::string>().find("<s>"), std::string::npos);  // control tokens add no text
}

TEST_F(ServerHttp, ModelsHealthAndMetrics) {
  HttpReply r = http_get(ep(), "/v1/models");
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["meta"]["n_ctx"], 128);
  EXPECT_EQ(http_get(ep(), "/v1/models/tiny").status, 200);
  EXPECT_EQ(http_get(ep(), "/v1/models/other").status, 404);
  EXPECT_EQ(http_get(ep(), "/no/such/route").status, 404);
  r = http_get(ep(), "/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["status"], "ok");
  ASSERT_EQ(http_post(ep(), "/v1/completions", completion_body("Hello", 3, false).dump()).status, 200);
  r = http_get(ep(), "/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* name :
       {"switchyard_requests_submitted_total", "switchyard_requests_finished_total{reason=\"length\"}",
        "switchyard_prompt_tokens_total", "switchyard_generation_tokens_total", "switchyard_queue_depth",
        "switchyard_running_requests", "switchyard_kv_blocks_used",
        "switchyard_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
        "switchyard_time_per_output_token_seconds_count",
        "switchyard_moe_expert_activations_total{layer=\"3\"}",
        "switchyard_http_requests_total{route=\"/v1/completions\",code=\"200\"}",
        "switchyard_http_requests_total{route=\"/v1/models/{id}\",code=\"404\"}",
        "switchyard_http_requests_total{route=\"other\",code=\"404\"}"}) {
    EXPECT_NE(r.body.find(std::string("\n") + name), std::string::npos) << name;
  }
  EXPECT_GE(srv_->metric("switchyard_generation_tokens_total"), 3);
  EXPECT_GT(srv_->metric("switchyard_moe_expert_activations_total{layer=\"0\"}"), 0);
  EXPECT_EQ(r.body.find("switchyard_expert_cache"), std::string::npos) << "no expert cache, no cache metrics";
}

// Served with an expert cache: the same greedy text as the all-resident server, and
// /metrics tells how the cache was used (every expert the layers needed was a hit, a
// prefetch or a miss; the misses and prefetches were read from the file).
TEST(ServerExpertCache, SameTextAndCacheMetrics) {
  ModelOptions o;
  o.expert_cache = "50%";
  const auto cached = Model::load(test::tiny_model_path(), o);
  EngineConfig ec;
  ec.ctx_size = 128;
  TestServer resident(ec), srv(*cached, ec);
  const std::string body = completion_body("The king said", 12, false).dump();
  const HttpReply want = http_post(resident.endpoint(), "/v1/completions", body);
  const HttpReply got = http_post(srv.endpoint(), "/v1/completions", body);
  ASSERT_EQ(want.status, 200);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body)["choices"][0]["text"], json::parse(want.body)["choices"][0]["text"]);

  EXPECT_EQ(srv.metric("switchyard_expert_cache_slots{policy=\"lfu-decay\"}"), 16);
  const double hits = srv.metric("switchyard_expert_cache_uses_total{result=\"hit\"}");
  const double prefetched = srv.metric("switchyard_expert_cache_uses_total{result=\"prefetched\"}");
  const double misses = srv.metric("switchyard_expert_cache_uses_total{result=\"miss\"}");
  // Every forward step routes each token to top-2 of 8 experts in each of 4 layers.
  EXPECT_GE(hits + prefetched + misses, 4 * 2 * 12);
  EXPECT_GT(misses, 0);
  const double loads = srv.metric("switchyard_expert_cache_loads_total");
  EXPECT_GE(loads, misses + prefetched);
  EXPECT_EQ(srv.metric("switchyard_expert_cache_read_bytes_total"),
            loads * static_cast<double>(cached->tiered_experts()->expert_bytes(0, 0)));
  EXPECT_GE(srv.metric("switchyard_expert_cache_prefetches_total"), prefetched);
}

TEST_F(ServerHttp, SharedPromptPrefixIsReusedExactly) {
  const std::string prefix =
      "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them";
  const std::string second = prefix + ", When ye come";
  const std::string want = test::generate_cli(second, 16);
  const double reused0 = srv_->metric("switchyard_prefix_reused_tokens_total");
  // A long request keeps the prefix in the cache while the second one arrives.
  json body = completion_body(prefix, 100, true);
  body["ignore_eos"] = true;
  std::string got;
  std::thread other;
  http_post_sse(ep(), "/v1/completions", body.dump(), [&](const std::string&) {
    if (!other.joinable()) {
      other = std::thread([&] {
        const HttpReply r = http_post(ep(), "/v1/completions", completion_body(second, 16, false).dump());
        if (r.status == 200) got = json::parse(r.body)["choices"][0]["text"];
      });
    }
    return true;
  });
  other.join();
  EXPECT_EQ(got, want);
  EXPECT_GT(srv_->metric("switchyard_prefix_reused_tokens_total"), reused0 + 10);
}

// The next turn of a conversation repeats the whole conversation so far. It arrives after
// the first turn has finished, so its prefix comes from the blocks the first one left cached.
TEST_F(ServerHttp, NextTurnReusesTheFinishedTurnsBlocks) {
  const std::string first =
      "And it came to pass, when the LORD would take up Elijah into heaven by a whirlwind, that Elijah went";
  const HttpReply r1 = http_post(ep(), "/v1/completions", completion_body(first, 16, false).dump());
  ASSERT_EQ(r1.status, 200) << r1.body;
  const std::string second = first + json::parse(r1.body)["choices"][0]["text"].get<std::string>() + " And";
  const std::string want = test::generate_cli(second, 16);
  EXPECT_GT(srv_->metric("switchyard_kv_blocks_cached"), 0);
  const double reused0 = srv_->metric("switchyard_prefix_reused_tokens_total");
  const double computed0 = srv_->metric("switchyard_computed_tokens_total");
  const HttpReply r2 = http_post(ep(), "/v1/completions", completion_body(second, 16, false).dump());
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(json::parse(r2.body)["choices"][0]["text"], want);
  const json usage = json::parse(r2.body)["usage"];
  const double reused = srv_->metric("switchyard_prefix_reused_tokens_total") - reused0;
  // Every position the first turn computed: its prompt and all its tokens but the last
  // (the text re-tokenizes to the same ids), whole blocks attached and the rest copied.
  const json usage1 = json::parse(r1.body)["usage"];
  EXPECT_EQ(reused, usage1["prompt_tokens"].get<double>() + usage1["completion_tokens"].get<double>() - 1);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"].get<double>(), reused);
  EXPECT_EQ(srv_->metric("switchyard_computed_tokens_total") - computed0,
            usage["prompt_tokens"].get<double>() - reused + usage["completion_tokens"].get<double>() - 1);
}

// A chat's next turn renders the whole conversation again through the chat template: it
// attaches the blocks of the first turn's prompt, and answers as a server that reuses nothing.
TEST_F(ServerHttp, ChatNextTurnAttachesTheFirstTurnsPrompt) {
  json turn = {{"model", "tiny"},
               {"messages",
                {{{"role", "user"},
                  {"content",
                   "Tell me a fortune about the children of Israel, about Moses and Aaron, and about the LORD "
                   "who spake unto them in the wilderness of Sinai."}}}},
               {"max_tokens", 12},
               {"temperature", 0}};
  const HttpReply r1 = http_post(ep(), "/v1/chat/completions", turn.dump());
  ASSERT_EQ(r1.status, 200) << r1.body;
  const json first = json::parse(r1.body);
  // Two whole 16-position blocks at least: the last one may end where the next render's
  // tokens differ (the first turn's prompt ends where the reply follows).
  ASSERT_GE(first["usage"]["prompt_tokens"].get<int>(), 33);
  turn["messages"].push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
  turn["messages"].push_back({{"role", "user"}, {"content", "And another one."}});
  const double reused0 = srv_->metric("switchyard_prefix_reused_tokens_total");
  const HttpReply r2 = http_post(ep(), "/v1/chat/completions", turn.dump());
  ASSERT_EQ(r2.status, 200) << r2.body;
  const double reused = srv_->metric("switchyard_prefix_reused_tokens_total") - reused0;
  EXPECT_GE(reused, first["usage"]["prompt_tokens"].get<int>() / 16 * 16 - 16);
  EXPECT_EQ(json::parse(r2.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<double>(), reused);
  EngineConfig ec = suite_engine();
  ec.prefix_reuse = false;
  TestServer plain(ec, suite_server());
  const HttpReply want = http_post(plain.endpoint(), "/v1/chat/completions", turn.dump());
  ASSERT_EQ(want.status, 200) << want.body;
  EXPECT_EQ(json::parse(r2.body)["choices"][0]["message"], json::parse(want.body)["choices"][0]["message"]);
}

TEST_F(ServerHttp, ClientThatHangsUpMidStreamFreesItsKvBlocks) {
  const double cancelled0 = srv_->metric("switchyard_requests_finished_total{reason=\"cancelled\"}");
  json body = completion_body("In the beginning God", 100, true);
  body["ignore_eos"] = true;
  int events = 0;
  double used_while_running = -1;
  http_post_sse(ep(), "/v1/completions", body.dump(), [&](const std::string&) {
    if (++events == 3) used_while_running = srv_->metric("switchyard_kv_blocks_used");
    return events < 3;  // hang up
  });
  EXPECT_GT(used_while_running, 0);
  EXPECT_TRUE(srv_->wait_metric("switchyard_kv_blocks_used", 0));
  EXPECT_TRUE(srv_->wait_metric("switchyard_running_requests", 0));
  EXPECT_EQ(srv_->metric("switchyard_requests_finished_total{reason=\"cancelled\"}"), cancelled0 + 1);
}

// Conversations side by side on a pool too small to keep them all: cached blocks are
// evicted, partly filled ones copied, sequences preempted, and every reply is the one a
// server that reuses nothing gives.
TEST(ServerConversations, RepliesAreThoseOfAServerThatReusesNothing) {
  EngineConfig ec;
  ec.parallel = 4;
  ec.ctx_size = 256;
  ec.kv_tokens = 256;  // one full context for four conversations
  TestServer cached(ec);
  ec.prefix_reuse = false;
  ec.kv_tokens = 0;
  TestServer plain(ec);
  const char* starts[] = {"And it came to pass", "In the beginning", "The LORD is my shepherd", "Blessed is the man"};
  auto converse = [](const TestServer& srv, const std::string& start, std::vector<std::string>& replies) {
    std::string text = start;
    for (int turn = 0; turn < 4; ++turn) {
      const json body = {{"model", "tiny"}, {"prompt", text}, {"max_tokens", 20}, {"temperature", 0}};
      const HttpReply r = http_post(srv.endpoint(), "/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      replies.push_back(json::parse(r.body)["choices"][0]["text"].get<std::string>());
      text += replies.back() + " And then";
    }
  };
  std::vector<std::vector<std::string>> got(4), want(4);
  std::vector<std::thread> threads;
  for (size_t c = 0; c < 4; ++c) threads.emplace_back([&, c] { converse(cached, starts[c], got[c]); });
  for (auto& t : threads) t.join();
  for (size_t c = 0; c < 4; ++c) converse(plain, starts[c], want[c]);
  for (size_t c = 0; c < 4; ++c) EXPECT_EQ(got[c], want[c]) << starts[c];
  EXPECT_GT(cached.metric("switchyard_prefix_reused_tokens_total"), 100);
}

// What an evaluation harness does through the API: score windows of the validation text
// (echo + logprobs, max_tokens 0) and take llama-perplexity's half-window NLL. It must be
// the perplexity tool's (which matches llama.cpp's recorded figure, tests/runtime).
TEST(ServerScoring, PromptLogprobsGiveThePerplexityToolsFigure) {
  EngineConfig ec;
  ec.parallel = 4;
  ec.ctx_size = 512;
  ec.batch_tokens = 200;  // windows are prefilled in chunks beside each other
  TestServer srv(ec);
  const Model& m = test::tiny_model();
  std::string text = test::read_text_file(test::shared_path("models/tiny-mixtral/valid.txt"));
  const std::vector<int32_t> tokens = m.tokenizer().encode(text, true, false);
  const int64_t n_ctx = 256, chunks = 4;
  std::vector<double> nll(chunks, 0.0);
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < chunks; ++c) {
    threads.emplace_back([&, c] {
      std::vector<int32_t> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
      window[0] = m.tokenizer().bos_id();
      const json body = {{"model", "tiny"}, {"prompt", window}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}};
      const HttpReply r = http_post(srv.endpoint(), "/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const json lp = json::parse(r.body)["choices"][0]["logprobs"]["token_logprobs"];
      ASSERT_EQ(lp.size(), static_cast<size_t>(n_ctx));
      for (int64_t p = n_ctx / 2; p < n_ctx - 1; ++p) nll[c] -= lp[p + 1].get<double>();
    });
  }
  for (auto& t : threads) t.join();
  double sum = 0.0;
  for (double v : nll) sum += v;
  ThreadPool pool(2);
  const PerplexityResult want = perplexity(m, tokens, n_ctx, pool, {}, chunks);
  EXPECT_NEAR(sum / static_cast<double>(want.n_scored), want.nll, 1e-5 * want.nll);
}

// A window as long as the whole context is scored when nothing is generated after it (what
// `perplexity -c N` and evaluation harnesses ask of a server whose context is N); asking for a
// token more is refused, naming max_tokens.
TEST(ServerScoring, AWindowOfTheWholeContextIsScored) {
  EngineConfig ec;
  ec.ctx_size = 256;
  TestServer srv(ec);
  const Model& m = test::tiny_model();
  const std::string text = test::read_text_file(test::shared_path("models/tiny-mixtral/valid.txt"));
  const std::vector<int32_t> tokens = m.tokenizer().encode(text, true, false);
  const int64_t n_ctx = 256;
  const std::vector<int32_t> window(tokens.begin(), tokens.begin() + n_ctx);
  json body = {{"model", "tiny"}, {"prompt", window}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}};
  HttpReply r = http_post(srv.endpoint(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = json::parse(r.body)["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(lp.size(), static_cast<size_t>(n_ctx));
  double nll = 0.0;
  for (int64_t p = n_ctx / 2; p < n_ctx - 1; ++p) nll -= lp[p + 1].get<double>();
  ThreadPool pool(2);
  const PerplexityResult want = perplexity(m, tokens, n_ctx, pool, {}, 1);
  EXPECT_NEAR(nll / static_cast<double>(want.n_scored), want.nll, 1e-5 * want.nll);
  body["max_tokens"] = 1;
  r = http_post(srv.endpoint(), "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "max_tokens") << r.body;
  body.erase("max_tokens");  // the default would generate: refused too, naming the prompt
  r = http_post(srv.endpoint(), "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded") << r.body;
}

TEST(ServerCancel, NonStreamingClientThatGivesUpIsNoticedToo) {
  EngineConfig ec;
  ec.ctx_size = 4096;  // a generation of seconds, so the client surely gives up first
  TestServer srv(ec);
  json body = completion_body("In the beginning God", 4000, false);
  body["ignore_eos"] = true;
  const HttpReply r = http_post(srv.endpoint(0.1), "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 0) << "the client timed out";
  EXPECT_TRUE(srv.wait_metric("switchyard_requests_finished_total{reason=\"cancelled\"}", 1));
  EXPECT_TRUE(srv.wait_metric("switchyard_kv_blocks_used", 0));
  EXPECT_LT(srv.metric("switchyard_generation_tokens_total"), 4000);
}

TEST(ServerOverload, FullQueueGets503WithRetryAfter) {
  EngineConfig ec;
  ec.parallel = 1;
  ec.max_queue = 3;
  // Generations of seconds (cancelled at the end), so the first still runs when the
  // second queues, even on a loaded machine: 480 tokens took ~0.2 s and once finished
  // before the second request arrived.
  ec.ctx_size = 4096;
  TestServer srv(ec);
  json body = completion_body("In the beginning God", 4000, true);
  body["ignore_eos"] = true;
  // One request runs, one waits; the third, of three choices, finds no room for them.
  std::atomic<int> started{0};
  auto hold = [&] {
    http_post_sse(srv.endpoint(), "/v1/completions", body.dump(), [&](const std::string&) {
      started++;
      return true;
    });
  };
  std::thread a(hold);
  while (started == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread b(hold);
  // (No ASSERT while the two clients run: they must be joined whatever happens.)
  const bool queued = srv.wait_metric("switchyard_queue_depth", 1);
  EXPECT_TRUE(queued) << "the second request waits";
  if (queued) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", srv.port());
    json three = completion_body("Hello", 2, false);
    three["n"] = 3;  // refused whole, and counted once per choice, as submissions are
    const auto res = c->Post("/v1/completions", three.dump(), "application/json");
    EXPECT_TRUE(res);
    if (res) {
      EXPECT_EQ(res->status, 503);
      EXPECT_EQ(res->get_header_value("Retry-After"), "1");
      EXPECT_EQ(json::parse(res->body)["error"]["code"], "queue_full");
    }
  }
  srv.engine().cancel_all();
  a.join();
  b.join();
  EXPECT_EQ(srv.metric("switchyard_requests_rejected_total"), 3);
}

// A waiting request whose client gave up (a disconnect, or a stop string that ended the
// other choices of its completion) stays in the scheduler until the engine's next step, but
// must not hold its place in the queue meanwhile: a request submitted in that window used to
// get queue_full.
TEST(ServerOverload, ACancelledWaitingRequestGivesUpItsQueuePlaceAtOnce) {
  EngineConfig ec;
  ec.parallel = 1;
  ec.max_queue = 1;
  ec.ctx_size = 4096;  // a generation of seconds holds the one slot (cancelled at the end)
  TestServer srv(ec);
  json body = completion_body("In the beginning God", 4000, true);
  body["ignore_eos"] = true;
  std::atomic<int> started{0};
  std::thread running([&] {
    http_post_sse(srv.endpoint(), "/v1/completions", body.dump(), [&](const std::string&) {
      started++;
      return true;
    });
  });
  while (started == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  GenerationParams g;
  g.max_tokens = 4;
  // (No ASSERT while the client runs: it must be joined whatever happens.)
  auto waiting = std::make_shared<Request>(std::vector<int32_t>{1, 450, 3333}, g);
  EXPECT_EQ(srv.engine().submit({waiting}), Engine::Submit::Ok);
  EXPECT_TRUE(srv.wait_metric("switchyard_queue_depth", 1));
  auto next = std::make_shared<Request>(std::vector<int32_t>{1, 450, 3333}, g);
  EXPECT_EQ(srv.engine().submit({next}), Engine::Submit::QueueFull);  // the queue is full
  waiting->cancel();
  EXPECT_EQ(srv.engine().submit({next}), Engine::Submit::Ok);  // the cancelled one gave way
  srv.engine().cancel_all();
  running.join();
  EXPECT_TRUE(srv.wait_metric("switchyard_kv_blocks_used", 0));
}

TEST(ServerAuth, ApiKeyIsRequiredOnTheApi) {
  ServerConfig sc;
  sc.api_key = "sekret";
  TestServer srv({}, sc);
  HttpEndpoint ep = srv.endpoint();
  HttpReply r = http_post(ep, "/v1/completions", completion_body("Hello", 2, false).dump());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
  ep.api_key = "wrong";
  EXPECT_EQ(http_get(ep, "/v1/models").status, 401);
  ep.api_key = "sekret";
  EXPECT_EQ(http_get(ep, "/v1/models").status, 200);
  EXPECT_EQ(http_post(ep, "/v1/completions", completion_body("Hello", 2, false).dump()).status, 200);
  ep.api_key.clear();
  EXPECT_EQ(http_get(ep, "/health").status, 200);  // health and metrics stay open for probes

  // A 401 comes before the body is read: the connection must not go on, or the next request
  // on it reads that body as its own start (it got 400 bad_http_request).
  httplib::Client cli("127.0.0.1", srv.endpoint().port);
  cli.set_keep_alive(true);
  auto refused = cli.Post("/v1/completions", completion_body("Hello", 2, false).dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto next = cli.Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200) << next->body;
  // The scheme's name is case-insensitive.
  auto lower = cli.Get("/v1/models", {{"Authorization", "bearer sekret"}});
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200) << lower->body;
}

// --max-body holds for every body: httplib checks it against Content-Length only, so a
// chunked body, or a gzip one that it unpacks, was read whole whatever its size. Such bodies
// are read within the limit (counted after unpacking) and served like any other.
TEST(ServerBody, ChunkedAndCompressedBodiesAreHeldToTheLimit) {
  ServerConfig sc;
  sc.max_body_bytes = 16 << 10;
  TestServer srv({}, sc);
  httplib::Client cli("127.0.0.1", srv.endpoint().port);
  const std::string body = completion_body("Hello", 2, false).dump();
  auto chunked = cli.Post(
      "/v1/completions",
      [&](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) sink.write(body.data(), body.size());
        sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 200) << chunked->body;
  cli.set_compress(true);  // gzip request bodies
  auto gzip = cli.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(gzip);
  EXPECT_EQ(gzip->status, 200) << gzip->body;
  // A few hundred bytes that unpack past the limit.
  json big = completion_body("Hello", 2, false);
  big["user"] = std::string(200 << 10, ' ');
  auto bomb = cli.Post("/v1/completions", big.dump(), "application/json");
  ASSERT_TRUE(bomb);
  EXPECT_EQ(bomb->status, 413) << bomb->body;
  EXPECT_EQ(json::parse(bomb->body)["error"]["code"], "request_too_large");
}

// Sends raw bytes on a fresh connection and returns all the server sends back until it
// closes the connection ("" if it is still open after 5 s: the test fails on that).
std::string raw_exchange(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) {
      got.clear();  // still open
      break;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // closed by the server
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

// Bodies the server does not read to their end end the connection with their answer, so
// that no part of them is taken for a next request (a desync a shared proxy connection
// would carry to other clients): a chunked body past --max-body, a body on a GET, both a
// length and a chunked encoding, a content encoding that is not decoded.
TEST(ServerBody, UnreadBodiesEndTheConnection) {
  ServerConfig sc;
  sc.max_body_bytes = 1024;
  TestServer srv({}, sc);
  const int port = srv.endpoint().port;
  const std::string big(2000, 'x');
  char size[16];
  std::snprintf(size, sizeof size, "%zx", big.size());
  const std::string next = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string over = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n" + big +
                           "\r\n0\r\n\r\n" + next;
  std::string got = raw_exchange(port, over);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << "the request after the body was served: " << got;
  const std::string get_body = "GET /v1/models HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "5\r\nhello\r\n0\r\n\r\n" + next;
  got = raw_exchange(port, get_body);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("this method takes no request body"), std::string::npos) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;
  // A multipart body (an SDK's file upload): refused whole; httplib's reader threw on it.
  const std::string part = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nRIFF\r\n--b--\r\n";
  got = raw_exchange(port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                           "Content-Length: " + std::to_string(part.size()) + "\r\n\r\n" + part + next);
  EXPECT_EQ(got.rfind("HTTP/1.1 415", 0), 0u) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;
  // A request line httplib cannot parse: what follows is not taken for a request either.
  got = raw_exchange(port, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + next);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;
  // An encoding httplib does not decode: its bytes are not read as JSON.
  const std::string zstd_body = "(\xB5/\xFD";
  got = raw_exchange(port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Encoding: zstd\r\nContent-Length: " + std::to_string(zstd_body.size()) +
                           "\r\n\r\n" + zstd_body + next);
  EXPECT_EQ(got.rfind("HTTP/1.1 415", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Encoding 'zstd' is not supported"), std::string::npos) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;
  const std::string both = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + next;
  got = raw_exchange(port, both);
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;
}

// --cors-origin: a browser's preflight (OPTIONS, no API key) is answered with the methods and
// the headers it asked for; every answer to an allowed origin names it, errors and streams
// included, so the page can read them; another origin's preflight gets 403 naming the flag.
// Without the flag nothing changes: no CORS headers, OPTIONS is an unknown route.
TEST(ServerCors, AllowedOriginsGetPreflightAndHeadersOthersDoNot) {
  const std::string page = "http://localhost:3000";
  ServerConfig sc;
  sc.api_key = "sekret";
  sc.cors = CorsPolicy({page, "https://chat.example.org"});
  TestServer srv({}, sc);
  httplib::Client cli("127.0.0.1", srv.endpoint().port);
  const httplib::Headers preflight = {{"Origin", page},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}};
  auto r = cli.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), page);
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os");
  EXPECT_EQ(r->get_header_value("Vary"), "Origin");
  EXPECT_EQ(r->get_header_value_count("Access-Control-Allow-Origin"), 1u);

  const std::string body = completion_body("Hello", 2, false).dump();
  r = cli.Post("/v1/completions", {{"Origin", "HTTP://LOCALHOST:3000"}}, body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << "still needs the key";
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "HTTP://LOCALHOST:3000") << "so the page can read why";
  r = cli.Post("/v1/completions", {{"Origin", page}, {"Authorization", "Bearer sekret"}}, body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), page);
  EXPECT_EQ(r->get_header_value("Access-Control-Expose-Headers"), "Retry-After");
  std::string streamed;
  httplib::Headers stream_headers;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Origin", page}, {"Authorization", "Bearer sekret"}, {"Content-Type", "application/json"}};
  req.body = completion_body("Hello", 2, true).dump();
  req.response_handler = [&](const httplib::Response& res) {
    stream_headers = res.headers;
    return true;
  };
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    streamed.append(d, n);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  ASSERT_TRUE(cli.send(req, res, err));
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed;
  const auto acao = stream_headers.find("Access-Control-Allow-Origin");
  ASSERT_NE(acao, stream_headers.end()) << "a stream names the origin too";
  EXPECT_EQ(acao->second, page);
  r = cli.Get("/v1/nowhere", {{"Origin", page}, {"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), page);

  const httplib::Headers other = {{"Origin", "https://evil.example.com"}, {"Access-Control-Request-Method", "POST"}};
  r = cli.Options("/v1/chat/completions", other);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_NE(r->body.find("--cors-origin https://evil.example.com"), std::string::npos) << r->body;
  r = cli.Get("/health", {{"Origin", "https://evil.example.com"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));

  TestServer plain;
  httplib::Client pc("127.0.0.1", plain.endpoint().port);
  r = pc.Options("/v1/chat/completions", preflight);  // no CORS: the route takes POST only
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  r = pc.Get("/health", {{"Origin", page}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(r->has_header("Vary"));
}

// Any origin: "*" (a page's own Authorization header needs no credentials mode).
TEST(ServerCors, AWildcardAllowsEveryOrigin) {
  ServerConfig sc;
  sc.cors = CorsPolicy({"*"});
  TestServer srv({}, sc);
  httplib::Client cli("127.0.0.1", srv.endpoint().port);
  auto r = cli.Options("/v1/models", {{"Origin", "https://anywhere.example"}, {"Access-Control-Request-Method", "GET"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  r = cli.Get("/v1/models", {{"Origin", "https://anywhere.example"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(r->has_header("Vary")) << "the answer is the same for every origin";
}

TEST(ServerCors, OriginsThatAreNotOriginsAreRefused) {
  for (const std::string bad : {"localhost:3000", "http://localhost:3000/", "http://a/b", "ftp://x", "http://",
                                "http://h:port", "http://h:123456"}) {
    EXPECT_THROW(CorsPolicy({bad}), Error) << bad;
  }
  for (const std::string good : {"http://localhost:3000", "https://chat.example.org", "http://[::1]:8080",
                                 "http://127.0.0.1", "*"}) {
    EXPECT_NO_THROW(CorsPolicy({good})) << good;
  }
  EXPECT_TRUE(CorsPolicy({"http://a.example"}).allow_origin("").empty()) << "no Origin header: no CORS";
}

// A second server on a port that one already listens on must fail to start, not share the
// port with it (the kernel would split the connections between the two).
// --chat-template-file: a template given as text replaces the model's, its variant read as
// from a model (here Qwen2.5's default system prompt, published text in chat_templates/).
TEST(ServerChatTemplate, ATemplateFileReplacesTheModelsTemplate) {
  ServerConfig sc;
  sc.chat_template_text =
      test::read_text_file(std::string(SY_SOURCE_DIR) + "/tests/server/chat_templates/Qwen--Qwen2.5-7B-Instruct.jinja");
  sc.chat_template_origin = "--chat-template-file qwen.jinja";
  TestServer srv({}, sc);
  HttpReply r = http_get(srv.endpoint(), "/v1/models");
  EXPECT_EQ(json::parse(r.body)["data"][0]["meta"]["chat_template"], "chatml") << r.body;
  const json body = {{"model", "tiny"},
                     {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})},
                     {"max_tokens", 1}};
  r = http_post(srv.endpoint(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Tokenizer& tok = srv.engine().model().tokenizer();
  const std::string want =
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], tok.encode(want, tok.add_bos_default(), true).size());
  // A text of no family the server renders is refused at start, naming where it came from.
  sc.chat_template_text = "{% for m in messages %}### {{ m.content }}{% endfor %}";
  EXPECT_THROW(
      {
        try {
          TestServer odd({}, sc);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("--chat-template-file qwen.jinja: the template is none"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
}

// What a template cannot place is a 400 naming the messages; add_generation_prompt false
// leaves the assistant header off; template arguments the server does not take are refused.
TEST(ServerChatTemplate, MessagesATemplateCannotPlaceAndGenerationPrompt) {
  ServerConfig sc;
  sc.chat_template = "llama2";
  TestServer srv({}, sc);
  const json late_system = {{"model", "tiny"},
                            {"messages", json::array({{{"role", "user"}, {"content", "Hi"}},
                                                      {{"role", "assistant"}, {"content", "Yo"}},
                                                      {{"role", "system"}, {"content", "Be brief"}},
                                                      {{"role", "user"}, {"content", "Again"}}})},
                            {"max_tokens", 1}};
  HttpReply r = http_post(srv.endpoint(), "/v1/chat/completions", late_system.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "messages") << r.body;
  EXPECT_NE(r.body.find("takes a system message only as the first message"), std::string::npos) << r.body;

  ServerConfig chatml;  // the tiny model has no template: ChatML
  TestServer plain({}, chatml);
  json body = {{"model", "tiny"},
               {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
               {"max_tokens", 1}};
  const int with_prompt = json::parse(http_post(plain.endpoint(), "/v1/chat/completions", body.dump()).body)["usage"]["prompt_tokens"];
  body["add_generation_prompt"] = false;
  const Tokenizer& tok = plain.engine().model().tokenizer();
  const int without = json::parse(http_post(plain.endpoint(), "/v1/chat/completions", body.dump()).body)["usage"]["prompt_tokens"];
  EXPECT_GT(with_prompt, without);
  EXPECT_EQ(without, static_cast<int>(tok.encode("<|im_start|>user\nHi<|im_end|>\n", tok.add_bos_default(), true).size()));
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  r = http_post(plain.endpoint(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "chat_template_kwargs") << r.body;
}

TEST(ServerBind, ASecondServerOnABusyPortIsRefused) {
  TestServer first;
  EngineConfig ec;
  ec.n_threads = 1;
  Engine engine(test::tiny_model(), ec);
  ServerConfig sc;
  sc.port = first.port();
  Server second(engine, sc);
  try {
    second.bind();
    ADD_FAILURE() << "bound port " << first.port() << ", where another server listens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":" + std::to_string(first.port()) + " (in use"), std::string::npos)
        << e.what();
  }
  engine.stop();
  EXPECT_EQ(http_get(first.endpoint(), "/health").status, 200);
}

TEST(ServerPaging, PreemptionUnderAScarceKvPoolKeepsOutputsExact) {
  EngineConfig ec;
  ec.parallel = 4;
  ec.ctx_size = 64;
  ec.kv_tokens = 64;  // one context for four requests: they must take turns
  ec.block_size = 8;
  TestServer srv(ec);
  const std::vector<std::string> prompts = {"A fool and his money", "In the beginning God", "Hello",
                                            "The trouble with computers is"};
  std::vector<std::string> want, got(prompts.size());
  for (const auto& p : prompts) want.push_back(test::generate_cli(p, 40));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      const HttpReply r =
          http_post(srv.endpoint(), "/v1/completions", completion_body(prompts[i], 40, false).dump());
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status == 200) got[i] = json::parse(r.body)["choices"][0]["text"];
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << prompts[i];
  EXPECT_GT(srv.metric("switchyard_preemptions_total"), 0);
  EXPECT_EQ(srv.metric("switchyard_kv_blocks_used"), 0);
}

TEST(ServerStress, FiveHundredRequestsFrom32ClientsWithRandomDisconnects) {
  EngineConfig ec;
  ec.parallel = 16;
  ec.ctx_size = 96;
  ec.max_queue = 128;
  TestServer srv(ec);
  std::atomic<int> next{0}, ok{0}, hung_up{0}, overloaded{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(1000 + c);
      const std::vector<std::string> prompts = {"Hello", "In the beginning", "A fool", "Why",
                                                "The LORD is my shepherd"};
      for (int i; (i = next++) < 500;) {
        json body = {{"model", "tiny"},
                     {"max_tokens", 1 + static_cast<int>(rng() % 6)},
                     {"temperature", (rng() % 2) ? 0.0 : 0.8}};
        const bool chat = rng() % 4 == 0;
        if (chat)
          body["messages"] = {{{"role", "user"}, {"content", prompts[rng() % prompts.size()]}}};
        else
          body["prompt"] = prompts[rng() % prompts.size()];
        const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
        const int mode = static_cast<int>(
            rng() % 10);  // 0-1: hang up mid-stream, 2: give up early, 3-6: stream, else plain
        int status = 0;
        if (mode <= 1 || (mode >= 3 && mode <= 6)) {
          body["stream"] = true;
          int events = 0;
          const HttpReply r = http_post_sse(srv.endpoint(), path, body.dump(),
                                            [&](const std::string&) { return mode > 1 || ++events < 2; });
          status = r.status;
          if (mode <= 1 && !r.done) {
            hung_up++;
            continue;
          }
        } else {
          const HttpReply r = http_post(srv.endpoint(mode == 2 ? 0.002 : 60), path, body.dump());
          status = r.status;
          if (mode == 2 && status == 0) {
            hung_up++;
            continue;
          }
        }
        if (status == 200)
          ok++;
        else if (status == 503)
          overloaded++;
        else
          failed++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(ok + hung_up + overloaded, 500);
  EXPECT_GT(ok, 300);
  const HttpReply h = http_get(srv.endpoint(), "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(srv.wait_metric("switchyard_running_requests", 0));
  EXPECT_TRUE(srv.wait_metric("switchyard_kv_blocks_used", 0));
  EXPECT_EQ(srv.metric("switchyard_queue_depth"), 0);
  EXPECT_EQ(srv.metric("switchyard_requests_finished_total{reason=\"error\"}"), 0);
}

}  // namespace
}  // namespace sy
