// Reading fields of a request body the way the OpenAI API does: null is the same as absent,
// and a field of the wrong type or out of range is an ApiError (400) that names it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/openai.h"

namespace sy {

std::string type_of(const nlohmann::json& v);  // "an integer", "a string", ... for messages
std::string format_number(double v);           // without trailing zeros

ApiError invalid_type(const std::string& field, const std::string& expected, const nlohmann::json& v);
ApiError invalid_value(const std::string& field, const std::string& what);
ApiError unsupported(const std::string& field, const std::string& what);
ApiError model_not_found(const std::string& asked, const std::string& served);  // 404

// "model" must name the served model: 404 otherwise; 400 when it is not a string, or when
// `required` and it is missing.
void check_model(const nlohmann::json& body, const std::string& served, bool required);

// The value of `key`, or nullptr when it is absent or null.
const nlohmann::json* field(const nlohmann::json& body, const char* key);
bool is_integral(const nlohmann::json& v);  // an integer, or a float with an integral value
std::optional<double> get_number(const nlohmann::json& body, const char* key, double lo, double hi);
std::optional<int64_t> get_int(const nlohmann::json& body, const char* key, int64_t lo, int64_t hi);
std::optional<bool> get_bool(const nlohmann::json& body, const char* key);
// An array of token ids below n_vocab; errors name `fieldname[i]`.
std::vector<int32_t> token_array(const nlohmann::json& a, const std::string& fieldname, int32_t n_vocab);

}  // namespace sy
