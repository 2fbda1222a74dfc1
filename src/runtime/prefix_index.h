// Finds the K/V blocks that already hold a prompt's leading tokens. Every full block a
// sequence has computed is registered under its tokens and the block before it, so a
// later request that starts with the same tokens (the next turn of a conversation, a
// shared system prompt, the n choices of one call) attaches those blocks instead of
// computing them again. Registered blocks are retained by the KV cache: they outlive the
// sequence that wrote them until the cache needs the room, and then leave the index.
//
// A block's K/V depend on every token before it, so a block is found only through the
// chain of blocks that precede it: its key is its own tokens plus the serial number of
// the block before it, and a serial is never given twice, so a block whose predecessor
// was evicted and reused can no longer be reached.
//
// A prompt rarely ends where a block does, and the next turn of a conversation departs
// from the last one inside a block (a reply re-tokenizes differently at its ends). So the
// last, partly filled block of a sequence that leaves is registered too, and a new
// sequence copies the leading rows of whichever block after its matched chain, full or
// partial, shares the most tokens with it.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/kv_cache.h"

namespace sy {

class PrefixIndex {
 public:
  // Registers itself as the cache's eviction handler; the cache must outlive the index.
  explicit PrefixIndex(KvCache& cache);
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  struct Match {
    std::vector<int32_t> blocks;  // in position order
    uint64_t last = 0;            // serial of the last block (0: none matched)
  };
  // The longest chain of registered blocks holding tokens[0, k * block_size), with
  // k * block_size <= n_tokens.
  void match(const int32_t* tokens, int64_t n_tokens, Match& m) const;
  // Registers `block` (in use, full, never to be written again) as holding the block_size
  // tokens `tokens` right after the block with serial `parent` (0: at position 0), and
  // retains it in the cache. Returns the serial under which that content is found: the
  // block's own, or an equal block's registered earlier (then `block` is not kept). 0 when
  // the content cannot be registered (a hash collision), which ends the chain.
  uint64_t add(int32_t block, uint64_t parent, const int32_t* tokens);
  // Registers the first `rows` (< block_size) positions of `block`, the partly filled last
  // block of a sequence that leaves (so never written again), after the block with serial
  // `parent`, and retains it; nothing when a registered block already holds those tokens.
  void add_tail(int32_t block, uint64_t parent, const int32_t* tokens, int64_t rows);
  // The registered block right after the block with serial `parent` (0: at position 0)
  // whose leading positions hold the longest prefix of tokens[0, n_tokens), and how many
  // positions that is (rows 0: none).
  KvRows longest_next(uint64_t parent, const int32_t* tokens, int64_t n_tokens) const;

  size_t size() const { return by_key_.size(); }

 private:
  struct Entry {
    uint64_t serial = 0;  // 0: not registered
    uint64_t parent = 0;
    uint64_t key = 0;              // in by_key_ (full blocks only)
    std::vector<int32_t> tokens;   // block_size of them, or fewer for a partial block
  };
  void register_entry(int32_t block, uint64_t parent, uint64_t key, const int32_t* tokens, int64_t n);
  uint64_t key(uint64_t parent, const int32_t* tokens) const;
  bool holds(const Entry& e, uint64_t parent, const int32_t* tokens) const;
  void evict(int32_t block);

  KvCache& cache_;
  int64_t block_size_;
  std::unordered_map<uint64_t, int32_t> by_key_;                 // full blocks
  std::unordered_map<uint64_t, std::vector<int32_t>> by_parent_;  // every block, by its parent's serial
  std::vector<Entry> entries_;  // per block
  uint64_t next_serial_ = 1;
};

}  // namespace sy
