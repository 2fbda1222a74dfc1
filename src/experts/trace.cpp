#include "experts/trace.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_text.h"
#include "base/utf8.h"
#include "base/whole_file.h"
#include "model/hparams.h"

namespace sy {
namespace {

// Binary layout (docs/expert-buffering.md, "Trace format"); all integers little-endian.
constexpr char kMagic[8] = {'S', 'Y', 'X', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFixedHeader = 56;
constexpr size_t kStepsOffset = 40;
constexpr uint64_t kNotFinalized = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMaxName = 1024;
constexpr const char* kJsonFormat = "switchyard-expert-trace";

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

// CRC-32 (IEEE, as zlib's crc32): crc = crc32_update(crc, ...) starting from 0.
uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

size_t align4(size_t n) {
  return (n + 3) & ~size_t{3};
}

// The checksum covers the header except its n_steps and crc fields (bytes 40..51, patched
// at close), then every step record.
uint32_t header_crc(const uint8_t* h, size_t hbytes) {
  return crc32_update(crc32_update(0, h, kStepsOffset), h + kStepsOffset + 12, hbytes - kStepsOffset - 12);
}

void put_u16(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u16(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8);
}
uint32_t get_u32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint64_t get_u64(const uint8_t* p) {
  return get_u32(p) | (uint64_t{get_u32(p + 4)} << 32);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

size_t header_bytes(const TraceInfo& info) {
  return kFixedHeader + align4(info.model_name.size()) + 4 * info.moe_layers.size();
}
size_t record_bytes(const TraceInfo& info, int count_bytes) {
  return 4 + align4(size_t(info.n_moe()) * info.n_expert * count_bytes);
}

// The checks every reader and writer applies to a header; `where` prefixes messages.
void validate_info(const TraceInfo& info, const std::string& where) {
  auto bad = [&](const std::string& m) { throw Error(where + ": " + m); };
  if (info.n_layer < 1 || info.n_layer > 100000)
    bad("n_layer " + std::to_string(info.n_layer) + " is out of range");
  if (info.n_expert < 1 || info.n_expert > 65536)
    bad("n_expert " + std::to_string(info.n_expert) + " is out of range");
  if (info.top_k < 1 || info.top_k > info.n_expert) {
    bad("top_k " + std::to_string(info.top_k) + " is not in 1..n_expert (" + std::to_string(info.n_expert) +
        ")");
  }
  if (info.moe_layers.empty() || info.n_moe() > info.n_layer) {
    bad("the number of MoE layers (" + std::to_string(info.n_moe()) + ") is not in 1..n_layer");
  }
  for (size_t i = 0; i < info.moe_layers.size(); ++i) {
    const int l = info.moe_layers[i];
    if (l < 0 || l >= info.n_layer || (i > 0 && l <= info.moe_layers[i - 1])) {
      bad("MoE layer list is not ascending within 0..n_layer-1 (entry " + std::to_string(i) + " is " +
          std::to_string(l) + ")");
    }
  }
  if (info.model_name.size() > kMaxName) bad("model name is longer than 1024 bytes");
  // Reports put it in JSON and SVG, which must be UTF-8.
  if (!is_valid_utf8(info.model_name)) bad("the model name is not valid UTF-8");
}

// Per-step consistency: no expert gets more tokens than the step has, and a layer's
// counts sum to tokens * top_k (dynamic gating) or at most that (static gating).
void validate_step(const TraceInfo& info, int64_t step, uint32_t tokens, const uint32_t* counts,
                   const std::string& where) {
  const uint64_t want = uint64_t{tokens} * info.top_k;
  for (int l = 0; l < info.n_moe(); ++l) {
    uint64_t sum = 0;
    for (int e = 0; e < info.n_expert; ++e) {
      const uint32_t c = counts[l * info.n_expert + e];
      if (c > tokens) {
        throw Error(where + ": step " + std::to_string(step) + ", layer " +
                    std::to_string(info.moe_layers[l]) + ": expert " + std::to_string(e) + " has " +
                    std::to_string(c) + " tokens but the step has " + std::to_string(tokens) +
                    " (corrupt data)");
      }
      sum += c;
    }
    if (sum > want || (!info.static_gating && sum != want)) {
      throw Error(where + ": step " + std::to_string(step) + ", layer " + std::to_string(info.moe_layers[l]) +
                  ": expert counts sum to " + std::to_string(sum) + " but " + std::to_string(tokens) +
                  " tokens x top-" + std::to_string(info.top_k) + " = " + std::to_string(want) +
                  " (corrupt data)");
    }
  }
}

Trace read_binary(const std::string& path, const std::string& data) {
  const std::string where = "trace " + path;
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t size = data.size();
  if (size < kFixedHeader) {
    throw Error(where + ": truncated header (" + std::to_string(size) + " of at least " +
                std::to_string(kFixedHeader) + " bytes)");
  }
  const uint32_t version = get_u32(p + 8);
  if (version != kVersion) {
    throw Error(where + ": unsupported trace version " + std::to_string(version) +
                " (this build reads version 1)");
  }
  const uint32_t hbytes = get_u32(p + 12), count_bytes = get_u32(p + 16), flags = get_u32(p + 20);
  if (count_bytes != 2 && count_bytes != 4)
    throw Error(where + ": count width " + std::to_string(count_bytes) + " is not 2 or 4");
  if (flags & ~1u) throw Error(where + ": unknown header flags " + std::to_string(flags));
  Trace t;
  TraceInfo& info = t.info;
  info.n_layer = static_cast<int>(std::min<uint32_t>(get_u32(p + 24), 1u << 30));
  info.n_expert = static_cast<int>(std::min<uint32_t>(get_u32(p + 28), 1u << 30));
  info.top_k = static_cast<int>(std::min<uint32_t>(get_u32(p + 32), 1u << 30));
  const uint32_t n_moe = get_u32(p + 36);
  const uint64_t n_steps = get_u64(p + 40);
  const uint32_t crc = get_u32(p + 48), name_len = get_u32(p + 52);
  info.static_gating = flags & 1u;
  if (name_len > kMaxName)
    throw Error(where + ": model name length " + std::to_string(name_len) + " exceeds 1024");
  if (n_moe < 1 || n_moe > 100000)
    throw Error(where + ": " + std::to_string(n_moe) + " MoE layers is out of range");
  const size_t want_hbytes = kFixedHeader + align4(name_len) + 4 * size_t{n_moe};
  if (hbytes != want_hbytes) {
    throw Error(where + ": header size field is " + std::to_string(hbytes) + " but the header holds " +
                std::to_string(want_hbytes) + " bytes (corrupt header)");
  }
  if (size < want_hbytes)
    throw Error(where + ": truncated header (" + std::to_string(size) + " of " + std::to_string(want_hbytes) +
                " bytes)");
  info.model_name.assign(data.data() + kFixedHeader, name_len);
  for (uint32_t i = 0; i < n_moe; ++i) {
    info.moe_layers.push_back(
        static_cast<int>(std::min<uint32_t>(get_u32(p + kFixedHeader + align4(name_len) + 4 * i), 1u << 30)));
  }
  validate_info(info, where);
  if (n_steps == kNotFinalized) {
    throw Error(where +
                ": the trace was not finalized (its writer did not close it; the run was interrupted)");
  }
  const size_t rec = record_bytes(info, static_cast<int>(count_bytes));
  const size_t payload = size - want_hbytes;
  if (n_steps > payload / rec) {
    throw Error(where + ": truncated: the header announces " + std::to_string(n_steps) + " steps of " +
                std::to_string(rec) + " bytes but only " + std::to_string(payload) +
                " bytes follow the header (" + std::to_string(payload / rec) + " complete steps)");
  }
  if (payload != n_steps * rec) {
    throw Error(where + ": " + std::to_string(payload - n_steps * rec) +
                " unexpected bytes after the last of " + std::to_string(n_steps) + " steps");
  }
  if (crc32_update(header_crc(p, want_hbytes), p + want_hbytes, payload) != crc) {
    throw Error(where + ": checksum mismatch: the header or the step records are corrupt");
  }
  const size_t per_step = size_t(info.n_moe()) * info.n_expert;
  t.tokens.resize(n_steps);
  t.counts.resize(n_steps * per_step);
  for (uint64_t s = 0; s < n_steps; ++s) {
    const uint8_t* r = p + want_hbytes + s * rec;
    t.tokens[s] = get_u32(r);
    uint32_t* out = t.counts.data() + s * per_step;
    for (size_t i = 0; i < per_step; ++i)
      out[i] = count_bytes == 2 ? get_u16(r + 4 + 2 * i) : get_u32(r + 4 + 4 * i);
    validate_step(info, static_cast<int64_t>(s), t.tokens[s], out, where);
  }
  return t;
}

// A non-negative integer field of a JSON object, or an error naming the line.
uint32_t json_uint(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<uint64_t>() > 0xFFFFFFFFu) {
    throw Error(where + ": field \"" + key + "\" is missing or not an unsigned 32-bit integer");
  }
  return j[key].get<uint32_t>();
}

Trace read_jsonl(const std::string& path, const std::string& data) {
  Trace t;
  size_t pos = 0;
  int64_t line_no = 0;
  bool ended = false;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    ++line_no;
    const std::string where = "trace " + path + ", line " + std::to_string(line_no);
    if (nl == std::string::npos) throw Error(where + ": truncated (the last line has no newline)");
    const std::string line = data.substr(pos, nl - pos);
    pos = nl + 1;
    if (ended) throw Error(where + ": unexpected content after the end line");
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw Error(where + ": not a JSON object");
    if (line_no == 1) {
      const auto format = j.find("format");
      if (format == j.end() || !format->is_string() || format->get<std::string>() != kJsonFormat)
        throw Error(where + ": \"format\" is not \"" + std::string(kJsonFormat) + "\"");
      if (json_uint(j, "version", where) != kVersion)
        throw Error(where + ": unsupported trace version (this build reads version 1)");
      TraceInfo& info = t.info;
      if (!j.contains("model") || !j["model"].is_string())
        throw Error(where + ": field \"model\" is missing or not a string");
      info.model_name = j["model"].get<std::string>();
      info.n_layer = static_cast<int>(std::min<uint32_t>(json_uint(j, "n_layer", where), 1u << 30));
      info.n_expert = static_cast<int>(std::min<uint32_t>(json_uint(j, "n_expert", where), 1u << 30));
      info.top_k = static_cast<int>(std::min<uint32_t>(json_uint(j, "top_k", where), 1u << 30));
      if (!j.contains("moe_layers") || !j["moe_layers"].is_array())
        throw Error(where + ": field \"moe_layers\" is missing or not an array");
      for (const auto& l : j["moe_layers"]) {
        if (!l.is_number_unsigned() || l.get<uint64_t>() > (1u << 30))
          throw Error(where + ": \"moe_layers\" holds a non-integer");
        info.moe_layers.push_back(l.get<int>());
      }
      const auto gating = j.find("static_gating");
      if (gating != j.end() && !gating->is_boolean())
        throw Error(where + ": field \"static_gating\" is not true or false");
      info.static_gating = gating != j.end() && gating->get<bool>();
      validate_info(info, where);
      continue;
    }
    if (j.contains("end")) {
      if (json_uint(j, "n_steps", where) != t.n_steps()) {
        throw Error(where + ": the end line announces " + std::to_string(json_uint(j, "n_steps", where)) +
                    " steps but the file holds " + std::to_string(t.n_steps()));
      }
      ended = true;
      continue;
    }
    if (json_uint(j, "step", where) != t.n_steps()) {
      throw Error(where + ": step " + std::to_string(json_uint(j, "step", where)) + " where step " +
                  std::to_string(t.n_steps()) + " was expected (missing or reordered steps)");
    }
    const uint32_t tokens = json_uint(j, "tokens", where);
    const auto& c = j["counts"];
    if (!c.is_array() || c.size() != size_t(t.info.n_moe())) {
      throw Error(where + ": \"counts\" must be an array of " + std::to_string(t.info.n_moe()) +
                  " per-layer arrays");
    }
    std::vector<uint32_t> row;
    row.reserve(size_t(t.info.n_moe()) * t.info.n_expert);
    for (const auto& layer : c) {
      if (!layer.is_array() || layer.size() != size_t(t.info.n_expert)) {
        throw Error(where + ": each \"counts\" entry must hold " + std::to_string(t.info.n_expert) +
                    " expert counts");
      }
      for (const auto& v : layer) {
        if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFFu)
          throw Error(where + ": a count is not an unsigned integer");
        row.push_back(v.get<uint32_t>());
      }
    }
    validate_step(t.info, t.n_steps(), tokens, row.data(), where);
    t.add_step(tokens, row);
  }
  if (line_no == 0) throw Error("trace " + path + ": the file is empty");
  if (!ended)
    throw Error("trace " + path + ": truncated: no end line after step " + std::to_string(t.n_steps()));
  return t;
}

// Why a stream failed: the write(2) or open(2) under it sets errno, which the callers
// clear before their stream operations so that a stale value is not reported.
std::string stream_reason() { return errno != 0 ? std::strerror(errno) : "unknown error"; }

}  // namespace

