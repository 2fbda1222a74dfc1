// POST /tokenize and /detokenize, the extensions vLLM's and llama.cpp's servers offer, so
// that clients (evaluation harnesses, prompt budgeting) can count and build token-id
// prompts with the served model's own tokenizer. Both request shapes are taken:
//   vLLM:      {"prompt": "...", "add_special_tokens": true}  (default true)
//   llama.cpp: {"content": "...", "add_special": false, "with_pieces": false}  (default false)
// -> {"tokens": [...], "count": n, "max_model_len": ctx}; and {"tokens": [...]} ->
// {"prompt": text, "content": text}. Text that spells a special token becomes that token.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer.h"

namespace sy {

// Throw ApiError (400 for bad fields, 404 when "model" names another model).
nlohmann::json tokenize_response(const nlohmann::json& body, const Tokenizer& tok, const std::string& model_id,
                                 int64_t ctx_size);
nlohmann::json detokenize_response(const nlohmann::json& body, const Tokenizer& tok, const std::string& model_id);

}  // namespace sy
