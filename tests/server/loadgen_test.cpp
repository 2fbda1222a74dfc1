// The load generator: its Poisson workload, its percentiles, and full runs (baseline,
// closed loop, open loop, several rounds) against the real server on a loopback port.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "server/loadgen.h"
#include "server_fixture.h"

namespace sy {
namespace {

LoadgenConfig workload_config() {
  LoadgenConfig c;
  c.requests = 4000;
  c.prompt_min = 5;
  c.prompt_max = 9;
  c.gen_min = 2;
  c.gen_max = 4;
  c.seed = 7;
  return c;
}

EngineConfig engine_config(int parallel, int ctx_size) {
  EngineConfig ec;
  ec.parallel = parallel;
  ec.ctx_size = ctx_size;
  return ec;
}

// The output tokens a run of c's workload asks for (ignore_eos: every request generates
// exactly its length).
int64_t workload_output_tokens(const LoadgenConfig& c) {
  int64_t n = 0;
  for (const auto& w : make_workload(c, static_cast<int32_t>(test::tiny_model().hparams().n_vocab), 0)) n += w.gen_len;
  return n;
}

// Small runs against a test server: `requests` per run, lengths in the ranges given.
LoadgenConfig run_config(const test::TestServer& srv, int requests, int prompt_min, int prompt_max, int gen_min,
                         int gen_max) {
  LoadgenConfig c;
  c.endpoint = srv.endpoint();
  c.requests = requests;
  c.prompt_min = prompt_min;
  c.prompt_max = prompt_max;
  c.gen_min = gen_min;
  c.gen_max = gen_max;
  c.progress = false;
  return c;
}

TEST(LoadgenWorkload, LengthsInRangeAndPoissonArrivals) {
  const LoadgenConfig c = workload_config();
  const double rate = 4.0;
  const auto items = make_workload(c, 1000, rate);
  ASSERT_EQ(items.size(), 4000u);
  std::vector<int> seen_prompt(10, 0), seen_gen(5, 0);
  double prev = 0, sum_gap = 0, sum_gap2 = 0;
  for (const auto& w : items) {
    ASSERT_GE(w.prompt.size(), 5u);
    ASSERT_LE(w.prompt.size(), 9u);
    ASSERT_GE(w.gen_len, 2);
    ASSERT_LE(w.gen_len, 4);
    seen_prompt[w.prompt.size()]++;
    seen_gen[w.gen_len]++;
    for (int32_t t : w.prompt) ASSERT_TRUE(t >= 0 && t < 1000);
    const double gap = w.arrival - prev;
    ASSERT_GE(gap, 0.0);
    sum_gap += gap;
    sum_gap2 += gap * gap;
    prev = w.arrival;
  }
  for (int l = 5; l <= 9; ++l) EXPECT_GT(seen_prompt[l], 600) << "prompt length " << l;  // uniform: ~800 each
  for (int l = 2; l <= 4; ++l) EXPECT_GT(seen_gen[l], 1100) << "generation length " << l;  // ~1333 each
  // Exponential gaps of mean 1/rate: mean and standard deviation both 0.25 (within ~5%).
  const double mean = sum_gap / items.size(), sd = std::sqrt(sum_gap2 / items.size() - mean * mean);
  EXPECT_NEAR(mean, 1 / rate, 0.0125);
  EXPECT_NEAR(sd, 1 / rate, 0.02);
}

TEST(LoadgenWorkload, SameLengthsWhateverTheRateFreshTokensEachRunAndInvocation) {
  const LoadgenConfig c = workload_config();
  const auto slow = make_workload(c, 1000, 0.5), burst = make_workload(c, 1000, INFINITY);
  const auto next = make_workload(c, 1000, 0.5, 1);
  LoadgenConfig salted = c;  // another invocation with the same seed
  salted.token_salt = 0x1234567;
  const auto again = make_workload(salted, 1000, 0.5);
  size_t same_tokens = 0, same_again = 0;
  for (size_t i = 0; i < slow.size(); ++i) {
    ASSERT_EQ(again[i].prompt.size(), slow[i].prompt.size());
    ASSERT_EQ(again[i].gen_len, slow[i].gen_len);
    ASSERT_EQ(again[i].arrival, slow[i].arrival);
    same_again += again[i].prompt == slow[i].prompt;
    ASSERT_EQ(slow[i].prompt, burst[i].prompt);
    ASSERT_EQ(slow[i].gen_len, burst[i].gen_len);
    ASSERT_EQ(burst[i].arrival, 0.0);  // all at once
    // The next run: same lengths and arrivals, other tokens (so no prefix cache helps it).
    ASSERT_EQ(next[i].prompt.size(), slow[i].prompt.size());
    ASSERT_EQ(next[i].gen_len, slow[i].gen_len);
    ASSERT_EQ(next[i].arrival, slow[i].arrival);
    same_tokens += next[i].prompt == slow[i].prompt;
  }
  EXPECT_LT(same_tokens, 5u);
  EXPECT_LT(same_again, 5u);
  LoadgenConfig other = c;
  other.seed = 8;
  EXPECT_NE(make_workload(other, 1000, 0.5)[0].prompt, slow[0].prompt);
}

TEST(LoadgenWorkload, SharedPrefixLeadsEveryPromptOfARun) {
  LoadgenConfig c = workload_config();
  c.requests = 50;
  const auto plain = make_workload(c, 1000, 1.0);
  c.shared_prefix = 12;
  const auto shared = make_workload(c, 1000, 1.0), next = make_workload(c, 1000, 1.0, 1);
  ASSERT_EQ(shared.size(), plain.size());
  const std::vector<int32_t> head(shared[0].prompt.begin(), shared[0].prompt.begin() + 12);
  const std::vector<int32_t> next_head(next[0].prompt.begin(), next[0].prompt.begin() + 12);
  EXPECT_NE(head, next_head);
  for (size_t i = 0; i < shared.size(); ++i) {
    ASSERT_EQ(shared[i].prompt.size(), plain[i].prompt.size() + 12);
    EXPECT_TRUE(std::equal(head.begin(), head.end(), shared[i].prompt.begin()));
    EXPECT_TRUE(std::equal(next_head.begin(), next_head.end(), next[i].prompt.begin()));
    EXPECT_EQ(shared[i].gen_len, plain[i].gen_len);
    EXPECT_EQ(shared[i].arrival, plain[i].arrival);
  }
}

// Later turns come from streams of their own: a run's first turns are the same whatever
// the number of turns.
TEST(LoadgenWorkload, FollowUpsLeaveTheFirstTurnsAsTheyWere) {
  LoadgenConfig c = workload_config();
  c.requests = 50;
  const auto one = make_workload(c, 1000, 1.0);
  c.turns = 3;
  const auto three = make_workload(c, 1000, 1.0);
  ASSERT_EQ(three.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(one[i].follow_ups.empty());
    EXPECT_EQ(three[i].prompt, one[i].prompt);
    EXPECT_EQ(three[i].gen_len, one[i].gen_len);
    EXPECT_EQ(three[i].arrival, one[i].arrival);
    ASSERT_EQ(three[i].follow_ups.size(), 2u);
    for (const auto& f : three[i].follow_ups) {
      EXPECT_GE(f.tokens.size(), 5u);
      EXPECT_LE(f.tokens.size(), 9u);
      EXPECT_GE(f.gen_len, 2);
      EXPECT_LE(f.gen_len, 4);
    }
  }
  EXPECT_NE(three[0].follow_ups[0].tokens, three[0].follow_ups[1].tokens);
}

TEST(LoadgenSummary, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v(10);
  std::iota(v.begin(), v.end(), 1.0);  // 1..10, shuffled order must not matter
  std::swap(v[0], v[9]);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.p50, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9.1);
  EXPECT_DOUBLE_EQ(s.p99, 9.91);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_EQ(summarize({}).p99, 0.0);
}

TEST(LoadgenSteady, CountsTheTokensReceivedByATime) {
  // start, ttft, end (seconds), tokens
  const std::vector<RequestTiming> r = {{0.0, 1.0, 3.0, 5},   // tokens from t = 1 to t = 3
                                        {2.0, 0.5, 2.5, 9},   // from 2.5 to 4.5
                                        {1.0, 4.0, 4.0, 1},   // one token at 5
                                        {0.0, 0.5, 0.5, 0}};  // nothing
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 0.9), 0.0);
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 1.0), 1.0);              // the first token
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 2.0), 1.0 + 4 * 0.5);    // halfway through the rest
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 3.5), 5.0 + 1 + 8 * 0.5);
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 4.99), 14.0);
  EXPECT_DOUBLE_EQ(tokens_received_by(r, 5.0), 15.0);
}

