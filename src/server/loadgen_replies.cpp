#include "server/loadgen_replies.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "server/json_fields.h"

namespace sy {

using json = nlohmann::json;

namespace {

std::optional<int64_t> int_field(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v->get<uint64_t>());
  return std::nullopt;
}

std::string string_field(const json& obj, const char* key) {
  const json* v = field(obj, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// {"error": {"message": "..."}} or {"error": "..."}; empty when there is no error.
std::string error_in(const json& j) {
  const json* e = field(j, "error");
  if (!e) return {};
  if (e->is_string()) return e->get<std::string>();
  const std::string msg = string_field(*e, "message");
  return msg.empty() ? "error event" : msg;
}

}  // namespace

StreamEvent parse_stream_event(const std::string& data) {
  StreamEvent ev;
  if (data == "[DONE]") {
    ev.done = true;
    return ev;
  }
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    ev.error = "an event is not a JSON object: " + data.substr(0, 80);
    return ev;
  }
  ev.error = error_in(j);
  const json* choices = field(j, "choices");
  ev.has_choice = choices && choices->is_array() && !choices->empty();
  if (ev.has_choice && (*choices)[0].is_object()) {
    const json& c = (*choices)[0];
    ev.text = string_field(c, "text");
    if (const json* delta = field(c, "delta")) ev.text += string_field(*delta, "content");
  }
  if (const json* usage = field(j, "usage")) {
    ev.completion_tokens = int_field(*usage, "completion_tokens");
    ev.prompt_tokens = int_field(*usage, "prompt_tokens");
    if (const json* details = field(*usage, "prompt_tokens_details"))
      ev.cached_tokens = int_field(*details, "cached_tokens");
  }
  return ev;
}

std::vector<int32_t> parse_tokenize_reply(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json* tokens = j.is_object() ? field(j, "tokens") : nullptr;
  if (!tokens || !tokens->is_array()) {
    throw Error("the /tokenize reply has no \"tokens\" array: " + body.substr(0, 80));
  }
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw Error("the /tokenize reply holds something other than token ids: " + t.dump().substr(0, 40));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::string error_message_of(const std::string& body) {
  const json e = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const std::string msg = e.is_discarded() ? std::string() : error_in(e);
  return msg.empty() ? body.substr(0, 120) : msg;
}

ServedModel parse_models_reply(const std::string& body, const std::string& wanted, int64_t default_vocab) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json* data = j.is_discarded() ? nullptr : field(j, "data");
  ServedModel m;
  m.n_vocab = default_vocab;
  if (data && data->is_array()) {
    for (const json& entry : *data) {
      const std::string id = string_field(entry, "id");
      if (id.empty() || (!wanted.empty() && id != wanted)) continue;
      m.id = id;
      if (const json* meta = field(entry, "meta")) {
        const auto n = int_field(*meta, "n_vocab");
        if (n && *n > 0) m.n_vocab = *n;
      }
      return m;
    }
    if (!wanted.empty() && !data->empty()) {
      m.id = wanted;  // not listed under that name: the server may still accept it
      return m;
    }
  }
  throw Error("/v1/models returned no model: " + body.substr(0, 200));
}

}  // namespace sy
