// Chat templates: messages -> prompt text. Models carry a Jinja template in
// tokenizer.chat_template; rather than run arbitrary Jinja we recognise the common
// template families by their markers (as llama.cpp does) and render them in C++, and say
// so plainly when a template is none of them (pick one with --chat-template).
#pragma once

#include <string>
#include <vector>

#include "server/chat_style.h"

namespace sy {

struct ChatMessage {
  std::string
      role;  // system, user, assistant (developer -> system, tool -> user where the format has no tool role)
  std::string content;
};


class ChatTemplate {
 public:
  // From the model's template text (empty: no template in the model -> ChatML, as
  // llama.cpp does) or a format name given by the user ("chatml", "llama2", ...). The
  // special-token texts are used where a template writes bos_token / eos_token.
  // `origin` names where a template text came from.
  static ChatTemplate detect(const std::string& jinja, const std::string& bos, const std::string& eos,
                             const std::string& origin = "tokenizer.chat_template");
  // Throws sy::Error listing the names when `name` is not one.
  static ChatTemplate named(const std::string& name, const std::string& bos, const std::string& eos);
  static std::string supported_names();

  bool supported() const { return format_ != ChatFormat::Unsupported; }
  ChatFormat format() const { return format_; }
  std::string name() const;
  const ChatStyle& style() const { return style_; }
  // Where it came from, for the startup log ("tokenizer.chat_template", "default", ...).
  const std::string& origin() const { return origin_; }

  // The prompt for `messages`, ending with the assistant's turn opened when
  // add_generation_prompt. Throws sy::Error for an unknown role (naming it).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // Text that ends an assistant turn in this format, for use as extra stop strings.
  std::vector<std::string> stop_strings() const;

 private:
  ChatFormat format_ = ChatFormat::Unsupported;
  ChatStyle style_;
  std::string bos_, eos_, origin_;
};

}  // namespace sy
