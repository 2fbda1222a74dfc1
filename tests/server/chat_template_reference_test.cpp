// Chat templates against renderings nobody here wrote: the models' published
// tokenizer.chat_template texts (tests/server/chat_templates/, sources in SOURCES.md there)
// rendered by jinja2 as Hugging Face transformers sets it up
// (tests/server/chat_template_reference.py). Wherever a template accepts a conversation,
// the C++ renderer, given the same template text and special tokens, must give the same
// prompt byte for byte. Where the template refuses one (a system message in a format
// without a system role), ours folds it in instead, as llama.cpp does, or refuses it too.
// Where the template silently leaves a message out, ours keeps it (a system message folded
// into the next user turn) or refuses the conversation: no instruction is lost unseen. Skipped when jinja2 is missing (scripts/install-deps installs it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "server/chat_template.h"
#include "support/run_cli.h"
#include "support/shared_data.h"
#include "support/temp_file.h"

namespace sy {
namespace {

using json = nlohmann::json;

const std::string kTemplateDir = std::string(SY_SOURCE_DIR) + "/tests/server/chat_templates";

std::vector<ChatMessage> messages_of(const json& array) {
  std::vector<ChatMessage> out;
  for (const auto& m : array)
    out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

TEST(ChatTemplateReference, ChatTemplatesMatchJinjaRenderingsOfPublishedTemplates) {
  if (std::system("python3 -c 'import jinja2' > /dev/null 2>&1") != 0) {
    GTEST_SKIP()
        << "the jinja2 Python package is not installed (scripts/install-deps installs it when pip is "
           "available)";
  }
  const test::TempFile cases_file(".json");
  const test::CliRun r =
      test::run_command("python3 " + std::string(SY_SOURCE_DIR) +
                        "/tests/server/chat_template_reference.py " + kTemplateDir + " " + cases_file.path());
  ASSERT_EQ(r.code, 0) << r.out;
  const json cases = json::parse(test::read_text_file(cases_file.path()));

  std::map<std::string, int> compared;
  std::set<std::string> kept_in;  // templates whose left-out messages ours keeps
  for (const auto& c : cases) {
    const std::string name = c.at("template");
    SCOPED_TRACE(name + " with " + c.at("messages").dump() +
                 (c.at("add_generation_prompt").get<bool>() ? "" : ", no generation prompt"));
    const ChatTemplate t =
        ChatTemplate::detect(test::read_text_file(kTemplateDir + "/" + name), c.at("bos").get<std::string>(),
                             c.at("eos").get<std::string>());
    ASSERT_TRUE(t.supported()) << "not recognised";
    const std::vector<ChatMessage> messages = messages_of(c.at("messages"));
    std::string ours, refusal;
    try {
      ours = t.render(messages, c.at("add_generation_prompt").get<bool>());
    } catch (const Error& e) {
      refusal = e.what();
    }
    if (c.contains("error")) {  // folded in, or refused with a reason
      EXPECT_TRUE(!ours.empty() || !refusal.empty()) << "jinja2 refused it (" << c.at("error").get<std::string>() << ")";
      continue;
    }
    const std::string text = c.at("text");
    bool dropped = false;
    for (const ChatMessage& m : messages) dropped = dropped || text.find(m.content) == std::string::npos;
    if (!refusal.empty()) {
      // Ours refuses only a conversation the template renders with a message left out
      // (a later system message in Llama-2's and Command-R's): never one it renders whole.
      EXPECT_TRUE(dropped) << "refused (" << refusal << ") though the template renders every message";
      continue;
    }
    if (dropped && ours != text) {
      // Where the template leaves a message out (Tulu 2's and OLMo's system messages), ours
      // keeps it, in the next user turn.
      for (const ChatMessage& m : messages) EXPECT_NE(ours.find(m.content), std::string::npos) << m.content;
      kept_in.insert(name);
      continue;
    }
    EXPECT_EQ(ours, c.at("text").get<std::string>()) << "format " << t.name();
    ++compared[name];
  }
  // Every template is compared on at least the lone question and the multi-turn conversation.
  for (const auto& c : cases) EXPECT_GE(compared[c.at("template").get<std::string>()], 2) << c.at("template");
  EXPECT_GE(compared.size(), 10u) << r.out;
  EXPECT_EQ(kept_in, (std::set<std::string>{"allenai--OLMo-7B-Instruct.jinja", "allenai--tulu-2-7b.jinja"}));
}

// What serve prints at startup says which variant of its family a template was read as.
TEST(ChatTemplateReference, TheStartupLogNamesEachTemplatesVariant) {
  auto variant = [](const std::string& file, const std::string& bos, const std::string& eos) {
    return describe_chat_style(
        ChatTemplate::detect(test::read_text_file(kTemplateDir + "/" + file), bos, eos).style());
  };
  EXPECT_EQ(variant("Qwen--Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"),
            "default system prompt \"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\"");
  EXPECT_EQ(variant("Qwen--Qwen3-0.6B.jinja", "", "<|im_end|>"), "<think> blocks in replies");
  EXPECT_EQ(variant("microsoft--Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
            "empty system messages dropped");
  EXPECT_EQ(variant("meta-llama--Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
            "knowledge-date system turn");
  // 3.2's date is today's, taken when a prompt is rendered (a server runs past midnight).
  EXPECT_EQ(variant("meta-llama--Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
            "knowledge-date system turn with today's date");
  EXPECT_EQ(variant("allenai--OLMo-7B-Instruct.jinja", "", "<|endoftext|>"),
            "eos first; no system turn: system messages go into the next user turn; newline after the last reply");
  EXPECT_EQ(variant("mistralai--Mistral-7B-Instruct-v0.2.jinja", "<s>", "</s>"), "spaces around [INST]");
  EXPECT_EQ(variant("mistralai--Mixtral-8x7B-Instruct-v0.1.jinja", "<s>", "</s>"), "");  // the usual form
}

}  // namespace
}  // namespace sy
