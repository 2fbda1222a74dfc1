// switchyard synth: random-weight models that load and run, metadata and shapes as the
// presets say, deterministic bytes, router skew visible in the engine's routing, and the
// command line.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "base/error.h"
#include "base/thread_pool.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/shared_data.h"
#include "support/run_cli.h"
#include "support/temp_file.h"
#include "tokenizer/tokenizer.h"

namespace sy {
namespace {

SynthOptions tiny(const std::string& arch, DType type = DType::F32) {
  SynthOptions o;
  o.shape = synth_preset("tiny").shape;
  o.shape.arch = arch;
  if (arch == "qwen2moe") o.shape.n_ff_shexp = 128;  // the preset (olmoe) has no shared expert
  o.type = type;
  o.seed = 7;
  return o;
}

SynthStats write(const std::string& path, const SynthOptions& o, int threads = 2) {
  ThreadPool pool(threads);
  return write_synth_model(path, o, pool);
}

// Deterministic token ids spread over the vocabulary.
std::vector<int32_t> spread_tokens(int n, int64_t n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>((uint64_t(i) * 2654435761u + 12345) % uint64_t(n_vocab));
  return t;
}

// Evaluates tokens in one batch and checks every logit row is finite and not constant.
void expect_runs(const Model& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Session s(m, pool, 128);
  s.eval(tokens, true);
  const int64_t nv = m.hparams().n_vocab;
  for (size_t r = 0; r < tokens.size(); ++r) {
    const float* l = s.logits(static_cast<int64_t>(r));
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < nv; ++i) {
      ASSERT_TRUE(std::isfinite(l[i])) << "row " << r << " logit " << i;
      sum += l[i];
      sum2 += double(l[i]) * l[i];
    }
    const double sd = std::sqrt(sum2 / nv - (sum / nv) * (sum / nv));
    // Readers have std 1/sqrt(fan_in), so logits have a std of about 1.
    EXPECT_GT(sd, 0.3) << "row " << r;
    EXPECT_LT(sd, 3.0) << "row " << r;
  }
}

TEST(SynthModels, EveryFamilyAndTypeLoadsAndRuns) {
  for (const char* arch : {"llama", "olmoe", "qwen2moe", "qwen3moe"}) {
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      SCOPED_TRACE(std::string(arch) + " " + dtype_name(type));
      test::TempFile f;
      write(f.path(), tiny(arch, type));
      auto m = Model::load(f.path());
      EXPECT_EQ(m->hparams().arch_name, arch);
      EXPECT_EQ(m->hparams().n_vocab, 512);
      const auto tokens =
          m->tokenizer().encode("Hello world, the quick brown fox jumps over the lazy dog.", false, false);
      ASSERT_GT(tokens.size(), 5u);
      expect_runs(*m, tokens);
      for (const auto& t : m->file().tensors()) {
        const bool f32 = t.shape.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
        EXPECT_EQ(t.dtype, f32 ? DType::F32 : type) << t.name;
      }
    }
  }
}

TEST(SynthModels, DenseLlamaWithoutExperts) {
  SynthOptions o = tiny("llama", DType::Q8_0);
  o.shape.n_expert = 0;
  o.shape.n_ff = 96;
  test::TempFile f;
  write(f.path(), o);
  auto m = Model::load(f.path());
  EXPECT_FALSE(m->hparams().is_moe());
  EXPECT_EQ(m->hparams().n_ff, 96);
  expect_runs(*m, spread_tokens(16, 512));
}

