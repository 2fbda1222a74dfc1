// JSON text for output. Strings from model files, paths and generated text may hold bytes
// that are not UTF-8; nlohmann's default dump throws on them, so every JSON the engine
// prints, sends or writes goes through here and gets U+FFFD in their place.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sy {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sy