// An open-loop run's first request waits for its own exponential gap; rates count from
// that first send (docs/serving.md), so one request's run lasts as long as the request.
TEST(Loadgen, OpenLoopRatesCountFromTheFirstSend) {
  test::TestServer srv(engine_config(4, 64));
  LoadgenConfig c = run_config(srv, 1, 3, 3, 2, 2);
  c.rates = {0.5};  // a first gap of 2 s on average
  const auto items = make_workload(c, static_cast<int32_t>(test::tiny_model().hparams().n_vocab), 0.5);
  ASSERT_GT(items[0].arrival, 0.05);
  Loadgen lg(c);
  const auto runs = lg.run_all();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].completed, 1) << runs[0].first_error;
  EXPECT_NEAR(runs[0].duration_s, runs[0].e2e_s.p50, 0.02);
  EXPECT_NEAR(runs[0].requests_per_s, 1.0 / runs[0].duration_s, 1e-9);
}

// --temperature: the requests sample (the server's non-greedy path, OpenAI's other
// defaults) and still run to their lengths; the report says which temperature ran.
TEST(Loadgen, SampledRequestsRunToTheirLengths) {
  test::TestServer srv(engine_config(4, 64));
  LoadgenConfig c = run_config(srv, 6, 3, 8, 2, 6);
  c.concurrency = {3};
  c.temperature = 1.5;
  Loadgen lg(c);
  const auto runs = lg.run_all();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].completed, 6);
  EXPECT_EQ(runs[0].failed, 0) << runs[0].first_error;
  const int64_t want_tokens = workload_output_tokens(c);
  EXPECT_NEAR(runs[0].output_tokens_per_s * runs[0].duration_s, double(want_tokens), 1e-6 * want_tokens);
  EXPECT_EQ(lg.report_json(runs)["temperature"], 1.5);
}

