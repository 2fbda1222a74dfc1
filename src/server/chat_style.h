// Reading a chat template's text: which family it belongs to (by its markers, as llama.cpp
// does) and how it departs from that family's usual rendering. Real templates of one family
// differ in details a model is trained on (a default system prompt, a date preamble, spaces
// around [INST], whether replies end with a newline); each is read from the text that
// produces it and checked against jinja2 renderings of the models' own templates
// (tests/server/chat_templates).
#pragma once

#include <string>

namespace sy {

enum class ChatFormat {
  Unsupported,
  ChatML,     // <|im_start|>role ... <|im_end|> (Qwen, many others)
  Llama2,     // [INST] <<SYS>> ... <</SYS>> ... [/INST]
  Mistral,    // [INST] ... [/INST] (Mistral / Mixtral instruct)
  Llama3,     // <|start_header_id|>role<|end_header_id|> ... <|eot_id|>
  Zephyr,     // <|user|>\n ... </s>
  Tulu,       // <|user|>\n ... \n (OLMoE / Tulu instruct)
  Gemma,      // <start_of_turn>user ... <end_of_turn>
  Phi3,       // <|user|>\n ... <|end|>
  DeepSeek,   // User: ...\n\nAssistant: ... (DeepSeek-MoE / DeepSeek-V2 chat)
  DeepSeek3,  // <｜User｜> ... <｜Assistant｜>
  CommandR,   // <|START_OF_TURN_TOKEN|><|USER_TOKEN|> ...
};

struct ChatStyle {
  enum class Lead { Bos, Eos, Nothing };
  std::string default_system;               // ChatML: the system prompt when none is given (Qwen)
  bool knowledge_turn = false;              // Llama 3.1+: a system turn that is always there opens
  std::string knowledge_month;              // with "Cutting Knowledge Date: <month>\nToday Date: <date>"
  std::string knowledge_date;               // the template's fixed date; empty: today's, at each render
  Lead lead = Lead::Bos;                    // Tulu: what precedes the first turn
  bool system_role = true;                  // Tulu: false where the template drops system messages
  bool newline_after_last_reply = false;    // Tulu 2: every reply ends with a newline
  bool trim_content = false;                // Command-R: turns are stripped
  bool spaced_inst = false;                 // Mistral v1: " [INST] " and a space before each reply
  bool drop_empty_system = false;           // Phi-3.5: an empty system message is left out
  bool think_blocks = false;                // Qwen3: replies in history lose their <think>
                                            // block; a reply after the last question shows one
  bool close_last_only_for_prompt = false;  // Qwen1.5: the last turn stays open unless a
                                            // prompt follows, and no prompt follows a reply
};

// The family of a template text; Unsupported when none matches.
ChatFormat detect_chat_format(const std::string& jinja);

// Llama 3.1+'s "Cutting Knowledge Date / Today Date" lines ("" without knowledge_turn); a
// date read at each call, so that a server running past midnight gives the new day's.
std::string knowledge_preamble(const ChatStyle& s);

// The variant of `format` that `jinja` renders. ChatStyle{} is each family's usual form,
// what `--chat-template NAME` renders.
ChatStyle read_chat_style(ChatFormat format, const std::string& jinja);

// How `style` departs from its family's usual form, for the startup log ("" when it does
// not): "default system prompt \"You are Qwen, ...\"; spaces around [INST]".
std::string describe_chat_style(const ChatStyle& style);

}  // namespace sy
