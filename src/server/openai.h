// The OpenAI API surface: request bodies of /v1/completions and /v1/chat/completions
// parsed and checked into a CompletionJob, and the errors in OpenAI's shape
// {"error": {"message", "type", "param", "code"}}, naming the field at fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/request.h"
#include "server/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace sy {

class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : Error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}

  int status;
  std::string type, param, code;

  nlohmann::json body() const;
};

nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param,
                          const std::string& code);

enum class Endpoint { Completions, Chat };

// What the parser needs to know about the server.
struct ApiContext {
  const Tokenizer* tok = nullptr;
  const ChatTemplate* chat = nullptr;
  std::string model_id;
  int64_t ctx_size = 0;
  size_t max_choices = 64;    // prompts x n at most (the engine's queue)
  uint64_t default_seed = 0;  // used when the request gives none
};

struct CompletionJob {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts;  // each gets n choices
  std::vector<std::string> echo_text;         // per prompt, when echo
  std::vector<int64_t> max_tokens;            // per prompt (defaults depend on its length)
  GenerationParams gen;                       // max_tokens and seed set per choice
  int n = 1;
  bool stream = false, include_usage = false;
  std::vector<std::string> stop;
  int64_t prompt_tokens() const;
};

// Throws ApiError (400 for bad fields, 404 for an unknown model).
nlohmann::json parse_json_body(const std::string& body);
CompletionJob parse_completion_request(const nlohmann::json& body, Endpoint ep, const ApiContext& ctx);

// Message contents of a chat request -> the template's messages (exposed for tests).
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages);

std::string random_id(const char* prefix);

}  // namespace sy