// --timeout bounds a whole request, not only the silence between its events.
TEST(Loadgen, TimeoutBoundsTheWholeRequest) {
  test::TestServer srv(engine_config(4, 2048));
  // ~1.5 s of tokens each, a few ms apart: the first comes well within the timeout even in a
  // sanitizer build, so it is the whole request's length that ends it, not a silence.
  LoadgenConfig c = run_config(srv, 2, 3, 3, 1500, 1500);
  c.concurrency = {1};
  c.endpoint.timeout_s = 0.3;
  Loadgen lg(c);
  const auto runs = lg.run_all();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].failed, 2);
  EXPECT_NE(runs[0].first_error.find("took longer than --timeout 0.3 s"), std::string::npos) << runs[0].first_error;
}

TEST(Loadgen, RoundsOfBaselineClosedAndOpenLoopAgainstTheServer) {
  test::TestServer srv(engine_config(4, 64));
  LoadgenConfig c = run_config(srv, 5, 3, 8, 2, 5);
  c.baseline = true;
  c.concurrency = {3};
  c.rates = {INFINITY};
  c.rounds = 2;
  Loadgen lg(c);
  EXPECT_EQ(lg.model(), "tiny");
  const auto runs = lg.run_all();
  ASSERT_EQ(runs.size(), 6u);  // 2 rounds x (baseline, concurrency 3, rate inf)

  const int64_t want_tokens = workload_output_tokens(c);
  for (const auto& r : runs) {
    SCOPED_TRACE(r.label);
    EXPECT_EQ(r.completed, 5);
    EXPECT_EQ(r.failed, 0) << r.first_error;
    // ignore_eos: every request generates exactly its length, and usage reports it.
    EXPECT_NEAR(r.output_tokens_per_s * r.duration_s, double(want_tokens), 1e-6 * want_tokens);
    EXPECT_GT(r.ttft_ms.p50, 0.0);
    EXPECT_LE(r.ttft_ms.p99, r.e2e_s.p99 * 1e3 + 1e-9);
    if (r.concurrency == 0) {
      EXPECT_EQ(r.steady_output_tokens_per_s, 0.0);  // open loop: no steady part defined
    } else {
      // The steady part ends when the first client runs out of requests: with one client
      // that is the whole run; with 3 clients and 5 requests, before the last one ends.
      EXPECT_GT(r.steady_window_s, 0.0);
      EXPECT_LE(r.steady_window_s, r.duration_s + 1e-9);
      if (r.concurrency == 1) {
        EXPECT_NEAR(r.steady_window_s, r.duration_s, 0.05 * r.duration_s);
      }
      EXPECT_GT(r.steady_output_tokens_per_s * r.steady_window_s, 0.0);
      EXPECT_LE(r.steady_output_tokens_per_s * r.steady_window_s, double(want_tokens) + 1e-6);
    }
  }
  EXPECT_EQ(runs[0].label, "r1 baseline");
  EXPECT_EQ(runs[4].label, "r2 concurrency 3");
  EXPECT_EQ(runs[4].round, 1);

  const auto ratios = Loadgen::ratios_to_baseline(runs);
  ASSERT_EQ(ratios.size(), 2u);
  EXPECT_EQ(ratios[0].label, "concurrency 3");
  EXPECT_EQ(ratios[1].label, "rate inf");
  for (const auto& q : ratios) {
    ASSERT_EQ(q.ratios.size(), 2u);
    // Each round's ratio is against that round's own baseline.
    EXPECT_DOUBLE_EQ(q.ratios[1], runs[q.label == "rate inf" ? 5 : 4].output_tokens_per_s / runs[3].output_tokens_per_s);
    EXPECT_LE(q.min, q.median);
    EXPECT_LE(q.median, q.max);
  }

  const auto j = lg.report_json(runs);
  EXPECT_EQ(j["rounds"], 2);
  EXPECT_EQ(j["runs"].size(), 6u);
  EXPECT_EQ(j["runs"][3]["round"], 2);
  EXPECT_TRUE(j["vs_baseline"].contains("concurrency 3"));
  EXPECT_EQ(j["vs_baseline"]["rate inf"]["per_round"].size(), 2u);
  // Steady ratios: closed-loop runs only, each against its round's baseline.
  EXPECT_TRUE(j["steady_vs_baseline"].contains("concurrency 3"));
  EXPECT_FALSE(j["steady_vs_baseline"].contains("rate inf"));
  const auto steady = Loadgen::ratios_to_baseline(runs, true);
  ASSERT_EQ(steady.size(), 1u);
  EXPECT_DOUBLE_EQ(steady[0].ratios[0], runs[1].steady_output_tokens_per_s / runs[0].steady_output_tokens_per_s);
  EXPECT_DOUBLE_EQ(j["runs"][1]["steady_output_tokens_per_s"].get<double>(), runs[1].steady_output_tokens_per_s);
  EXPECT_NE(Loadgen::table(runs).find("x base over 2 rounds"), std::string::npos);
}