// The file holds exactly the tensors synth_tensors() lists and the <arch>.* keys llama.cpp reads.
void expect_file_matches(const GgufFile& f, const SynthOptions& o) {
  const SynthShape& s = o.shape;
  const std::string a = s.arch + ".";
  EXPECT_EQ(f.get_string("general.architecture"), s.arch);
  EXPECT_EQ(f.get_uint("general.alignment"), 32u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_uint(a + "context_length"), uint64_t(s.n_ctx));
  EXPECT_EQ(f.get_uint(a + "embedding_length"), uint64_t(s.n_embd));
  EXPECT_EQ(f.get_uint(a + "block_count"), uint64_t(s.n_layer));
  EXPECT_EQ(f.get_uint(a + "attention.head_count"), uint64_t(s.n_head));
  EXPECT_EQ(f.get_uint(a + "attention.head_count_kv"), uint64_t(s.n_head_kv));
  EXPECT_FLOAT_EQ(float(f.get_float(a + "attention.layer_norm_rms_epsilon")), s.rms_eps);
  EXPECT_FLOAT_EQ(float(f.get_float(a + "rope.freq_base")), s.rope_base);
  EXPECT_EQ(f.get_uint(a + "expert_count"), uint64_t(s.n_expert));
  EXPECT_EQ(f.get_uint(a + "expert_used_count"), uint64_t(s.n_expert_used));
  EXPECT_EQ(f.get_uint(a + "expert_feed_forward_length"), uint64_t(s.n_ff));
  EXPECT_EQ(f.get_uint(a + "feed_forward_length"), uint64_t(s.arch == "qwen2moe" ? s.n_ff_shexp : s.n_ff));
  if (s.arch == "qwen2moe") {
    EXPECT_EQ(f.get_uint(a + "expert_shared_feed_forward_length"), uint64_t(s.n_ff_shexp));
  }
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), size_t(s.n_vocab));
  const uint64_t ftype = o.type == DType::F32    ? 0
                         : o.type == DType::F16  ? 1
                         : o.type == DType::Q4_0 ? 2
                         : o.type == DType::Q8_0 ? 7
                                                 : 32;
  EXPECT_EQ(f.get_uint("general.file_type"), ftype);

  const std::vector<SynthTensor> want = synth_tensors(o);
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const SynthTensor& t : want) {
    const GgufTensorInfo* got = f.find_tensor(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->shape, t.shape) << t.name;
    EXPECT_EQ(got->dtype, t.type) << t.name;
  }
}

