#include "server/json_fields.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace sy {

using json = nlohmann::json;

std::string type_of(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a decimal";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

std::string format_number(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

ApiError invalid_type(const std::string& field, const std::string& expected, const json& v) {
  return ApiError(
      400, "Invalid type for '" + field + "': expected " + expected + ", but got " + type_of(v) + " instead.",
      field, "invalid_type");
}

ApiError invalid_value(const std::string& field, const std::string& what) {
  return ApiError(400, "Invalid value for '" + field + "': " + what, field, "invalid_value");
}

ApiError unsupported(const std::string& field, const std::string& what) {
  return ApiError(400, what + " is not supported by this server.", field, "unsupported_parameter");
}

ApiError model_not_found(const std::string& asked, const std::string& served) {
  return ApiError(404, "The model '" + asked + "' does not exist; this server serves '" + served + "'.", "model",
                  "model_not_found");
}

// The value of `key`, or nullptr when it is absent or null (OpenAI treats null as unset).
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool is_integral(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18;
  }
  return false;
}

std::optional<double> get_number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw invalid_type(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw invalid_value(
        key, "expected a number between " + format_number(lo) + " and " + format_number(hi) + ", but got " + format_number(d) + ".");
  }
  return d;
}

std::optional<int64_t> get_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!is_integral(*v)) throw invalid_type(key, "an integer", *v);
  // The message quotes the value sent, also when no int64_t holds it (2^64-1 was clamped
  // to 2^63-1 before, so two different seeds gave the same text).
  const auto out_of_range = [&](const std::string& got) {
    return invalid_value(key, "expected an integer between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                  ", but got " + got + ".");
  };
  int64_t i = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi)) throw out_of_range(std::to_string(u));
    i = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    i = v->get<int64_t>();
  } else {
    const double d = v->get<double>();
    if (!(d >= -0x1p63 && d < 0x1p63)) throw out_of_range(format_number(d));  // the cast would be undefined
    i = static_cast<int64_t>(d);
  }
  if (i < lo || i > hi) throw out_of_range(std::to_string(i));
  return i;
}

std::optional<bool> get_bool(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw invalid_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::vector<int32_t> token_array(const json& a, const std::string& fieldname, int32_t n_vocab) {
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!is_integral(a[i]))
      throw invalid_type(fieldname + "[" + std::to_string(i) + "]", "an integer token id", a[i]);
    const double id = a[i].get<double>();
    if (id < 0 || id >= n_vocab) {
      throw invalid_value(fieldname, "token id " + format_number(id) + " is outside the vocabulary (0.." +
                                         std::to_string(n_vocab - 1) + ").");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

void check_model(const json& body, const std::string& served, bool required) {
  const json* m = field(body, "model");
  if (!m) {
    if (required) throw ApiError(400, "Missing required parameter: 'model'.", "model", "missing_required_parameter");
    return;
  }
  if (!m->is_string()) throw invalid_type("model", "a string", *m);
  if (m->get<std::string>() != served) throw model_not_found(m->get<std::string>(), served);
}

}  // namespace sy
