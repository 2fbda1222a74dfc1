// What the load generator reads back from a server it does not control (switchyard,
// llama.cpp's server, any OpenAI-style one): streamed events, the model list and error
// bodies. Every field is checked for its type; anything unexpected becomes an error
// message or is ignored, never an exception from the JSON library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sy {

struct StreamEvent {
  bool done = false;        // the "[DONE]" sentinel
  std::string error;        // not JSON, or an error event: what to report
  bool has_choice = false;  // carries a choice (the first such event is the first token)
  std::string text;         // the choice's text (completions) or delta content (chat)
  std::optional<int64_t> completion_tokens, prompt_tokens;  // from "usage", when given
  std::optional<int64_t> cached_tokens;  // usage.prompt_tokens_details.cached_tokens, when given
};

// The payload of one "data:" line.
StreamEvent parse_stream_event(const std::string& data);

// The ids of a /tokenize reply ({"tokens": [ids]}); throws sy::Error naming what is wrong.
std::vector<int32_t> parse_tokenize_reply(const std::string& body);

// The message of an error reply ({"error": {"message": ...}}), else the start of the body.
std::string error_message_of(const std::string& body);

struct ServedModel {
  std::string id;
  int64_t n_vocab = 0;  // from the entry's "meta" (switchyard and llama.cpp give it), else the default
};

// From a /v1/models reply: the model named `wanted`, or the first one listed when
// `wanted` is empty. Throws sy::Error when the reply lists no model.
ServedModel parse_models_reply(const std::string& body, const std::string& wanted, int64_t default_vocab);

}  // namespace sy
