// Pieces of the server that need no socket: stop strings over streamed text, chat
// templates, request parsing.
#include <gtest/gtest.h>

#include "model/model.h"
#include "server/chat_template.h"
#include "server/openai.h"
#include "server/text_stream.h"
#include "server_fixture.h"
#include "support/shared_data.h"

namespace sy {
namespace {

using json = nlohmann::json;

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(ServerText, StopStringsAcrossPiecesAreHeldBackThenCut) {
  StopMatcher m({"\n\nUser:", "END"});
  EXPECT_EQ(m.push("Hello"), "Hello");
  EXPECT_EQ(m.push(" world\n"), " world");  // "\n" may start a stop string
  EXPECT_EQ(m.push("\nUs"), "");
  EXPECT_EQ(m.push("er: hi"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");

  StopMatcher n({"END"});
  EXPECT_EQ(feed(n, {"the E", "N", "ding"}), "the ENding");  // a near miss is released
  EXPECT_FALSE(n.stopped());
  StopMatcher e({"END"});
  EXPECT_EQ(feed(e, {"abcE", "NDxyz"}), "abc");
  StopMatcher none;
  EXPECT_EQ(feed(none, {"a", "b"}), "ab");
  StopMatcher first({"bc", "ab"});
  EXPECT_EQ(feed(first, {"xabc"}), "x");  // the earliest match wins
}

// The models' own templates are checked against jinja2 in chat_template_reference_test.cpp;
// here, the formats a user names with --chat-template, which render each family's usual form.
TEST(ServerText, ChatTemplatesNamedByTheUserRenderTheirFamily) {
  const std::vector<ChatMessage> msgs = {
      {"system", "Be nice."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  auto render = [&](const std::string& name) { return ChatTemplate::named(name, "<s>", "</s>").render(msgs); };
  EXPECT_EQ(render("chatml"),
            "<|im_start|>system\nBe "
            "nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("mistral"), "<s>[INST] Be nice.\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]");
  EXPECT_EQ(render("llama2"),
            "<s>[INST] <<SYS>>\nBe nice.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(render("llama3"),
            "<s><|start_header_id|>system<|end_header_id|>\n\nBe "
            "nice.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_"
            "header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // OLMoE-Instruct (Tulu 3) and Zephyr differ in how a user turn ends.
  EXPECT_EQ(render("olmoe"),
            "<s><|system|>\nBe nice.\n<|user|>\nHi\n<|assistant|>\nHello!</s>\n<|user|>\nBye\n<|assistant|>\n");
  EXPECT_EQ(render("zephyr"),
            "<|system|>\nBe "
            "nice.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nBye</s>\n<|assistant|>\n");
  EXPECT_EQ(render("gemma"),
            "<s><start_of_turn>user\nBe nice.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render("deepseek"), "<s>Be nice.\n\nUser: Hi\n\nAssistant: Hello!</s>User: Bye\n\nAssistant:");
  // No template: ChatML, as llama.cpp does. An unknown one is reported, not guessed.
  EXPECT_EQ(ChatTemplate::detect("", "<s>", "</s>").name(), "chatml");
  const ChatTemplate odd = ChatTemplate::detect(
      "{% for m in messages %}### {{ m.role }}: {{ m.content }}{% endfor %}", "<s>", "</s>");
  EXPECT_FALSE(odd.supported());
  EXPECT_THROW(odd.render(msgs), Error);
  EXPECT_EQ(ChatTemplate::named("llama3", "", "").name(), "llama3");
  EXPECT_THROW(ChatTemplate::named("jinja", "", ""), Error);
}

TEST(ServerText, ChatRequestWithUnsupportedTemplateSaysSo) {
  const Model& m = test::tiny_model();
  const ChatTemplate odd = ChatTemplate::detect("### weird", "<s>", "</s>");
  ApiContext ctx{&m.tokenizer(), &odd, "tiny", 128, 64, 1};
  const json body = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  try {
    parse_completion_request(body, Endpoint::Chat, ctx);
    FAIL() << "expected an error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "chat_template_unsupported");
    EXPECT_EQ(e.status, 400) << "not a 5xx, which clients retry";
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_NE(std::string(e.what()).find("--chat-template one of"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--chat-template-file"), std::string::npos);
  }
}

TEST(ServerText, RequestDefaultsFollowTheOpenAIReference) {
  const Model& m = test::tiny_model();
  const ChatTemplate chatml = ChatTemplate::detect("", "<s>", "</s>");
  ApiContext ctx{&m.tokenizer(), &chatml, "tiny", 128, 64, 77};
  CompletionJob job =
      parse_completion_request({{"model", "tiny"}, {"prompt", "Hello world"}}, Endpoint::Completions, ctx);
  ASSERT_EQ(job.prompts.size(), 1u);
  EXPECT_EQ(job.prompts[0], (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(job.max_tokens[0], 16);  // completions: 16
  EXPECT_EQ(job.gen.sampling.temperature, 1.0f);
  EXPECT_EQ(job.gen.sampling.top_p, 1.0f);
  EXPECT_EQ(job.gen.sampling.top_k, 0);
  EXPECT_EQ(job.gen.sampling.seed, 77u);
  // A seed is used as given; null and -1 (llama.cpp's "random") draw the per-request one.
  const auto seed_of = [&](const nlohmann::json& seed) {
    return parse_completion_request({{"model", "tiny"}, {"prompt", "x"}, {"seed", seed}}, Endpoint::Completions, ctx)
        .gen.sampling.seed;
  };
  EXPECT_EQ(seed_of(5), 5u);
  EXPECT_EQ(seed_of(-2), static_cast<uint64_t>(int64_t{-2}));
  EXPECT_EQ(seed_of(-1), 77u);
  EXPECT_EQ(seed_of(nullptr), 77u);
  // Batches of prompts, token prompts used as given.
  job = parse_completion_request({{"model", "tiny"}, {"prompt", {{1, 2, 3}, {4, 5}}}, {"n", 2}},
                                 Endpoint::Completions, ctx);
  EXPECT_EQ(job.prompts.size(), 2u);
  EXPECT_EQ(job.prompts[1], (std::vector<int32_t>{4, 5}));
  // Chat: until the context is full by default; the template's turn end is a stop string.
  job = parse_completion_request(
      {{"model", "tiny"}, {"messages", {{{"role", "developer"}, {"content", "x"}}}}}, Endpoint::Chat, ctx);
  EXPECT_EQ(job.max_tokens[0], 128 - static_cast<int64_t>(job.prompts[0].size()));
  EXPECT_NE(std::find(job.stop.begin(), job.stop.end(), "<|im_end|>"), job.stop.end());
  EXPECT_EQ(job.prompts[0][0], 1) << "BOS once";
  EXPECT_NE(job.prompts[0][1], 1);
}

// An empty prompt starts a new document (OpenAI: "as if from the beginning of a new
// document"): a vocabulary that adds no BOS (Qwen2's byte-level BPE) still gets a token to
// start from, its BOS, rather than a 400 for a prompt with no tokens.
TEST(ServerText, EmptyPromptStartsFromTheBeginningOfADocument) {
  const auto m = Model::load(test::shared_path("fixtures/qwen2moe/model.gguf"));
  const Tokenizer& tok = m->tokenizer();
  ASSERT_FALSE(tok.add_bos_default());
  const ChatTemplate chatml = ChatTemplate::detect("", "", "");
  ApiContext ctx{&tok, &chatml, "q", 128, 64, 77};
  const CompletionJob job =
      parse_completion_request({{"model", "q"}, {"prompt", ""}}, Endpoint::Completions, ctx);
  const int32_t start = tok.bos_id() >= 0 ? tok.bos_id() : tok.eos_id();
  ASSERT_GE(start, 0);
  EXPECT_EQ(job.prompts[0], std::vector<int32_t>{start});
  // Where BOS is added anyway, an empty prompt is that BOS alone, as before.
  const Model& tiny = test::tiny_model();
  ApiContext tctx{&tiny.tokenizer(), &chatml, "tiny", 128, 64, 77};
  EXPECT_EQ(parse_completion_request({{"model", "tiny"}, {"prompt", ""}}, Endpoint::Completions, tctx).prompts[0],
            std::vector<int32_t>{tiny.tokenizer().bos_id()});
}

// Text content parts are joined by a newline, as llama.cpp and vLLM join them for a template
// that takes a string; a single part is its text alone.
TEST(ServerText, ChatContentPartsJoinWithANewline) {
  const Model& m = test::tiny_model();
  const ChatTemplate chatml = ChatTemplate::detect("", "<s>", "</s>");
  ApiContext ctx{&m.tokenizer(), &chatml, "tiny", 128, 64, 77};
  const auto prompt_of = [&](const nlohmann::json& content) {
    return parse_completion_request({{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", content}}}}},
                                    Endpoint::Chat, ctx)
        .prompts[0];
  };
  const nlohmann::json parts = {{{"type", "text"}, {"text", "Hello"}}, {{"type", "text"}, {"text", "world"}}};
  EXPECT_EQ(prompt_of(parts), prompt_of("Hello\nworld"));
  EXPECT_EQ(prompt_of({{{"type", "text"}, {"text", "Hello"}}}), prompt_of("Hello"));
}

}  // namespace
}  // namespace sy
