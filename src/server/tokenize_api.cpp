#include "server/tokenize_api.h"

#include "server/json_fields.h"

namespace sy {

using json = nlohmann::json;

json tokenize_response(const json& body, const Tokenizer& tok, const std::string& model_id, int64_t ctx_size) {
  check_model(body, model_id, /*required=*/false);
  const bool llama_style = field(body, "prompt") == nullptr && field(body, "content") != nullptr;
  const char* key = llama_style ? "content" : "prompt";
  const json* text = field(body, key);
  if (!text) throw ApiError(400, "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter");
  if (!text->is_string()) throw invalid_type(key, "a string", *text);
  const bool add_special = llama_style ? get_bool(body, "add_special").value_or(false)
                                       : get_bool(body, "add_special_tokens").value_or(true);
  const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
  // llama.cpp's flag: false tokenizes special-token text ("<s>") as plain text.
  const bool parse_special = get_bool(body, "parse_special").value_or(true);
  const std::vector<int32_t> ids = tok.encode(text->get<std::string>(), add_special && tok.add_bos_default(),
                                                parse_special, add_special && tok.add_eos_default());
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces) tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id)}});
    else tokens.push_back(id);
  }
  return {{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", ctx_size}};
}

json detokenize_response(const json& body, const Tokenizer& tok, const std::string& model_id) {
  check_model(body, model_id, /*required=*/false);
  const json* t = field(body, "tokens");
  if (!t) throw ApiError(400, "Missing required parameter: 'tokens'.", "tokens", "missing_required_parameter");
  if (!t->is_array()) throw invalid_type("tokens", "an array of token ids", *t);
  const std::string text = tok.decode(token_array(*t, "tokens", tok.n_vocab()));
  return {{"prompt", text}, {"content", text}};
}

}  // namespace sy