std::vector<int64_t> shape_of(const std::vector<SynthTensor>& ts, const std::string& name) {
  for (const SynthTensor& t : ts) {
    if (t.name == name) return t.shape;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

TEST(SynthPresets, OlmoeShape) {
  SynthOptions o;
  o.shape = synth_preset("olmoe-1b-7b").shape;
  o.type = DType::Q4_0;
  const SynthShape& s = o.shape;
  EXPECT_EQ(s.arch, "olmoe");
  EXPECT_EQ(s.n_embd, 2048);
  EXPECT_EQ(s.n_layer, 16);
  EXPECT_EQ(s.n_expert, 64);
  EXPECT_EQ(s.n_expert_used, 8);
  EXPECT_EQ(s.n_ff, 1024);
  EXPECT_EQ(s.n_vocab, 50304);
  const auto ts = synth_tensors(o);
  EXPECT_EQ(ts.size(), 3 + 16 * 12u);
  EXPECT_EQ(shape_of(ts, "blk.15.ffn_gate_exps.weight"), (std::vector<int64_t>{2048, 1024, 64}));
  EXPECT_EQ(shape_of(ts, "blk.15.ffn_down_exps.weight"), (std::vector<int64_t>{1024, 2048, 64}));
  EXPECT_EQ(shape_of(ts, "blk.0.attn_k_norm.weight"), (std::vector<int64_t>{2048}));
  EXPECT_EQ(shape_of(ts, "token_embd.weight"), (std::vector<int64_t>{2048, 50304}));

  // The real widths with fewer layers, experts and tokens, written and read back.
  o.shape.n_layer = 1;
  o.shape.n_expert = 8;
  o.shape.n_vocab = 1000;
  test::TempFile f;
  write(f.path(), o);
  auto file = GgufFile::open(f.path());
  expect_file_matches(*file, o);
  auto m = Model::load(f.path());
  expect_runs(*m, spread_tokens(8, 1000));
}

TEST(SynthPresets, QwenMoeShape) {
  SynthOptions o;
  o.shape = synth_preset("qwen-moe-a2.7b").shape;
  o.type = DType::Q8_0;
  const SynthShape& s = o.shape;
  EXPECT_EQ(s.arch, "qwen2moe");
  EXPECT_EQ(s.n_embd, 2048);
  EXPECT_EQ(s.n_layer, 24);
  EXPECT_EQ(s.n_head, 16);
  EXPECT_EQ(s.n_expert, 60);
  EXPECT_EQ(s.n_expert_used, 4);
  EXPECT_EQ(s.n_ff, 1408);
  EXPECT_EQ(s.n_ff_shexp, 5632);
  EXPECT_EQ(s.n_vocab, 151936);
  const auto ts = synth_tensors(o);
  EXPECT_EQ(shape_of(ts, "blk.23.ffn_up_exps.weight"), (std::vector<int64_t>{2048, 1408, 60}));
  EXPECT_EQ(shape_of(ts, "blk.23.ffn_gate_inp.weight"), (std::vector<int64_t>{2048, 60}));
  EXPECT_EQ(shape_of(ts, "blk.23.ffn_gate_inp_shexp.weight"), (std::vector<int64_t>{2048}));
  EXPECT_EQ(shape_of(ts, "blk.23.ffn_gate_shexp.weight"), (std::vector<int64_t>{2048, 5632}));
  EXPECT_EQ(shape_of(ts, "blk.23.ffn_down_shexp.weight"), (std::vector<int64_t>{5632, 2048}));
  EXPECT_EQ(shape_of(ts, "blk.0.attn_v.bias"), (std::vector<int64_t>{2048}));

  o.shape.n_layer = 1;
  o.shape.n_expert = 4;
  o.shape.n_vocab = 600;
  test::TempFile f;
  write(f.path(), o);
  auto file = GgufFile::open(f.path());
  expect_file_matches(*file, o);
  auto m = Model::load(f.path());
  EXPECT_EQ(m->hparams().n_ff_shexp, 5632);
  expect_runs(*m, spread_tokens(8, 600));
}

TEST(SynthPresets, TinyOfEveryFamilyMatchesItsFile) {
  for (const char* arch : {"llama", "olmoe", "qwen2moe", "qwen3moe"}) {
    SCOPED_TRACE(arch);
    const SynthOptions o = tiny(arch, DType::Q4_0);
    test::TempFile f;
    write(f.path(), o);
    expect_file_matches(*GgufFile::open(f.path()), o);
  }
}

TEST(SynthPresets, UnknownPresetListsTheOthers) {
  try {
    synth_preset("gpt-5");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("olmoe-1b-7b"), std::string::npos) << e.what();
  }
}

// Expert loads (tokens routed to each expert) in the last MoE layer for `tokens`.
std::vector<int> expert_loads(const Model& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  Session s(m, pool, static_cast<int64_t>(tokens.size()));
  // Every row wants logits, so the last layer routes every token (it skips the others).
  s.eval(tokens, /*all_logits=*/true, static_cast<int64_t>(tokens.size()));
  const Routing& r = s.forward().moe_layer().last_routing();
  EXPECT_EQ(r.n_tokens, static_cast<int64_t>(tokens.size()));
  std::vector<int> load(m.hparams().n_expert, 0);
  for (int32_t e : r.expert) load[e]++;
  return load;
}

// Skew s makes expert popularity fall off with the expert's hot rank (roughly 1/rank^s):
// the share of tokens that the hottest quarter of the experts receives grows with s.
TEST(SynthRouting, SkewMakesTheHotExpertsWin) {
  for (int layers : {1, 4, 16}) {
    SCOPED_TRACE("layers " + std::to_string(layers));
    SynthOptions o = tiny("olmoe", DType::F32);
    o.shape.n_layer = layers;
    o.shape.n_embd = 128;
    o.shape.n_expert = 16;
    o.shape.n_expert_used = 2;
    o.shape.n_vocab = 2048;
    const std::vector<int32_t> tokens = spread_tokens(256, o.shape.n_vocab);
    const double total = double(tokens.size()) * o.shape.n_expert_used;
    double previous = 0;
    for (double skew : {0.0, 0.5, 1.0}) {
      SCOPED_TRACE("skew " + std::to_string(skew));
      o.router_skew = skew;
      test::TempFile f;
      write(f.path(), o);
      const std::vector<int> load = expert_loads(*Model::load(f.path()), tokens);
      const std::vector<int> order = synth_hot_order(o, layers - 1);
      double top = 0;
      for (int r = 0; r < o.shape.n_expert / 4; ++r) top += load[order[r]];
      const double share = top / total;
      std::printf("layers %d skew %.1f: hottest quarter of the experts takes %.0f%% of the tokens\n", layers, skew,
                  100 * share);
      if (skew == 0) {
        EXPECT_LT(share, 0.40);  // uniform: 25% plus noise
      } else {
        EXPECT_GT(share, previous + 0.05);
      }
      if (skew == 1.0) {
        EXPECT_GT(share, 0.45);  // a 1/rank law over 16 experts gives the top quarter 62%
      }
      previous = share;
    }
  }
}

TEST(SynthFile, SameSeedSameBytesWhateverTheThreads) {
  SynthOptions o = tiny("qwen2moe", DType::Q4_0);
  o.router_skew = 0.5;
  test::TempFile a, b, c;
  write(a.path(), o, 1);
  write(b.path(), o, 3);
  o.seed = 8;
  write(c.path(), o, 2);
  const auto bytes_a = test::read_bytes(a.path());
  EXPECT_EQ(bytes_a, test::read_bytes(b.path()));
  EXPECT_NE(bytes_a, test::read_bytes(c.path()));
}

TEST(SynthFile, ShapeErrorsNameTheFlag) {
  auto message = [](SynthOptions o) {
    try {
      validate_synth(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SynthOptions o = tiny("olmoe", DType::Q4_0);
  o.shape.n_embd = 80;  // multiple of the 4 heads, but not of 32
  EXPECT_NE(message(o).find("--embd"), std::string::npos) << message(o);
  o = tiny("olmoe");
  o.shape.n_expert_used = 9;
  EXPECT_NE(message(o).find("--experts-used"), std::string::npos) << message(o);
  o = tiny("olmoe");
  o.shape.n_head_kv = 2;
  EXPECT_NE(message(o).find("--heads-kv"), std::string::npos) << message(o);
  o = tiny("qwen2moe");
  o.shape.n_ff_shexp = 0;
  EXPECT_NE(message(o).find("--ff-shared"), std::string::npos) << message(o);
  o = tiny("mamba");
  EXPECT_NE(message(o).find("--arch"), std::string::npos) << message(o);
  o = tiny("olmoe");
  o.shape.n_vocab = 100;
  EXPECT_NE(message(o).find("--vocab"), std::string::npos) << message(o);
  o = tiny("olmoe");
  o.router_skew = -1;
  EXPECT_NE(message(o).find("--router-skew"), std::string::npos) << message(o);
}

TEST(SynthVocab, SynthesizedBpeRoundTrips) {
  SynthOptions o = tiny("olmoe");
  o.shape.n_vocab = 5000;
  test::TempFile f;
  write(f.path(), o);
  auto m = Model::load(f.path());
  const Tokenizer& tok = m->tokenizer();
  EXPECT_EQ(tok.model_name(), "gpt2");
  EXPECT_EQ(tok.n_vocab(), 5000);
  EXPECT_EQ(tok.eos_id(), 4999);
  EXPECT_EQ(tok.token_text(4999), "<|endoftext|>");
  const std::string text = "Hello world!\n  Tabs\tand ünïcödé, digits 12345 and <|endoftext|>";
  const auto ids = tok.encode(text, false, false);
  EXPECT_LT(ids.size(), text.size());  // merges apply
  EXPECT_EQ(tok.decode(ids), text);
  const auto special = tok.encode("a<|endoftext|>", false, true);
  EXPECT_EQ(special.back(), 4999);
}

TEST(SynthVocab, CopiesPadsAndTruncatesAVocabularyFile) {
  const std::string neox = test::shared_path("fixtures/tokenizers/ggml-vocab-gpt-neox.gguf");
  auto ref_file = GgufFile::open(neox);
  auto ref = Tokenizer::from_gguf(*ref_file);
  const int64_t n_file = ref->n_vocab();
  const std::string text = "Hello world, this is a test of the vocabulary.\n";
  for (int64_t n : {n_file + 27, n_file, int64_t{1000}}) {
    SCOPED_TRACE("n_vocab " + std::to_string(n));
    SynthOptions o = tiny("olmoe");
    o.shape.n_vocab = n;
    o.vocab_file = neox;
    test::TempFile f;
    write(f.path(), o);
    auto m = Model::load(f.path());
    const Tokenizer& tok = m->tokenizer();
    EXPECT_EQ(m->hparams().n_vocab, n);
    EXPECT_EQ(tok.n_vocab(), n);
    EXPECT_EQ(m->file().get_string("tokenizer.ggml.model"), ref_file->get_string("tokenizer.ggml.model"));
    EXPECT_EQ(tok.pre_name(), ref->pre_name());
    const auto ids = tok.encode(text, false, false);
    EXPECT_EQ(tok.decode(ids), text);
    if (n >= n_file) {
      EXPECT_EQ(ids, ref->encode(text, false, false));
      EXPECT_EQ(tok.eos_id(), ref->eos_id());
    } else {
      EXPECT_EQ(m->file().get_string_array("tokenizer.ggml.merges").size() > 0, true);
      EXPECT_LT(m->file().get_string_array("tokenizer.ggml.merges").size(),
                ref_file->get_string_array("tokenizer.ggml.merges").size());
    }
    if (n > n_file) {
      EXPECT_EQ(tok.token_text(static_cast<int32_t>(n_file)), "<|pad_0|>");
      EXPECT_EQ(tok.encode("<|pad_3|>", false, true),
                (std::vector<int32_t>{static_cast<int32_t>(n_file + 3)}));
    }
    expect_runs(*m, ids);
  }
}

TEST(SynthWriter, StreamedTensorsEqualInMemoryOnes) {
  std::vector<uint8_t> x(64 * 37 * 4), y(34 * 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<uint8_t>(i * 3 + 2);
  GgufWriter a, b;
  for (GgufWriter* w : {&a, &b}) {
    w->set_alignment(64);
    w->add_string("general.name", "stream");
  }
  a.add_tensor("x", DType::F32, {64, 37}, x);
  a.add_tensor("y", DType::Q8_0, {32, 5}, y);
  a.add_tensor("z", DType::F32, {64, 37}, x);
  int calls = 0;
  auto rows = [&](int64_t first, int64_t last, uint8_t* dst) {
    ++calls;
    std::copy(x.begin() + first * 256, x.begin() + last * 256, dst);
  };
  b.add_tensor_rows("x", DType::F32, {64, 37}, rows);
  b.add_tensor("y", DType::Q8_0, {32, 5}, y);
  b.add_tensor_rows("z", DType::F32, {64, 37}, rows);
  test::TempFile fa, fb;
  a.write(fa.path());
  std::vector<uint64_t> done;
  uint64_t total = 0;
  b.write(
      fb.path(), [&](uint64_t d, uint64_t t) { done.push_back(d), total = t; }, 1000);  // 3 rows per block
  EXPECT_EQ(calls, 2 * 13);
  EXPECT_EQ(test::read_bytes(fa.path()), test::read_bytes(fb.path()));
  EXPECT_EQ(total, b.file_size());
  EXPECT_EQ(total, test::read_bytes(fb.path()).size());
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done.back(), total);
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
}

using test::CliRun;
using test::run_cli;

TEST(SynthCli, WritesWhatTheFlagsSay) {
  test::TempFile f;
  const CliRun r = run_cli(
      "synth --preset tiny --arch qwen2moe --type q8_0 --layers 3 --experts 4 --experts-used 1 --embd 96 "
      "--heads 3 --heads-kv 1 --ff 32 --ff-shared 64 --vocab 300 --ctx 64 --seed 3 --router-skew 0.5 "
      "--no-progress -t 2 -o " +
      f.path());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote"), std::string::npos) << r.out;
  auto m = Model::load(f.path());
  const HParams& h = m->hparams();
  EXPECT_EQ(h.arch_name, "qwen2moe");
  EXPECT_EQ(h.n_layer, 3);
  EXPECT_EQ(h.n_expert, 4);
  EXPECT_EQ(h.n_expert_used, 1);
  EXPECT_EQ(h.n_embd, 96);
  EXPECT_EQ(h.n_head, 3);
  EXPECT_EQ(h.n_head_kv, 1);
  EXPECT_EQ(h.n_ff_exp, 32);
  EXPECT_EQ(h.n_ff_shexp, 64);
  EXPECT_EQ(h.n_vocab, 300);
  EXPECT_EQ(h.n_ctx_train, 64);
  EXPECT_EQ(m->file().find_tensor("blk.2.ffn_up_exps.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(m->file().get_string("general.name"), "tiny");
  const CliRun info = run_cli("info -m " + f.path());
  EXPECT_EQ(info.code, 0) << info.out;
}

TEST(SynthCli, HelpAndErrorsNameTheFlag) {
  CliRun r = run_cli("synth --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Example: switchyard synth"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen-moe-a2.7b"), std::string::npos) << r.out;
  test::TempFile f;
  const std::string o = " --no-progress -o " + f.path();
  const std::pair<std::string, std::string> cases[] = {
      {"synth --preset tiny --type q5_k" + o, "--type"},
      {"synth --preset tiny --type q4_0 --embd 80" + o, "--embd"},
      {"synth --preset tiny --experts 4 --experts-used 5" + o, "--experts-used"},
      {"synth --preset tiny --vocab /nonexistent/vocab.gguf" + o, "--vocab"},
      {"synth --preset tiny --vocab 12 --vocab-size 20" + o, "--vocab"},
      {"synth --preset tiny --router-skew -2" + o, "--router-skew"},
      // Settings the shape has no place for: refused rather than written nowhere.
      {"synth --preset tiny --ff-shared 128" + o, "--ff-shared: olmoe has no shared expert"},
      {"synth --preset tiny --arch llama --experts 0 --router-skew 1" + o, "--router-skew: the model is dense"},
      {"synth --preset no-such-model" + o, "--preset"},
      {"synth --preset tiny", "--output"},
  };
  for (const auto& [args, flag] : cases) {
    r = run_cli(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.out.find(flag), std::string::npos) << args << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(f.path()));
  // The help's second example: Qwen2-MoE from a preset without a shared expert gets one
  // twice an expert's width.
  r = run_cli("synth --preset tiny --arch qwen2moe --experts 16 --type q8_0" + o);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Model::load(f.path())->hparams().n_ff_shexp, 2 * synth_preset("tiny").shape.n_ff);
}

// `switchyard pack` end to end: the copy is reported, `info` shows its packed types and
// `generate` gives the source's greedy text; bad uses name the problem.
TEST(PackCli, PacksAndTheCopyRuns) {
  test::TempFile src, dst;
  CliRun r = run_cli("synth --preset tiny --arch olmoe --embd 512 --heads 4 --heads-kv 4 --ff 768 --type q4_0 --no-progress -o " + src.path());
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_cli("pack --no-progress -m " + src.path() + " -o " + dst.path());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tensors packed"), std::string::npos) << r.out;
  r = run_cli("info -m " + dst.path());
  EXPECT_NE(r.out.find("Q4_0 (packed)"), std::string::npos) << r.out;
  const std::string gen = " -p 'the quick brown fox' -n 8 --temp 0 -t 2";
  const CliRun a = run_cli("generate -m " + src.path() + gen);
  const CliRun b = run_cli("generate -m " + dst.path() + gen);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  // The text (the timing line after it differs).
  EXPECT_EQ(a.out.substr(0, a.out.find("\nprompt:")), b.out.substr(0, b.out.find("\nprompt:")));
  EXPECT_NE(a.out.find("\nprompt:"), std::string::npos) << a.out;

  r = run_cli("pack --no-progress -m " + dst.path() + " -o " + src.path() + ".2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("packed already"), std::string::npos) << r.out;
  r = run_cli("pack --no-progress -m /nonexistent.gguf -o " + src.path() + ".2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/nonexistent.gguf"), std::string::npos) << r.out;
  r = run_cli("pack -m " + src.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--output"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(src.path() + ".2"));
}

}  // namespace
}  // namespace sy
