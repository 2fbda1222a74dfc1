// Tokens evaluated together in one forward step: any mix of sequences, each token with
// its own position, no padding between sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace sy {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq;          // KV cache slot per token
  std::vector<uint8_t> want_logits;  // 1 where the caller wants this token's logits

  void add(int32_t token, int32_t pos, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq.push_back(seq_id);
    want_logits.push_back(logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    want_logits.clear();
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

}  // namespace sy
