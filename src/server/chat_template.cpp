#include "server/chat_template.h"

#include <utility>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace sy {
namespace {

struct Named {
  const char* name;
  ChatFormat format;
};
constexpr Named kNames[] = {
    {"chatml", ChatFormat::ChatML},       {"llama2", ChatFormat::Llama2},
    {"mistral", ChatFormat::Mistral},     {"llama3", ChatFormat::Llama3},
    {"zephyr", ChatFormat::Zephyr},       {"tulu", ChatFormat::Tulu},
    {"olmoe", ChatFormat::Tulu},          {"gemma", ChatFormat::Gemma},
    {"phi3", ChatFormat::Phi3},           {"deepseek", ChatFormat::DeepSeek},
    {"deepseek3", ChatFormat::DeepSeek3}, {"command-r", ChatFormat::CommandR},
};

// Python's str.isspace, which Jinja's trim and .strip() follow: Unicode White_Space and the
// separators U+001C..U+001F (no-break and ideographic spaces included).
bool py_space(uint32_t c) {
  return unicode::is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

// The byte length of the UTF-8 character at s[i] (1 for a byte that starts none).
size_t char_len(const std::string& s, size_t i) {
  const size_t n = unicode::utf8_len(s[i]);
  return i + n <= s.size() ? n : 1;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    const size_t n = char_len(s, b);
    const auto c = unicode::decode_utf8(std::string_view(s).substr(b, n));
    if (c.size() != 1 || !py_space(c[0])) break;
    b += n;
  }
  while (e > b) {
    size_t start = e - 1;  // back to the lead byte of the last character
    while (start > b && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80 && e - start < 4) --start;
    const auto c = unicode::decode_utf8(std::string_view(s).substr(start, e - start));
    if (c.size() != 1 || !py_space(c[0])) break;
    e = start;
  }
  return s.substr(b, e - b);
}

std::string strip_newlines(const std::string& s, bool front, bool back) {
  size_t b = 0, e = s.size();
  while (front && b < e && s[b] == '\n') ++b;
  while (back && e > b && s[e - 1] == '\n') --e;
  return s.substr(b, e - b);
}

// A reply as Qwen3's template writes it: a <think>...</think> block in the content is cut
// off, and shown again only for a reply after the conversation's last question: the last
// message (its block empty when there was none), or any with reasoning.
std::string qwen3_reply(const std::string& content, bool after_last_question, bool last) {
  std::string answer = content, reasoning;
  if (const size_t close = content.find("</think>"); close != std::string::npos) {
    reasoning = strip_newlines(content.substr(0, close), false, true);
    if (const size_t open = reasoning.rfind("<think>"); open != std::string::npos) reasoning.erase(0, open + 7);
    reasoning = strip_newlines(reasoning, true, false);
    answer = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  if (!after_last_question || (!last && reasoning.empty())) return answer;
  return "<think>\n" + strip_newlines(reasoning, true, true) + "\n</think>\n\n" + strip_newlines(answer, true, false);
}

// System messages folded into the next user turn, for formats without a system role (their
// templates refuse one). An empty one still brings its separator, as Mistral's template
// writes it. A system message with no user message after it has nowhere to go: refused,
// rather than moved in front of the conversation. `keep_later`: a system message after the
// first user message, at an odd position, stays in place (Gemma's template renders those as
// turns of their own; at an even position it refuses the conversation, and this folds).
std::vector<ChatMessage> fold_system(const std::vector<ChatMessage>& in, const std::string& sep,
                                     const char* format, bool keep_later = false) {
  std::vector<ChatMessage> out;
  std::string system;
  bool pending = false, seen_user = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const ChatMessage& m = in[i];
    if (m.role == "system" && !(keep_later && seen_user && i % 2 == 1)) {
      system += (pending ? "\n\n" : "") + m.content;
      pending = true;
      continue;
    }
    out.push_back(m);
    if (pending && m.role == "user") {
      out.back().content = system + sep + m.content;
      system.clear();
      pending = false;
    }
    seen_user = seen_user || m.role == "user";
  }
  if (pending) {
    throw Error(std::string("a system message must be followed by a user message in the ") + format +
                " chat format, which has no system turn: its text goes into the next user message");
  }
  return out;
}

// Llama-2's and Command-R's templates take a system message only as the first message (a
// later one is an error, or silently left out): refused, so no instruction is lost unseen.
void require_leading_system_only(const std::vector<ChatMessage>& in, const char* format) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].role == "system") {
      throw Error(std::string("the ") + format + " chat format takes a system message only as the first message (message " +
                  std::to_string(i) + " is one)");
    }
  }
}

}  // namespace

