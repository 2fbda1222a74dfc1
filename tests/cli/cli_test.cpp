// The switchyard binary as scripts use it: output formats and error messages.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/cpu_info.h"
#include "support/run_cli.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

using Result = test::CliRun;
Result run(const std::string& args) { return test::run_cli(args); }

std::string mixtral() { return test::shared_path("fixtures/mixtral/model.gguf"); }

TEST(Cli, LogitsFromTokensMatchFixture) {
  const auto cases = nlohmann::json::parse(test::read_text_file(test::shared_path("fixtures/mixtral/cases.json")));
  const auto& c = cases["cases"][0];
  std::string ids;
  for (int t : c["tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  test::TempFile out(".f32");
  const Result r = run("logits -m " + mixtral() + " --tokens " + ids + " -o " + out.path());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto got = test::read_f32_file(out.path());
  const auto want = test::read_f32_file(test::shared_path("fixtures/mixtral/" + c["logits_file"].get<std::string>()));
  ASSERT_EQ(got.size(), c["tokens"].size() * 32000);
  ASSERT_EQ(want.size(), got.size());  // the `en` case stores every position
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
    max_diff = std::max(max_diff, std::fabs(double(want[i]) - got[i]));
  }
  EXPECT_LE(max_diff, 1e-3 * max_ref);
}

TEST(Cli, LogitsFromPromptAddsBos) {
  test::TempFile out(".f32");
  const Result r = run("logits -m " + mixtral() + " -p 'Hello world' -o " + out.path());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(test::read_f32_file(out.path()).size(), 3u * 32000);  // <s> Hello world
  // Special-token text is one token, as generate and tokenize read it, unless --no-special.
  Result special = run("logits -m " + mixtral() + " -p 'a</s>' --no-bos -o " + out.path());
  ASSERT_EQ(special.code, 0) << special.out;
  const size_t n_special = test::read_f32_file(out.path()).size() / 32000;
  const Result ids = run("tokenize -m " + mixtral() + " -p 'a</s>' --ids --no-bos");
  EXPECT_EQ(n_special, nlohmann::json::parse(ids.out).size());
  special = run("logits -m " + mixtral() + " -p 'a</s>' --no-bos --no-special -o " + out.path());
  ASSERT_EQ(special.code, 0) << special.out;
  EXPECT_GT(test::read_f32_file(out.path()).size() / 32000, n_special);
}

TEST(Cli, TokenizeIdsAsJson) {
  Result r = run("tokenize -m " + mixtral() + " -p 'Hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse("[1, 15043, 3186]"));
  r = run("tokenize -m " + mixtral() + " -p 'Hello world' --ids --no-bos");
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse("[15043, 3186]"));
  // Special-token text is parsed unless --no-special.
  r = run("tokenize -m " + mixtral() + " -p 'a</s>' --ids --no-bos");
  EXPECT_EQ(nlohmann::json::parse(r.out).back(), 2);
  r = run("tokenize -m " + mixtral() + " -p 'a</s>' --ids --no-bos --no-special");
  EXPECT_NE(nlohmann::json::parse(r.out).back(), 2);
  // Vocabulary-only files work too.
  r = run("tokenize -m " + test::shared_path("fixtures/tokenizers/ggml-vocab-gpt-2.gguf") + " -p 'Hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse("[15496, 995]"));
}

TEST(Cli, GenerateGreedyMatchesRecordedContinuation) {
  const auto cases = nlohmann::json::parse(test::read_text_file(test::shared_path("models/tiny-mixtral/cases.json")));
  const Result r = run(std::string("generate -m ") + SY_SOURCE_DIR + "/models/tiny-mixtral-f16.gguf -p 'A fool and his money' -n 16 --temp 0 -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("A fool and his money is a good thing.\n-- Lao Tse, \"The Tao"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
}

// A generated token that is a NUL byte (byte-level BPE has one) is printed, with whatever
// follows it: this random-weight model's 16th greedy token is byte 0x00.
TEST(Cli, GeneratePrintsNulBytes) {
  test::TempFile model(".gguf");
  ASSERT_EQ(run("synth --preset tiny --arch olmoe --embd 256 --ff 256 --heads 8 --heads-kv 8 --layers 3 --type f32 -o " +
                model.path())
                .code,
            0);
  const std::string gen = "generate -m " + model.path() + " -p 'Hello world, the quick brown fox' --temp 0 -t 2 -n ";
  const Result r15 = run(gen + "15"), r16 = run(gen + "16");
  ASSERT_EQ(r16.code, 0) << r16.out;
  EXPECT_EQ(r15.out.find('\0'), std::string::npos);
  EXPECT_NE(r16.out.find('\0'), std::string::npos) << "the 16th token's NUL was not printed";
}

TEST(Cli, GenerateSaysWhenTheContextRunsOut) {
  const std::string model = std::string(SY_SOURCE_DIR) + "/models/tiny-mixtral-f16.gguf";
  // 'A fool and his money' is 6 tokens with BOS: a context of 10 leaves room for 4.
  Result r = run("generate -m " + model + " -p 'A fool and his money' -n 16 --temp 0 -t 2 -c 10");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("stopped after 4 of 16 tokens: the context of 10 positions is full; raise --ctx-size"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("trained on"), std::string::npos) << r.out;
  // tiny-mixtral was trained on 256 positions.
  r = run("generate -m " + model + " -p 'A fool' -n 2 --temp 0 -t 2 -c 300");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--ctx-size 300 is longer than the 256 positions the model was trained on"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("stopped after"), std::string::npos) << r.out;
}

TEST(Cli, PerplexityJson) {
  const Result r = run(std::string("perplexity -m ") + SY_SOURCE_DIR + "/models/tiny-mixtral-f16.gguf -f " +
                       test::shared_path("models/tiny-mixtral/valid.txt") + " -c 256 --chunks 2 --json 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_EQ(j["n_chunks"], 2);
  EXPECT_FALSE(j.contains("expert_cache")) << "no cache, no cache figures";
}

// --version names the release, the commit and the kernels in use (what a bug report needs);
// no command at all lists the commands.
TEST(Cli, VersionAndNoCommand) {
  Result r = run("--version");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("switchyard 0.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" (git "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("), kernels "), std::string::npos) << r.out;
  // SY_ISA caps the kernels, in any case; a value it does not know is said, not ignored.
  r = test::run_command("SY_ISA=AVX2 " + std::string(SY_CLI_PATH) + " --version");
  EXPECT_EQ(r.out, test::run_command("SY_ISA=avx2 " + std::string(SY_CLI_PATH) + " --version").out);
  EXPECT_EQ(r.out.find("avx512"), std::string::npos) << r.out;
  r = test::run_command("SY_ISA=sse " + std::string(SY_CLI_PATH) + " --version");
  EXPECT_NE(r.out.find("warning: SY_ISA=sse is not one of scalar, avx2"), std::string::npos) << r.out;
  r = run("");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("Usage: switchyard"), std::string::npos) << r.out;
  for (const char* command : {"generate", "serve", "loadgen", "analyze", "bench"})
    EXPECT_NE(r.out.find(std::string("\n  ") + command + " "), std::string::npos) << command << ": " << r.out;
}

// bench's figures name the build they came from, as --version does: the first line of its
// log and "build" in its JSON (a figure from a "-dirty" build is an experiment's).
TEST(Cli, BenchNamesItsBuild) {
  Result v = run("--version");
  ASSERT_EQ(v.code, 0) << v.out;
  const std::string version = v.out.substr(0, v.out.find('\n'));
  test::TempFile json(".json");
  // The JSON alone in the file, the log in r.out.
  const std::string cmd = std::string(SY_CLI_PATH) + " bench -m " + mixtral() + " -t 1 --batch 1 --prompt 0";
  const Result r = test::run_command("{ " + cmd + " --gen 2 --no-moe --json > " + json.path() + "; }");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), version) << r.out;
  const auto j = nlohmann::json::parse(test::read_text_file(json.path()));
  EXPECT_EQ(j.value("build", ""), version);
}

// More threads than the process has CPUs: each step waits for threads that are not
// running, so the run says so (and without -t it takes the usable CPUs, no warning).
TEST(Cli, MoreThreadsThanCpusWarns) {
  const std::string common = std::string("generate -m ") + SY_SOURCE_DIR + "/models/tiny-mixtral-f16.gguf -p hi -n 2";
  const int cpus = usable_cpus();
  Result r = run(common + " -t " + std::to_string(cpus + 1));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: -t " + std::to_string(cpus + 1) + " is more threads than the " +
                       std::to_string(cpus) + " CPU(s) this process may use"),
            std::string::npos)
      << r.out;
  r = run(common);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("more threads than"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| " + std::to_string(cpus) + " threads"), std::string::npos) << r.out;
}

// --seed -1 draws a seed and says which, and that seed gives the same text again.
TEST(Cli, GenerateRandomSeedIsPrintedAndRepeats) {
  const std::string common = std::string("generate -m ") + SY_SOURCE_DIR +
                             "/models/tiny-mixtral-f16.gguf -p 'A fool and his money' -n 12 --temp 1 -t 2 --seed ";
  const Result drawn = run(common + "-1");
  ASSERT_EQ(drawn.code, 0) << drawn.out;
  const std::string tag = "generate: seed ";
  const size_t at = drawn.out.find(tag);
  ASSERT_NE(at, std::string::npos) << drawn.out;
  const std::string seed = drawn.out.substr(at + tag.size(), drawn.out.find(' ', at + tag.size()) - at - tag.size());
  const Result again = run(common + seed);
  ASSERT_EQ(again.code, 0) << again.out;
  // The text: from the prompt to the speed line on stderr (run_cli merges the two streams).
  const auto text_of = [](const std::string& out) {
    const size_t b = out.find("A fool and his money"), e = out.find("\nprompt: ");
    return b != std::string::npos && e != std::string::npos && e > b ? out.substr(b, e - b) : std::string();
  };
  EXPECT_GT(text_of(again.out).size(), std::string("A fool and his money").size()) << again.out;
  EXPECT_EQ(text_of(drawn.out), text_of(again.out)) << "seed " << seed;
  const Result bad = run(common + "-2");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--seed: Value -2 not in range -1"), std::string::npos) << bad.out;
}

// Off a terminal (a script's log) the running perplexity comes as whole lines, without the
// carriage returns that redraw it on a terminal.
TEST(Cli, PerplexityProgressIsLinesInALog) {
  const Result r = run(std::string("perplexity -m ") + SY_SOURCE_DIR + "/models/tiny-mixtral-f16.gguf -f " +
                       test::shared_path("models/tiny-mixtral/valid.txt") + " -c 64 --chunks 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1/2] ppl "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n[2/2] ppl "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nperplexity: "), std::string::npos) << r.out;
}

