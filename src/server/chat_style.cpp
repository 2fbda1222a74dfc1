#include "server/chat_style.h"

#include <ctime>

namespace sy {
namespace {

bool has(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

// The characters of a Jinja string literal from `from` up to (not including) the first of
// `stops` or the literal's closing quote, escapes decoded; `ok` is false when the quote came
// first. Templates write a newline either as a real one or as the escape \n.
std::string literal_run(const std::string& t, size_t from, const std::string& stop, bool& ok) {
  std::string out;
  ok = false;
  for (size_t i = from; i < t.size(); ++i) {
    if (t.compare(i, stop.size(), stop) == 0) {
      ok = true;
      return out;
    }
    const char c = t[i];
    if (c == '\'' || c == '"') return out;
    if (c == '\\' && i + 1 < t.size()) {
      const char e = t[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    } else {
      out += c;
    }
  }
  return out;
}

// Qwen's ChatML templates open with a system turn of their own when the conversation has
// none: the literal '<|im_start|>system\n...<|im_end|>' (not one built from a message).
std::string chatml_default_system(const std::string& t) {
  const std::string open = "<|im_start|>system";
  for (size_t p = t.find(open); p != std::string::npos; p = t.find(open, p + 1)) {
    size_t q = p + open.size();
    if (t.compare(q, 2, "\\n") == 0)
      q += 2;
    else if (q < t.size() && t[q] == '\n')
      ++q;
    else
      continue;
    bool ok = false;
    std::string text = literal_run(t, q, "<|im_end|>", ok);
    if (ok && !text.empty()) return text;
  }
  return {};
}

// Llama 3.1 and later: "Cutting Knowledge Date: <month>\nToday Date: <date>\n\n" heads the
// system turn. The date is today's where the template asks strftime_now (3.2 on, as
// transformers provides it), else the template's own default date_string.
void read_knowledge_turn(const std::string& t, ChatStyle& s) {
  const std::string marker = "Cutting Knowledge Date: ";
  const size_t p = t.find(marker);
  if (p == std::string::npos) return;
  bool ok = false;
  std::string month = literal_run(t, p + marker.size(), "\\n", ok);
  while (!month.empty() && month.back() == '\n') month.pop_back();  // a real newline ends it too
  s.knowledge_turn = true;
  s.knowledge_month = month;
  if (has(t, "strftime_now")) {
    s.knowledge_date.clear();
  } else if (const size_t d = t.find("date_string = \""); d != std::string::npos) {
    s.knowledge_date = literal_run(t, d + 15, "\"", ok);
  } else {
    s.knowledge_date = "26 Jul 2024";
  }
}

}  // namespace

ChatFormat detect_chat_format(const std::string& t) {
  if (has(t, "<|im_start|>")) return ChatFormat::ChatML;
  if (has(t, "<|start_header_id|>")) return ChatFormat::Llama3;
  if (has(t, "[INST]")) return has(t, "<<SYS>>") ? ChatFormat::Llama2 : ChatFormat::Mistral;
  if (has(t, "<start_of_turn>")) return ChatFormat::Gemma;
  if (has(t, "<|START_OF_TURN_TOKEN|>")) return ChatFormat::CommandR;
  if (has(t, "<\xEF\xBD\x9CUser\xEF\xBD\x9C>")) return ChatFormat::DeepSeek3;
  if (const auto u = t.find("<|user|>"); u != std::string::npos) {
    if (has(t, "<|end|>")) return ChatFormat::Phi3;
    // Zephyr ends every turn with eos_token; Tulu (OLMoE) ends user turns with a newline.
    const std::string after = t.substr(u, 80);
    return (has(after, "eos_token") || has(after, "</s>")) ? ChatFormat::Zephyr : ChatFormat::Tulu;
  }
  if (has(t, "User: ") && has(t, "Assistant:")) return ChatFormat::DeepSeek;
  return ChatFormat::Unsupported;
}

std::string knowledge_preamble(const ChatStyle& s) {
  if (!s.knowledge_turn) return {};
  std::string date = s.knowledge_date;
  if (date.empty()) {
    char buf[32];
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::strftime(buf, sizeof buf, "%d %b %Y", &local);
    date = buf;
  }
  return "Cutting Knowledge Date: " + s.knowledge_month + "\nToday Date: " + date + "\n\n";
}

ChatStyle read_chat_style(ChatFormat format, const std::string& t) {
  ChatStyle s;
  switch (format) {
    case ChatFormat::ChatML:
      s.default_system = chatml_default_system(t);
      s.close_last_only_for_prompt = has(t, "messages[-1]['role'] != 'assistant'");
      s.think_blocks = has(t, "reasoning_content") && has(t, "last_query_index");
      break;
    case ChatFormat::Llama3:
      read_knowledge_turn(t, s);
      break;
    case ChatFormat::Tulu: {
      // What the template writes before its loop over the messages.
      const std::string head = t.substr(0, t.find("for message in messages"));
      s.lead = has(head, "bos_token")   ? ChatStyle::Lead::Bos
               : has(head, "eos_token") ? ChatStyle::Lead::Eos
                                        : ChatStyle::Lead::Nothing;
      s.system_role = has(t, "'system'") || has(t, "\"system\"");
      s.newline_after_last_reply = !has(t, "not loop.last");
      break;
    }
    case ChatFormat::CommandR:
      s.trim_content = has(t, ".strip()") || has(t, "|trim") || has(t, "| trim");
      break;
    case ChatFormat::Mistral:
      s.spaced_inst = has(t, "' [INST] '") || has(t, "\" [INST] \"");
      break;
    case ChatFormat::Phi3:
      s.drop_empty_system = has(t, "'system' and message['content']");
      break;
    default:
      break;
  }
  return s;
}

std::string describe_chat_style(const ChatStyle& s) {
  const ChatStyle usual;
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  if (!s.default_system.empty()) add("default system prompt \"" + s.default_system + "\"");
  if (s.knowledge_turn) add(s.knowledge_date.empty() ? "knowledge-date system turn with today's date"
                                                      : "knowledge-date system turn");
  if (s.lead != usual.lead)
    add(s.lead == ChatStyle::Lead::Eos ? "eos first" : "nothing before the first turn");
  if (s.system_role != usual.system_role) add("no system turn: system messages go into the next user turn");
  if (s.newline_after_last_reply != usual.newline_after_last_reply) add("newline after the last reply");
  if (s.trim_content != usual.trim_content) add("turns stripped");
  if (s.spaced_inst != usual.spaced_inst) add("spaces around [INST]");
  if (s.close_last_only_for_prompt != usual.close_last_only_for_prompt) add("last turn left open");
  if (s.drop_empty_system != usual.drop_empty_system) add("empty system messages dropped");
  if (s.think_blocks != usual.think_blocks) add("<think> blocks in replies");
  return out;
}

}  // namespace sy