ChatTemplate ChatTemplate::detect(const std::string& jinja, const std::string& bos, const std::string& eos,
                                  const std::string& origin) {
  ChatTemplate t;
  t.bos_ = bos;
  t.eos_ = eos;
  if (jinja.empty()) {
    t.format_ = ChatFormat::ChatML;
    t.origin_ = "default (the model has no tokenizer.chat_template)";
  } else {
    t.format_ = detect_chat_format(jinja);
    t.style_ = read_chat_style(t.format_, jinja);
    t.origin_ = origin;
  }
  return t;
}

ChatTemplate ChatTemplate::named(const std::string& name, const std::string& bos, const std::string& eos) {
  for (const auto& n : kNames) {
    if (name == n.name) {
      ChatTemplate t;
      t.format_ = n.format;
      t.bos_ = bos;
      t.eos_ = eos;
      t.origin_ = "--chat-template";
      return t;
    }
  }
  throw Error("--chat-template: unknown format '" + name + "'; supported: " + supported_names());
}

std::string ChatTemplate::supported_names() {
  std::string s;
  for (const auto& n : kNames) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

std::string ChatTemplate::name() const {
  for (const auto& n : kNames) {
    if (n.format == format_) return n.name;
  }
  return "unsupported";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& input, bool gen) const {
  for (const auto& m : input) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw Error("unsupported message role '" + m.role + "' (expected system, user or assistant)");
    }
  }
  std::string out;
  switch (format_) {
    case ChatFormat::Unsupported:
      throw Error("the model's chat template is not supported");
    case ChatFormat::ChatML: {
      if (!style_.default_system.empty() && (input.empty() || input[0].role != "system")) {
        out += "<|im_start|>system\n" + style_.default_system + "<|im_end|>\n";
      }
      const bool open_last = style_.close_last_only_for_prompt && !gen;
      size_t last_question = input.size() - 1;  // as Qwen3's template: the last message when no user's
      for (size_t i = input.size(); i-- > 0;) {
        if (input[i].role == "user") {
          last_question = i;
          break;
        }
      }
      for (size_t i = 0; i < input.size(); ++i) {
        std::string content = input[i].content;
        if (style_.think_blocks && input[i].role == "assistant")
          content = qwen3_reply(content, i > last_question, i + 1 == input.size());
        out += "<|im_start|>" + input[i].role + "\n" + content;
        if (i + 1 < input.size() || !open_last) out += "<|im_end|>\n";
      }
      const bool after_reply = !input.empty() && input.back().role == "assistant";
      if (gen && !(style_.close_last_only_for_prompt && after_reply)) out += "<|im_start|>assistant\n";
      break;
    }
    case ChatFormat::Llama2: {
      require_leading_system_only(input, "llama2");
      std::string system;
      bool first = true, has_system = false;  // an empty system prompt is still wrapped
      for (const auto& m : input) {
        if (m.role == "system") {
          system = m.content;
          has_system = true;
          continue;
        }
        std::string content = m.content;
        if (first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        first = false;
        if (m.role == "user")
          out += bos_ + "[INST] " + trim(content) + " [/INST]";
        else
          out += " " + trim(content) + " " + eos_;
      }
      break;
    }
    case ChatFormat::Mistral: {
      out += bos_;
      const std::string space = style_.spaced_inst ? " " : "";
      for (const auto& m : fold_system(input, "\n\n", "mistral")) {
        if (m.role == "user")
          out += space + "[INST] " + m.content + " [/INST]";
        else
          out += space + m.content + eos_;
      }
      break;
    }
    case ChatFormat::Llama3: {
      out += bos_;
      size_t first = 0;
      if (style_.knowledge_turn) {  // the system turn is always there, the preamble first
        const bool system = !input.empty() && input[0].role == "system";
        out += "<|start_header_id|>system<|end_header_id|>\n\n" + knowledge_preamble(style_) +
               (system ? trim(input[0].content) : "") + "<|eot_id|>";
        first = system ? 1 : 0;
      }
      for (size_t i = first; i < input.size(); ++i)
        out += "<|start_header_id|>" + input[i].role + "<|end_header_id|>\n\n" + trim(input[i].content) + "<|eot_id|>";
      if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case ChatFormat::Zephyr:
      for (const auto& m : input) out += "<|" + m.role + "|>\n" + m.content + eos_ + "\n";
      if (gen) out += "<|assistant|>\n";
      break;
    case ChatFormat::Tulu: {
      if (style_.lead != ChatStyle::Lead::Nothing) out += style_.lead == ChatStyle::Lead::Bos ? bos_ : eos_;
      // A template without a system role leaves system messages out; they go into the next
      // user turn instead, as llama.cpp writes them, so that no instruction is lost (an
      // empty one has nothing to keep).
      std::vector<ChatMessage> turns = input;
      if (!style_.system_role) {
        std::erase_if(turns, [](const ChatMessage& m) { return m.role == "system" && m.content.empty(); });
        turns = fold_system(turns, "\n", "tulu");
      }
      for (size_t i = 0; i < turns.size(); ++i) {
        const auto& m = turns[i];
        if (m.role == "assistant") {
          const bool last = i + 1 == turns.size();
          out += "<|assistant|>\n" + m.content + eos_ + (!last || style_.newline_after_last_reply ? "\n" : "");
        } else {
          out += "<|" + m.role + "|>\n" + m.content + "\n";
        }
      }
      if (gen) out += "<|assistant|>\n";
      break;
    }
    case ChatFormat::Gemma:
      out += bos_;
      for (const auto& m : fold_system(input, "\n\n", "gemma", true)) {
        out += "<start_of_turn>" + (m.role == "assistant" ? std::string("model") : m.role) + "\n" + trim(m.content) +
               "<end_of_turn>\n";
      }
      if (gen) out += "<start_of_turn>model\n";
      break;
    case ChatFormat::Phi3:
      for (const auto& m : input) {
        if (style_.drop_empty_system && m.role == "system" && m.content.empty()) continue;
        out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      }
      out += gen ? "<|assistant|>\n" : eos_;
      break;
    case ChatFormat::DeepSeek:
      out += bos_;
      for (const auto& m : input) {
        if (m.role == "system")
          out += m.content + "\n\n";
        else if (m.role == "user")
          out += "User: " + m.content + "\n\n";
        else
          out += "Assistant: " + m.content + eos_;
      }
      if (gen) out += "Assistant:";
      break;
    case ChatFormat::DeepSeek3: {
      // Every system message, wherever it is, joined at the front (the template collects them).
      std::string system;
      bool any_system = false;
      for (const auto& m : input) {
        if (m.role != "system") continue;
        system += (any_system ? "\n\n" : "") + m.content;
        any_system = true;
      }
      out += bos_ + system;
      for (const auto& m : input) {
        if (m.role == "system")
          continue;
        else if (m.role == "user")
          out += "<\xEF\xBD\x9CUser\xEF\xBD\x9C>" + m.content;
        else
          out +=
              "<\xEF\xBD\x9C"
              "Assistant\xEF\xBD\x9C>" +
              m.content + eos_;
      }
      if (gen)
        out +=
            "<\xEF\xBD\x9C"
            "Assistant\xEF\xBD\x9C>";
      break;
    }
    case ChatFormat::CommandR:
      require_leading_system_only(input, "command-r");
      out += bos_;
      for (const auto& m : input) {
        const char* tag = m.role == "system" ? "<|SYSTEM_TOKEN|>"
                          : m.role == "user" ? "<|USER_TOKEN|>"
                                             : "<|CHATBOT_TOKEN|>";
        const bool strip = style_.trim_content && m.role != "system";
        out += std::string("<|START_OF_TURN_TOKEN|>") + tag + (strip ? trim(m.content) : m.content) +
               "<|END_OF_TURN_TOKEN|>";
      }
      if (gen) out += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
      break;
  }
  return out;
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  switch (format_) {
    case ChatFormat::ChatML:
      return {"<|im_end|>", "<|im_start|>"};
    case ChatFormat::Llama3:
      return {"<|eot_id|>", "<|start_header_id|>"};
    case ChatFormat::Zephyr:
    case ChatFormat::Tulu:
      return {"<|user|>", "<|system|>"};
    case ChatFormat::Gemma:
      return {"<end_of_turn>", "<start_of_turn>"};
    case ChatFormat::Phi3:
      return {"<|end|>", "<|user|>"};
    case ChatFormat::Llama2:
    case ChatFormat::Mistral:
      return {"[INST]"};
    case ChatFormat::DeepSeek3:
      return {"<\xEF\xBD\x9CUser\xEF\xBD\x9C>"};
    case ChatFormat::CommandR:
      return {"<|END_OF_TURN_TOKEN|>"};
    default:
      return {};
  }
}

}  // namespace sy