TraceInfo TraceInfo::from_hparams(const HParams& hp, bool static_gating) {
  if (!hp.is_moe()) throw Error("--trace-experts: the model has no routed experts");
  TraceInfo info;
  // A GGUF's name is any bytes: invalid ones become U+FFFD, and a long name is cut between characters.
  info.model_name = valid_utf8(hp.model_name.empty() ? hp.arch_name : hp.model_name, kMaxName);
  info.n_layer = hp.n_layer;
  info.n_expert = hp.n_expert;
  info.top_k = hp.n_expert_used;
  for (int l = 0; l < hp.n_layer; ++l) {
    if (hp.layer_is_moe(l)) info.moe_layers.push_back(l);
  }
  info.static_gating = static_gating;
  return info;
}

void Trace::add_step(uint32_t n_tokens, const std::vector<uint32_t>& layer_counts) {
  if (layer_counts.size() != size_t(info.n_moe()) * info.n_expert)
    throw Error("Trace::add_step: wrong number of counts");
  tokens.push_back(n_tokens);
  counts.insert(counts.end(), layer_counts.begin(), layer_counts.end());
}

TraceWriter::TraceWriter(const std::string& path, TraceInfo info, int64_t max_tokens_per_step)
    : path_(path), info_(std::move(info)), jsonl_(ends_with(path, ".jsonl")) {
  validate_info(info_, "trace " + path_);
  count_bytes_ = max_tokens_per_step <= 0xFFFF ? 2 : 4;
  errno = 0;
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) fail("cannot create the file: " + stream_reason());
  moe_index_.assign(info_.n_layer, -1);
  for (int i = 0; i < info_.n_moe(); ++i) moe_index_[info_.moe_layers[i]] = i;
  counts_.assign(size_t(info_.n_moe()) * info_.n_expert, 0);
  seen_.assign(info_.n_moe(), 0);
  if (jsonl_) {
    const nlohmann::json h = {{"format", kJsonFormat},          {"version", kVersion},
                              {"model", info_.model_name},      {"n_layer", info_.n_layer},
                              {"n_expert", info_.n_expert},     {"top_k", info_.top_k},
                              {"moe_layers", info_.moe_layers}, {"static_gating", info_.static_gating}};
    out_ << json_text(h) << '\n';
  } else {
    std::vector<uint8_t> h(header_bytes(info_), 0);
    std::memcpy(h.data(), kMagic, 8);
    put_u32(h, 8, kVersion);
    put_u32(h, 12, static_cast<uint32_t>(h.size()));
    put_u32(h, 16, count_bytes_);
    put_u32(h, 20, info_.static_gating ? 1 : 0);
    put_u32(h, 24, info_.n_layer);
    put_u32(h, 28, info_.n_expert);
    put_u32(h, 32, info_.top_k);
    put_u32(h, 36, info_.n_moe());
    put_u64(h, kStepsOffset, kNotFinalized);
    put_u32(h, 48, 0);
    put_u32(h, 52, static_cast<uint32_t>(info_.model_name.size()));
    std::memcpy(h.data() + kFixedHeader, info_.model_name.data(), info_.model_name.size());
    for (int i = 0; i < info_.n_moe(); ++i)
      put_u32(h, kFixedHeader + align4(info_.model_name.size()) + 4 * i, info_.moe_layers[i]);
    out_.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
    crc_ = header_crc(h.data(), h.size());
    record_.assign(record_bytes(info_, count_bytes_), 0);
  }
  if (!out_) fail("cannot write the header: " + stream_reason());
}

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (const std::exception&) {
    // A destructor must not throw; callers that care call close() themselves.
  }
}

