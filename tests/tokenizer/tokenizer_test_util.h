// Shared helpers for the tokenizer tests: vocabulary files in ../shared, loading tokenizers, and
// writing small vocabulary-only GGUF files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "formats/gguf_reader.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace sy::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string vocab_path(const std::string& name) {
  return shared_path("fixtures/tokenizers/ggml-vocab-" + name + ".gguf");
}

// Tokenizers are immutable: load each vocabulary once for the whole binary.
inline const Tokenizer& vocab_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = Tokenizer::from_gguf(*GgufFile::open(vocab_path(name)));
  return *slot;
}

// Minimal GGUF v3 writer for vocabulary-only files (metadata only, no tensors).
class GgufVocabWriter {
 public:
  using Value = std::variant<std::string, uint32_t, bool, std::vector<std::string>,
                             std::vector<int32_t>, std::vector<float>>;
  void set(const std::string& key, Value v) { kv_.emplace_back(key, std::move(v)); }

  void write(const std::string& path) const {
    std::string b = "GGUF";
    put<uint32_t>(b, 3);
    put<uint64_t>(b, 0);
    put<uint64_t>(b, kv_.size());
    for (const auto& [key, value] : kv_) {
      put_str(b, key);
      if (auto* s = std::get_if<std::string>(&value)) {
        put<uint32_t>(b, 8);
        put_str(b, *s);
      } else if (auto* u = std::get_if<uint32_t>(&value)) {
        put<uint32_t>(b, 4);
        put<uint32_t>(b, *u);
      } else if (auto* f = std::get_if<bool>(&value)) {
        put<uint32_t>(b, 7);
        b.push_back(*f ? 1 : 0);
      } else if (auto* ss = std::get_if<std::vector<std::string>>(&value)) {
        array_header(b, 8, ss->size());
        for (const auto& s2 : *ss) put_str(b, s2);
      } else if (auto* is = std::get_if<std::vector<int32_t>>(&value)) {
        array_header(b, 5, is->size());
        for (int32_t i : *is) put<int32_t>(b, i);
      } else if (auto* fs = std::get_if<std::vector<float>>(&value)) {
        array_header(b, 6, fs->size());
        for (float x : *fs) put<float>(b, x);
      }
    }
    std::ofstream out(path, std::ios::binary);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
  }

 private:
  template <typename T>
  static void put(std::string& b, T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(v));  // little-endian host
  }
  static void put_str(std::string& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b += s;
  }
  static void array_header(std::string& b, uint32_t type, size_t n) {
    put<uint32_t>(b, 9);
    put<uint32_t>(b, type);
    put<uint64_t>(b, n);
  }
  std::vector<std::pair<std::string, Value>> kv_;
};

}  // namespace sy::test
