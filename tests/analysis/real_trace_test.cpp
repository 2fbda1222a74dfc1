// Traces of real runs of the default model (models/tiny-mixtral-f16.gguf): recorded through
// sy::Session with the TraceWriter attached, read back and analysed; and the CLI path
// (generate --trace-experts, then analyze).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/report.h"
#include "experts/trace.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

std::string default_model() {
  return std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
}

struct RecordedRun {
  std::vector<uint32_t> step_tokens;  // what the forward steps were, as the test drove them
};

// A few prompts: each prompt evaluated in one step, then 12 greedy tokens one step each.
RecordedRun record(const Model& model, const std::string& path) {
  const std::vector<std::string> prompts = {"In the beginning God", "And the LORD spake unto Moses, saying,",
                                            "A fool and his money", "The trouble with computers is"};
  ThreadPool pool(2);
  TraceWriter writer(path, TraceInfo::from_hparams(model.hparams()), 256);
  RecordedRun run;
  for (const auto& p : prompts) {
    Session s(model, pool, 256);
    s.forward().set_routing_observer(&writer);
    const auto tokens = model.tokenizer().encode(p, true, false);
    s.eval(tokens);
    run.step_tokens.push_back(static_cast<uint32_t>(tokens.size()));
    for (int i = 0; i < 12; ++i) {
      const float* l = s.logits();
      int32_t best = 0;
      for (int32_t v = 1; v < model.hparams().n_vocab; ++v) best = l[v] > l[best] ? v : best;
      s.eval({best});
      run.step_tokens.push_back(1);
    }
  }
  writer.close();
  return run;
}

TEST(AnalysisRealTrace, SessionTraceReadsBackAndAnalyses) {
  auto model = Model::load(default_model());
  for (const char* suffix : {".sytrace", ".jsonl"}) {
    test::TempFile f(suffix);
    const RecordedRun run = record(*model, f.path());
    const Trace t = read_trace(f.path());
    EXPECT_EQ(t.info.model_name, "tiny-mixtral");
    EXPECT_EQ(t.info.n_expert, 8);
    EXPECT_EQ(t.info.top_k, 2);
    EXPECT_EQ(t.info.moe_layers, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(t.tokens, run.step_tokens);
    // Single-token steps use exactly top-k = 2 experts in every layer.
    for (int64_t s = 0; s < t.n_steps(); ++s) {
      if (t.tokens[s] != 1) continue;
      for (int l = 0; l < 4; ++l) {
        int active = 0;
        for (int e = 0; e < 8; ++e) active += t.count(s, l, e) > 0;
        EXPECT_EQ(active, 2) << "step " << s << " layer " << l;
      }
    }

    AnalysisOptions opt;
    opt.trace_path = f.path();
    const AnalysisResult r = run_analysis(t, opt);
    // Belady's MIN is a lower bound on the real trace too, at every size, in both scopes.
    for (const MissCurve* m : {&r.per_layer, &r.global}) {
      ASSERT_EQ(m->policies.back(), "belady");
      for (size_t p = 0; p + 1 < m->policies.size(); ++p) {
        for (size_t i = 0; i < m->per_layer.size(); ++i) {
          EXPECT_LE(m->results.back()[i].misses, m->results[p][i].misses)
              << m->policies[p] << " at " << m->per_layer[i];
        }
      }
    }
    for (const auto& study : r.placement) EXPECT_LE(study[1].fit.max_load, study[0].fit.max_load + 1e-9);
    EXPECT_GT(r.activity.inactive_mean, 0.5);  // mostly single-token steps: 6 of 8 experts idle

    const test::TempDir report;
    const std::string& dir = report.path();
    const auto files = write_report(r, dir);
    for (const auto& name : files) {
      const std::string text = test::read_text_file(dir + "/" + name);
      if (name.ends_with(".svg")) {
        EXPECT_EQ(text.rfind("<svg", 0), 0u) << name;
        EXPECT_NE(text.find("</svg>"), std::string::npos) << name;
      }
    }
    EXPECT_NE(std::find(files.begin(), files.end(), "summary.md"), files.end());
    EXPECT_NE(std::find(files.begin(), files.end(), "miss_rate_per_layer.svg"), files.end());
    EXPECT_NE(std::find(files.begin(), files.end(), "placement.svg"), files.end());
  }
}

std::string run_cli(const std::string& args, int& code) {
  const std::string cmd = std::string(SY_CLI_PATH) + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(AnalysisRealTrace, CliGenerateTraceThenAnalyze) {
  test::TempFile trace(".sytrace");
  int code = -1;
  std::string out =
      run_cli("generate -m " + default_model() +
                  " -p 'A fool and his money' -n 8 --temp 0 -t 2 --trace-experts " + trace.path(),
              code);
  ASSERT_EQ(code, 0) << out;
  // The prompt, then the first 7 of the 8 tokens (the last one is sampled, never evaluated).
  EXPECT_NE(out.find("trace: 8 steps written"), std::string::npos) << out;
  out = run_cli("analyze " + trace.path() + " --json --devices 2,4", code);
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["trace"]["n_steps"], 8);
  EXPECT_EQ(j["placement"].size(), 2u);
  EXPECT_TRUE(j["cache"]["half"]["per-layer"]["miss_rate"].contains("belady"));

  // Errors name the file and the flag.
  test::TempFile bad(".sytrace");
  bad.write({'S', 'Y', 'X', 'T', 'R', 'A', 'C', 'E', 1, 0});
  out = run_cli("analyze " + bad.path(), code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find(bad.path() + ": truncated header"), std::string::npos) << out;
  out = run_cli("analyze " + trace.path() + " --devices 2,x", code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--devices"), std::string::npos) << out;
  out = run_cli("analyze " + trace.path() + " --devices ''", code);  // skipped the placement study
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--devices: no device count given"), std::string::npos) << out;
  // A one-step trace (the prompt alone) has no next step to measure locality on: refused,
  // with the way out.
  test::TempFile one(".sytrace");
  out = run_cli("generate -m " + default_model() + " -p Hi -n 1 --trace-experts " + one.path(), code);
  ASSERT_EQ(code, 0) << out;
  out = run_cli("analyze " + one.path(), code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find(one.path() + " has 1 step(s); locality and the held-out placement need at least 2 (record a "
                                  "longer run"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace sy
