// Trace files: write -> read round trips in both encodings, the observer path from real
// dispatch plans, and clear errors for missing, truncated and corrupt files.
#include "experts/trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "base/error.h"
#include "model/hparams.h"
#include "moe/dispatch_plan.h"
#include "support/shared_data.h"
#include "support/temp_file.h"
#include "trace_helpers.h"

namespace sy {
namespace {

void expect_same(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.info.model_name, b.info.model_name);
  EXPECT_EQ(a.info.n_layer, b.info.n_layer);
  EXPECT_EQ(a.info.n_expert, b.info.n_expert);
  EXPECT_EQ(a.info.top_k, b.info.top_k);
  EXPECT_EQ(a.info.moe_layers, b.info.moe_layers);
  EXPECT_EQ(a.info.static_gating, b.info.static_gating);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.counts, b.counts);
}

// The error a read of `path` gives, or "" if it reads.
std::string read_error(const std::string& path) {
  try {
    read_trace(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string bytes_error(const std::vector<uint8_t>& bytes, const std::string& suffix = ".sytrace") {
  test::TempFile f(suffix);
  f.write(bytes);
  const std::string e = read_error(f.path());
  if (!e.empty()) {
    EXPECT_NE(e.find(f.path()), std::string::npos) << "the message must name the file: " << e;
  }
  return e;
}

std::vector<uint8_t> to_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

TEST(AnalysisTrace, BinaryAndJsonlRoundTrip) {
  Trace t = test::random_trace(1, 3, 8, 2, 50, 40);
  t.info.n_layer = 5;
  t.info.moe_layers = {1, 2, 4};  // leading dense layer and a gap
  for (const char* suffix : {".sytrace", ".jsonl"}) {
    test::TempFile f(suffix);
    write_trace(f.path(), t);
    expect_same(t, read_trace(f.path()));
  }
  // Binary: 56-byte header + name (10 bytes, padded to 12) + 3 layer ids; 4 + 3*8*2 bytes per step.
  test::TempFile f(".sytrace");
  write_trace(f.path(), t);
  EXPECT_EQ(test::read_bytes(f.path()).size(), size_t(56 + 12 + 12 + 50 * (4 + 48)));
}

TEST(AnalysisTrace, WideCountsRoundTrip) {
  Trace t;
  t.info = test::small_info(1, 4, 1);
  t.add_step(70000, {70000, 0, 0, 0});  // beyond 16 bits: the writer picks 32-bit counts
  t.add_step(3, {1, 1, 1, 0});
  test::TempFile f(".sytrace");
  write_trace(f.path(), t);
  expect_same(t, read_trace(f.path()));
}

TEST(AnalysisTrace, ObserverRecordsDispatchPlans) {
  TraceInfo info = test::small_info(2, 4, 2);
  test::TempFile f(".sytrace");
  Routing r;
  r.n_tokens = 3;
  r.k = 2;
  r.expert = {0, 1, 0, 2, 3, 0};  // expert 0: 3 tokens, 1: 1, 2: 1, 3: 1
  r.weight.assign(6, 0.5f);
  DispatchPlan plan;
  build_dynamic_plan(r, 4, plan);
  {
    TraceWriter w(f.path(), info);
    for (int step = 0; step < 2; ++step) {
      w.on_routing(0, r, plan);
      w.on_routing(1, r, plan);
      w.on_step_end();
    }
    w.on_step_end();           // a step without MoE routing records nothing
    w.on_routing(0, r, plan);  // a step that threw after its first layer is dropped...
    w.on_routing(0, r, plan);  // ...when the next one starts
    w.on_routing(1, r, plan);
    w.on_step_end();
    w.close();
    EXPECT_EQ(w.n_steps(), 3);
  }
  const Trace t = read_trace(f.path());
  ASSERT_EQ(t.n_steps(), 3);
  EXPECT_EQ(t.tokens[2], 3u);
  EXPECT_EQ(std::vector<uint32_t>(t.step_layer(2, 0), t.step_layer(2, 0) + 4),
            (std::vector<uint32_t>{3, 1, 1, 1}));
  EXPECT_EQ(std::vector<uint32_t>(t.step_layer(1, 1), t.step_layer(1, 1) + 4),
            (std::vector<uint32_t>{3, 1, 1, 1}));

  // Static gating, capacity 2 per expert: expert 0 drops token 2's second choice, and the
  // padding slots of experts 1-3 are not counted.
  DispatchPlan st;
  build_static_plan(r, 4, 1.0, st);
  ASSERT_EQ(st.n_rows(), 8);
  info.static_gating = true;
  test::TempFile g(".jsonl");
  {
    TraceWriter w(g.path(), info);
    w.on_routing(0, r, st);
    w.on_routing(1, r, st);
    w.on_step_end();
  }  // the destructor finalizes
  const Trace s = read_trace(g.path());
  EXPECT_TRUE(s.info.static_gating);
  EXPECT_EQ(std::vector<uint32_t>(s.step_layer(0, 0), s.step_layer(0, 0) + 4),
            (std::vector<uint32_t>{2, 1, 1, 1}));

  // Four tokens: capacity 2 x 4 experts = 8 rows, as many as tokens x k, and still padded
  // (expert 0 drops two choices, experts 2 and 3 have free slots).
  Routing r4;
  r4.n_tokens = 4;
  r4.k = 2;
  r4.expert = {0, 1, 0, 1, 0, 2, 0, 3};
  r4.weight.assign(8, 0.5f);
  DispatchPlan st4;
  build_static_plan(r4, 4, 1.0, st4);
  ASSERT_EQ(st4.n_rows(), 8);
  test::TempFile g4(".sytrace");
  {
    TraceWriter w(g4.path(), info);
    w.on_routing(0, r4, st4);
    w.on_routing(1, r4, st4);
    w.on_step_end();
  }
  const Trace s4 = read_trace(g4.path());
  EXPECT_EQ(std::vector<uint32_t>(s4.step_layer(0, 1), s4.step_layer(0, 1) + 4),
            (std::vector<uint32_t>{2, 2, 1, 1}));

  // Misuse is an error naming the file.
  TraceWriter w(f.path(), test::small_info(2, 4, 2));
  try {
    w.on_routing(7, r, plan);
    FAIL() << "layer 7 is not an MoE layer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(f.path()), std::string::npos);
  }
}

// A trace that cannot be written says why, in the system's words, with the file's name.
// Analyze writes the model name into JSON and SVG, which must be UTF-8: a GGUF's name is
// made valid (and cut between characters) when recorded, and an invalid one is refused.
TEST(AnalysisTrace, ModelNamesAreUtf8) {
  HParams hp;
  hp.n_layer = 2;
  hp.n_expert = 4;
  hp.n_expert_used = 2;
  hp.model_name = "m\xFF";
  EXPECT_EQ(TraceInfo::from_hparams(hp, false).model_name, "m\xEF\xBF\xBD");
  hp.model_name = std::string(1023, 'x') + "\xC3\xA9";  // the 1024-byte limit falls inside the "é"
  EXPECT_EQ(TraceInfo::from_hparams(hp, false).model_name, std::string(1023, 'x'));

  TraceInfo info = test::small_info(2, 4, 2);
  info.model_name = "m\xFF";
  test::TempFile f(".sytrace");
  try {
    TraceWriter w(f.path(), info);
    FAIL() << "a name that is not UTF-8 was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model name is not valid UTF-8"), std::string::npos) << e.what();
  }
}

TEST(AnalysisTrace, WriteErrorsGiveTheSystemsReason) {
  const auto error_of = [](const std::string& path) -> std::string {
    try {
      TraceWriter w(path, test::small_info(2, 4, 2));
      Routing r;
      r.n_tokens = 1;
      r.k = 2;
      r.expert = {0, 1};
      r.weight.assign(2, 0.5f);
      DispatchPlan plan;
      build_dynamic_plan(r, 4, plan);
      for (int step = 0; step < 2000; ++step) {  // past the stream's buffer
        w.on_routing(0, r, plan);
        w.on_routing(1, r, plan);
        w.on_step_end();
      }
      w.close();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("/nonexistent/folder/t.sytrace"),
            "trace /nonexistent/folder/t.sytrace: cannot create the file: No such file or directory");
  struct stat st;
  if (::stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full here";
  const std::string full = error_of("/dev/full");
  EXPECT_EQ(full.rfind("trace /dev/full: write failed after ", 0), 0u) << full;
  EXPECT_NE(full.find(" steps: No space left on device"), std::string::npos) << full;
}

TEST(AnalysisTrace, MissingEmptyAndForeignFiles) {
  EXPECT_EQ(read_error("/nonexistent/trace.sytrace"),
            "trace: cannot read /nonexistent/trace.sytrace: No such file or directory");
  EXPECT_NE(bytes_error({}).find("empty"), std::string::npos);
  EXPECT_NE(bytes_error(to_bytes("GGUF\3\0\0\0 something else")).find("not an expert trace"),
            std::string::npos);
}

TEST(AnalysisTrace, TruncatedAndCorruptBinary) {
  test::TempFile f(".sytrace");
  write_trace(f.path(), test::random_trace(2, 2, 8, 2, 10, 16));
  const std::vector<uint8_t> good = test::read_bytes(f.path());
  ASSERT_EQ(read_error(f.path()), "");

  auto cut = [&](size_t n) { return std::vector<uint8_t>(good.begin(), good.begin() + n); };
  EXPECT_NE(bytes_error(cut(30)).find("truncated header"), std::string::npos);
  EXPECT_NE(bytes_error(cut(good.size() - 5)).find("truncated"), std::string::npos);
  auto longer = good;
  longer.push_back(0);
  EXPECT_NE(bytes_error(longer).find("unexpected bytes"), std::string::npos);
  auto unfinished = good;
  for (int i = 40; i < 48; ++i) unfinished[i] = 0xFF;
  EXPECT_NE(bytes_error(unfinished).find("not finalized"), std::string::npos);
  auto flipped = good;
  flipped[good.size() - 3] ^= 0x10;
  EXPECT_NE(bytes_error(flipped).find("checksum mismatch"), std::string::npos);
  auto version = good;
  version[8] = 2;
  EXPECT_NE(bytes_error(version).find("unsupported trace version 2"), std::string::npos);
  auto experts = good;
  experts[28] = experts[29] = experts[30] = experts[31] = 0;
  EXPECT_NE(bytes_error(experts).find("n_expert 0"), std::string::npos);

  // Every truncation and every single-byte corruption is an error, never a crash or a
  // silently different trace.
  for (size_t n = 0; n < good.size(); ++n) EXPECT_NE(bytes_error(cut(n)), "") << "truncated to " << n;
  for (size_t i = 0; i < good.size(); ++i) {
    auto b = good;
    b[i] ^= 0x41;
    EXPECT_NE(bytes_error(b), "") << "byte " << i << " flipped";
  }
}

TEST(AnalysisTrace, TruncatedAndCorruptJsonl) {
  test::TempFile f(".jsonl");
  write_trace(f.path(), test::random_trace(3, 2, 4, 2, 5, 6));
  const std::string good = test::read_text_file(f.path());
  ASSERT_EQ(read_error(f.path()), "");
  const size_t end_line = good.rfind("{\"end\"");
  EXPECT_NE(bytes_error(to_bytes(good.substr(0, end_line)), ".jsonl").find("no end line"), std::string::npos);
  EXPECT_NE(bytes_error(to_bytes(good.substr(0, good.size() - 4)), ".jsonl").find("truncated"),
            std::string::npos);
  const size_t second = good.find('\n') + 1, third = good.find('\n', second) + 1;
  // Drop step 0: step 1 comes first.
  std::string skipped = good.substr(0, second) + good.substr(third);
  EXPECT_NE(bytes_error(to_bytes(skipped), ".jsonl").find("line 2: step 1 where step 0 was expected"),
            std::string::npos);
  // A count larger than the step's tokens, then counts that do not sum to tokens * top_k.
  Trace t;
  t.info = test::small_info(1, 4, 2);
  t.add_step(2, {2, 1, 1, 0});
  test::TempFile g(".jsonl");
  write_trace(g.path(), t);
  std::string text = test::read_text_file(g.path());
  std::string bad = text;
  bad.replace(bad.find("[[2,1,1,0]]"), 11, "[[3,1,0,0]]");
  EXPECT_NE(bytes_error(to_bytes(bad), ".jsonl").find("expert 0 has 3 tokens but the step has 2"),
            std::string::npos);
  bad = text;
  bad.replace(bad.find("[[2,1,1,0]]"), 11, "[[2,1,0,0]]");
  EXPECT_NE(bytes_error(to_bytes(bad), ".jsonl").find("sum to 3"), std::string::npos);
  bad = text;
  bad.replace(bad.find("[[2,1,1,0]]"), 11, "[[2,1,1]]");
  EXPECT_NE(bytes_error(to_bytes(bad), ".jsonl").find("must hold 4 expert counts"), std::string::npos);
  bad = text;
  bad.replace(bad.find("\"top_k\":2"), 9, "\"top_k\":9");
  EXPECT_NE(bytes_error(to_bytes(bad), ".jsonl").find("top_k 9"), std::string::npos);
  EXPECT_NE(bytes_error(to_bytes("{\"format\":\"something\"}\n"), ".jsonl").find("format"),
            std::string::npos);
  // Fields of the wrong JSON type are named, not reported as a library type error (a
  // fuzzer found both).
  EXPECT_NE(bytes_error(to_bytes("{\"format\":[0]}\n"), ".jsonl").find("\"format\" is not"), std::string::npos);
  bad = text;
  bad.replace(bad.find("\"static_gating\":false"), 21, "\"static_gating\":\"no\"");
  EXPECT_NE(bytes_error(to_bytes(bad), ".jsonl").find("\"static_gating\" is not true or false"), std::string::npos);
  EXPECT_NE(bytes_error(to_bytes(text.substr(0, text.find('\n') + 1) + "not json\n"), ".jsonl")
                .find("line 2: not a JSON object"),
            std::string::npos);
}

}  // namespace
}  // namespace sy