// Without --baseline, the one-client run of `--concurrency 1,16` is the base of the ratios;
// with it, the baseline run stays the base and the one-client run gets a ratio of its own.
TEST(LoadgenRatios, AOneClientRunIsTheBaselineWhenThereIsNone) {
  auto run = [](const std::string& name, int concurrency, double rate, double steady, int round = 0) {
    RunReport r;
    r.name = r.label = name;
    r.concurrency = concurrency;
    r.output_tokens_per_s = rate;
    r.steady_output_tokens_per_s = steady;
    r.round = round;
    return r;
  };
  std::vector<RunReport> runs = {run("concurrency 1", 1, 40, 40), run("concurrency 16", 16, 100, 110),
                                 run("rate 2", 0, 60, 0)};
  auto ratios = Loadgen::ratios_to_baseline(runs);
  ASSERT_EQ(ratios.size(), 2u);  // the base itself gets none
  EXPECT_EQ(ratios[0].label, "concurrency 16");
  EXPECT_DOUBLE_EQ(ratios[0].median, 2.5);
  EXPECT_EQ(ratios[1].label, "rate 2");
  EXPECT_DOUBLE_EQ(ratios[1].median, 1.5);
  const auto steady = Loadgen::ratios_to_baseline(runs, true);
  ASSERT_EQ(steady.size(), 1u);
  EXPECT_DOUBLE_EQ(steady[0].median, 110.0 / 40);
  const std::string table = Loadgen::table(runs);
  EXPECT_NE(table.find("2.50"), std::string::npos) << table;
  EXPECT_NE(table.find("2.75"), std::string::npos) << table;

  // Two rounds: each against its own one-client run.
  runs.push_back(run("concurrency 1", 1, 50, 50, 1));
  runs.push_back(run("concurrency 16", 16, 100, 100, 1));
  ratios = Loadgen::ratios_to_baseline(runs);
  ASSERT_EQ(ratios[0].ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(ratios[0].ratios[1], 2.0);

  // A baseline run takes precedence: the one-client run is then measured against it.
  std::vector<RunReport> with_base = {run("baseline", 1, 40, 40), run("concurrency 1", 1, 44, 44),
                                      run("concurrency 16", 16, 100, 100)};
  ratios = Loadgen::ratios_to_baseline(with_base);
  ASSERT_EQ(ratios.size(), 2u);
  EXPECT_EQ(ratios[0].label, "concurrency 1");
  EXPECT_DOUBLE_EQ(ratios[0].median, 1.1);

  // Neither: no ratios.
  const std::vector<RunReport> none = {run("concurrency 4", 4, 80, 90), run("rate 1", 0, 30, 0)};
  EXPECT_TRUE(Loadgen::ratios_to_baseline(none).empty());
}

// Conversations: each later turn sends the last prompt, the reply as /tokenize gives it
// back, and new tokens; the server finds the earlier turns in its prefix cache and says so.
TEST(Loadgen, ConversationsSendTheRepliesBackAndFindThemCached) {
  test::TestServer srv(engine_config(2, 128));
  LoadgenConfig c = run_config(srv, 3, 4, 8, 6, 10);
  c.concurrency = {2};
  c.turns = 3;
  Loadgen lg(c);
  const auto runs = lg.run_all();
  ASSERT_EQ(runs.size(), 1u);
  const RunReport& r = runs[0];
  EXPECT_EQ(r.requests, 9);
  EXPECT_EQ(r.completed, 9);
  EXPECT_EQ(r.failed, 0) << r.first_error;
  // Each conversation's prompts: turn 1 alone, then what came before, plus the reply and new
  // tokens. The first turns' lengths are known, so the later ones must be longer.
  int64_t first_turns = 0, follow_up_min = 0;
  for (const auto& w : make_workload(c, static_cast<int32_t>(test::tiny_model().hparams().n_vocab), 0)) {
    first_turns += static_cast<int64_t>(w.prompt.size());
    follow_up_min += 2 * static_cast<int64_t>(w.prompt.size()) + static_cast<int64_t>(w.follow_ups[0].tokens.size());
  }
  EXPECT_GT(r.prompt_tokens, first_turns + follow_up_min);
  // At least the earlier prompts of every later turn are reused (whole blocks and copied rows).
  EXPECT_GE(r.cached_prompt_tokens, follow_up_min);
  EXPECT_LT(r.cached_prompt_tokens, r.prompt_tokens);
  EXPECT_GT(r.ttft_follow_up_ms.p50, 0.0);
  const auto j = lg.report_json(runs);
  EXPECT_EQ(j["turns"], 3);
  EXPECT_EQ(j["runs"][0]["cached_prompt_tokens"].get<int64_t>(), r.cached_prompt_tokens);
  EXPECT_TRUE(j["runs"][0].contains("ttft_ms_later_turns"));
  EXPECT_NE(Loadgen::table(runs).find("later turns: TTFT"), std::string::npos);
}

TEST(LoadgenUrl, HostPortAndPrefix) {
  struct Case {
    const char* url;
    const char* host;
    int port;
    const char* prefix;
  };
  const Case cases[] = {
      {"http://127.0.0.1:8080", "127.0.0.1", 8080, ""},  {"localhost:9000/v1/", "localhost", 9000, ""},
      {"http://example.org", "example.org", 80, ""},     {"http://h:81/proxy/v1", "h", 81, "/proxy"},
      {"http://[::1]:8080", "::1", 8080, ""},            {"http://[fe80::2]/api", "fe80::2", 80, "/api"},
  };
  for (const Case& c : cases) {
    const HttpEndpoint ep = HttpEndpoint::parse(c.url);
    EXPECT_EQ(ep.host, c.host) << c.url;
    EXPECT_EQ(ep.port, c.port) << c.url;
    EXPECT_EQ(ep.prefix, c.prefix) << c.url;
  }
}

TEST(LoadgenUrl, BadUrlsNameTheProblem) {
  auto error_of = [](const std::string& url) {
    try {
      HttpEndpoint::parse(url);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error_of("https://example.org"), "--url: https is not supported; use http://HOST:PORT");
  EXPECT_EQ(error_of("ftp://example.org"), "--url: ftp is not supported; use http://HOST:PORT");
  for (const char* url : {"http://h:x", "http://h:80abc", "http://h:0", "http://h:65536", "http://h:", "http://[::1]:"})
    EXPECT_EQ(error_of(url), std::string("--url: bad port in '") + url + "' (expected 1-65535)") << url;
  EXPECT_EQ(error_of("http://"), "--url: no host in 'http://'");
  EXPECT_EQ(error_of("http://[::1:8080"), "--url: no ']' after the IPv6 address in 'http://[::1:8080'");
  EXPECT_EQ(error_of("http://[::1]x"), "--url: unexpected 'x' in 'http://[::1]x'");
}

TEST(Loadgen, ClearErrorsForBadSettingsAndNoServer) {
  LoadgenConfig c;
  c.endpoint.port = 1;  // nothing listens there
  c.rounds = 0;
  try {
    Loadgen lg(c);
    FAIL() << "rounds 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--rounds"), std::string::npos) << e.what();
  }
  c.rounds = 1;
  c.turns = 0;
  EXPECT_THROW(Loadgen{c}, Error);
  c.turns = 1;
  c.endpoint.timeout_s = 5;
  try {
    Loadgen lg(c);
    FAIL() << "no server, yet no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
    // In words, not httplib's bare "Connection".
    EXPECT_NE(std::string(e.what()).find("could not connect (is a server listening there?)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sy