void TraceWriter::fail(const std::string& what) const {
  throw Error("trace " + path_ + ": " + what);
}

void TraceWriter::on_routing(int layer, const Routing& routing, const DispatchPlan& plan) {
  if (closed_) fail("routing observed after close()");
  if (layer < 0 || layer >= info_.n_layer || moe_index_[layer] < 0) {
    fail("routing reported for layer " + std::to_string(layer) +
         ", which is not an MoE layer of the trace header");
  }
  if (plan.n_expert != info_.n_expert)
    fail("the plan has " + std::to_string(plan.n_expert) + " experts, the header " +
         std::to_string(info_.n_expert));
  const int li = moe_index_[layer];
  // A layer seen again before on_step_end() means the previous step threw part-way (the
  // caller may go on with the next one): its partial counts are dropped, not recorded.
  if (seen_[li]) {
    std::fill(seen_.begin(), seen_.end(), 0);
    std::fill(counts_.begin(), counts_.end(), 0);
  }
  const bool any_seen = std::find(seen_.begin(), seen_.end(), 1) != seen_.end();
  if (any_seen && static_cast<uint32_t>(routing.n_tokens) != step_tokens_)
    fail("layers of one step saw different token counts");
  seen_[li] = 1;
  step_tokens_ = static_cast<uint32_t>(routing.n_tokens);
  uint32_t* c = counts_.data() + size_t(li) * info_.n_expert;
  // Static gating's blocks hold padding slots, which are not tokens. Their row count can equal
  // tokens x k (capacity factor 1 with tokens x k a multiple of the experts), so it cannot tell.
  for (int e = 0; e < info_.n_expert; ++e) {
    int64_t n = plan.rows(e);
    if (info_.static_gating) {
      n = 0;
      for (int64_t r = plan.offset[e]; r < plan.offset[e + 1]; ++r) n += plan.row_token[r] >= 0;
    }
    c[e] = static_cast<uint32_t>(n);
  }
}

