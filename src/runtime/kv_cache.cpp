#include "runtime/kv_cache.h"

namespace sy {

KvCache::KvCache(int n_layer, int64_t n_ctx, int64_t k_dim, int64_t v_dim, int n_seq)
    : n_layer_(n_layer), n_seq_(n_seq), n_ctx_(n_ctx), k_dim_(k_dim), v_dim_(v_dim),
      k_(static_cast<size_t>(n_layer) * n_seq * n_ctx * k_dim),
      v_(static_cast<size_t>(n_layer) * n_seq * n_ctx * v_dim) {}

cpu::KvView KvCache::view(int layer, int seq) const {
  return {&k_[index(layer, seq, 0, k_dim_)], &v_[index(layer, seq, 0, v_dim_)], k_dim_, v_dim_};
}

}  // namespace sy