// With an expert cache the same perplexity comes out (bit-identical experts), and the JSON
// and the log tell how the cache was used: decode-like steps without prefetch load exactly
// the misses, and every expert needed was a hit or a miss.
TEST(Cli, PerplexityReportsTheExpertCache) {
  const std::string common = std::string("perplexity -m ") + SY_SOURCE_DIR + "/models/tiny-mixtral-f16.gguf -f " +
                             test::shared_path("models/tiny-mixtral/valid.txt") + " -c 64 --chunks 2 -b 1 --json";
  const Result resident = run(common + " 2>/dev/null");
  const Result cached = run(common + " --expert-cache 50% --no-prefetch");
  ASSERT_EQ(resident.code, 0) << resident.out;
  ASSERT_EQ(cached.code, 0) << cached.out;
  const auto want = nlohmann::json::parse(resident.out.substr(resident.out.find('{')));
  const auto got = nlohmann::json::parse(cached.out.substr(cached.out.find("{\"")));
  EXPECT_EQ(got["ppl"], want["ppl"]);
  const auto& c = got["expert_cache"];
  EXPECT_EQ(c["policy"], "lfu-decay");
  EXPECT_EQ(c["slots"], 16);
  EXPECT_GT(c["loads"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(c["hit_rate"].get<double>() + c["load_rate"].get<double>(), 1.0);
  EXPECT_EQ(c["prefetched_rate"], 0.0);
  EXPECT_NE(cached.out.find("perplexity: expert cache (lfu-decay, 16 experts): "), std::string::npos) << cached.out;
  EXPECT_NE(cached.out.find("read per token; no prefetch; waited"), std::string::npos) << cached.out;
}

TEST(Cli, InfoReportsExperts) {
  const Result r = run("info -m " + mixtral() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["n_expert"], 8);
  EXPECT_EQ(j["params_routed_experts"], 2 * 3 * 32 * 128 * 8);
}

TEST(Cli, BadInputGivesClearErrors) {
  Result r = run("generate -m /nonexistent.gguf -p hi");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.gguf"), std::string::npos) << r.out;
  r = run("logits -m " + mixtral() + " --tokens 1,x,3 -o /dev/null");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("'x' is not a token id"), std::string::npos) << r.out;
  r = run("logits -m " + mixtral() + " --tokens 1,99999 -o /dev/null");
  EXPECT_NE(r.out.find("outside the vocabulary"), std::string::npos) << r.out;
  r = run("generate -m " + mixtral() + " -p hi --top-p 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--top-p"), std::string::npos) << r.out;
  r = run("generate -m " + mixtral() + " -p hi --moe-gating sometimes");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--moe-gating"), std::string::npos) << r.out;
  r = run("perplexity -m " + mixtral() + " -f README.md --chunks -5");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--chunks"), std::string::npos) << r.out;
  // Each closed-loop client is a thread; a count past int wrapped into an open-loop burst.
  r = run("loadgen --url http://127.0.0.1:9 --concurrency 1e10");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--concurrency: expected whole numbers from 1 to 4096, got 1e+10"), std::string::npos) << r.out;
  // serve's flags: NaN passed the range check (and the cast to milliseconds was undefined), an
  // empty host bound somewhere, blocks longer than a context silently allowed one request.
  r = run("serve -m " + mixtral() + " --port 0 --shutdown-timeout nan");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--shutdown-timeout"), std::string::npos) << r.out;
  r = run("serve -m " + mixtral() + " --port 0 --host ''");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--host"), std::string::npos) << r.out;
  r = run("serve -m " + mixtral() + " --port 0 -c 64 --kv-block-size 128");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--kv-block-size 128 is longer than a context (--ctx-size 64)"), std::string::npos) << r.out;
  r = run("frobnicate");
  EXPECT_NE(r.code, 0);
  // Seeds are whole numbers from 0 (generate's -1 is its random seed); a negative one wrapped.
  for (const char* cmd :
       {"synth --preset tiny -o /tmp/never-written.gguf", "loadgen --url http://127.0.0.1:9 --concurrency 1"}) {
    r = run(std::string(cmd) + " --seed -1");
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("--seed: must be 0 or more, got -1"), std::string::npos) << cmd << ": " << r.out;
  }
  // The expert cache's settings without the cache would silently run all experts resident.
  r = run("generate -m " + mixtral() + " -p hi --moe-gating static --capacity-factor -1");
  EXPECT_NE(r.out.find("--capacity-factor: must be a positive number, got -1"), std::string::npos) << r.out;
  r = run("generate -m " + mixtral() + " -p hi -n 1 --capacity-factor 2");
  EXPECT_NE(r.out.find("--capacity-factor requires --moe-gating"), std::string::npos) << r.out;
  r = run("logits -m " + mixtral() + " -p hi -o /dev/null --moe-gating dynamic --capacity-factor 0.1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--capacity-factor: applies to --moe-gating static only"), std::string::npos) << r.out;
  for (const char* flag : {"--expert-profile x.trace", "--expert-policy lru", "--no-prefetch", "--io-threads 2",
                           "--prefetch-layers 2"}) {
    r = run("generate -m " + mixtral() + " -p hi -n 1 " + flag);
    EXPECT_NE(r.code, 0) << flag;
    EXPECT_NE(r.out.find("requires --expert-cache"), std::string::npos) << flag << ": " << r.out;
  }
  // A prefetch depth with the prefetch turned off: one of the two is a mistake.
  r = run("generate -m " + mixtral() + " -p hi -n 1 --expert-cache 50% --no-prefetch --prefetch-layers 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--no-prefetch excludes --prefetch-layers"), std::string::npos) << r.out;
  // A chat template file that cannot be used stops serve before it loads the model.
  r = run("serve -m " + mixtral() + " --port 0 --chat-template-file /nonexistent.jinja");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--chat-template-file: cannot read /nonexistent.jinja"), std::string::npos) << r.out;
  r = run("serve -m " + mixtral() + " --port 0 --chat-template-file /dev/null");
  EXPECT_NE(r.out.find("--chat-template-file: /dev/null is empty"), std::string::npos) << r.out;
  {
    test::TempFile odd(".jinja");
    std::ofstream(odd.path()) << "{% for m in messages %}### {{ m.role }}: {{ m.content }}{% endfor %}";
    r = run("serve -m " + mixtral() + " --port 0 --chat-template-file " + odd.path());
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("none of the chat formats switchyard renders; pick the closest with --chat-template"),
              std::string::npos)
        << r.out;
  }
  // So does an origin that is not one.
  r = run("serve -m " + mixtral() + " --port 0 --cors-origin localhost:3000");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--cors-origin: 'localhost:3000' is not an origin; give '*' or scheme://host[:port]"),
            std::string::npos)
      << r.out;
  r = run("serve -m " + mixtral() + " --port 0 --chat-template chatml --chat-template-file x.jinja");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
  r = run("generate -m " + test::shared_path("fixtures/tokenizers/ggml-vocab-gpt-2.gguf") + " -p hi");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sy