void TraceWriter::on_step_end() {
  if (std::find(seen_.begin(), seen_.end(), 1) == seen_.end()) return;  // no MoE layer ran
  if (std::find(seen_.begin(), seen_.end(), 0) != seen_.end())
    fail("a step ended before every MoE layer routed");
  write_step();
  std::fill(seen_.begin(), seen_.end(), 0);
  std::fill(counts_.begin(), counts_.end(), 0);
  ++n_steps_;
}

void TraceWriter::write_step() {
  validate_step(info_, n_steps_, step_tokens_, counts_.data(), "trace " + path_);
  errno = 0;
  if (jsonl_) {
    nlohmann::json c = nlohmann::json::array();
    for (int l = 0; l < info_.n_moe(); ++l) {
      c.push_back(std::vector<uint32_t>(counts_.begin() + size_t(l) * info_.n_expert,
                                        counts_.begin() + size_t(l + 1) * info_.n_expert));
    }
    out_ << json_text({{"step", n_steps_}, {"tokens", step_tokens_}, {"counts", c}}) << '\n';
  } else {
    put_u32(record_, 0, step_tokens_);
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (count_bytes_ == 2) {
        if (counts_[i] > 0xFFFF)
          fail("an expert got " + std::to_string(counts_[i]) +
               " tokens, more than 16-bit counts hold; pass a larger max_tokens_per_step");
        put_u16(record_, 4 + 2 * i, counts_[i]);
      } else {
        put_u32(record_, 4 + 4 * i, counts_[i]);
      }
    }
    crc_ = crc32_update(crc_, record_.data(), record_.size());
    out_.write(reinterpret_cast<const char*>(record_.data()), static_cast<std::streamsize>(record_.size()));
  }
  if (!out_) fail("write failed after " + std::to_string(n_steps_) + " steps: " + stream_reason());
}

void TraceWriter::close() {
  if (closed_) return;
  closed_ = true;
  errno = 0;
  if (jsonl_) {
    out_ << json_text({{"end", true}, {"n_steps", n_steps_}}) << '\n';
  } else {
    std::vector<uint8_t> tail(12);
    put_u64(tail, 0, static_cast<uint64_t>(n_steps_));
    put_u32(tail, 8, crc_);
    out_.seekp(static_cast<std::streamoff>(kStepsOffset));
    out_.write(reinterpret_cast<const char*>(tail.data()), 12);
  }
  out_.flush();
  if (!out_) fail("cannot finalize the file: " + stream_reason());
  out_.close();
}

Trace read_trace(const std::string& path) {
  const std::string data = read_whole_file(path, "trace");
  if (data.empty()) throw Error("trace " + path + ": the file is empty");
  if (data.size() >= 8 && std::memcmp(data.data(), kMagic, 8) == 0) return read_binary(path, data);
  if (data[0] == '{') return read_jsonl(path, data);
  throw Error("trace " + path + ": not an expert trace (no SYXTRACE magic and no JSON header line)");
}

void write_trace(const std::string& path, const Trace& trace) {
  uint32_t max_tokens = 0;
  for (uint32_t t : trace.tokens) max_tokens = std::max(max_tokens, t);
  TraceWriter w(path, trace.info, max_tokens);
  // Feed the steps through the observer interface so both paths share one encoder.
  const TraceInfo& info = trace.info;
  Routing r;
  r.k = info.top_k;
  DispatchPlan plan;
  plan.n_expert = info.n_expert;
  plan.offset.resize(info.n_expert + 1);
  for (int64_t s = 0; s < trace.n_steps(); ++s) {
    r.n_tokens = trace.tokens[s];
    for (int l = 0; l < info.n_moe(); ++l) {
      const uint32_t* c = trace.step_layer(s, l);
      plan.offset[0] = 0;
      for (int e = 0; e < info.n_expert; ++e) plan.offset[e + 1] = plan.offset[e] + c[e];
      // Every row a real token (a static-gating trace's writer counts rows with a token).
      plan.row_token.assign(plan.n_rows(), 0);
      w.on_routing(info.moe_layers[l], r, plan);
    }
    w.on_step_end();
  }
  w.close();
}

}  // namespace sy
