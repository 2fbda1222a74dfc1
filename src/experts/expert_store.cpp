#include "experts/expert_store.h"

#include "formats/gguf_reader.h"
#include "kernels/cpu/weight_prep.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace sy {
namespace {

// Slice e of a 3-D expert tensor [cols, rows, n_expert].
WeightMatrix slice(const WeightMatrix& all, int64_t rows, int e) {
  WeightMatrix w = all;
  w.rows = rows;
  w.data = all.data + w.bytes() * static_cast<size_t>(e);
  return w;
}

}  // namespace

std::unique_ptr<ResidentExpertStore> ResidentExpertStore::from_gguf(const GgufFile& f, const HParams& hp,
                                                                    WeightArena& arena, ThreadPool& pool) {
  auto prep = [&](const WeightMatrix& w) {
    WeightMatrix p = cpu::prepare_weight(w, arena, pool);
    if (p.data != w.data) f.drop_pages(w.data, w.bytes());
    return p;
  };
  auto store = std::make_unique<ResidentExpertStore>();
  store->experts_.resize(hp.n_layer);
  const int64_t d = hp.n_embd, ff = hp.n_ff_exp;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (!hp.layer_is_moe(il)) continue;
    const std::string p = "blk." + std::to_string(il) + ".";
    auto& layer = store->experts_[il];
    if (f.find_tensor(p + "ffn_gate_exps.weight") || !f.find_tensor(p + "ffn_gate.0.weight")) {
      WeightMatrix gate = prep(bind_matrix3(f, p + "ffn_gate_exps.weight", d, ff, hp.n_expert));
      WeightMatrix up = prep(bind_matrix3(f, p + "ffn_up_exps.weight", d, ff, hp.n_expert));
      WeightMatrix down = prep(bind_matrix3(f, p + "ffn_down_exps.weight", ff, d, hp.n_expert));
      for (int e = 0; e < hp.n_expert; ++e) {
        layer.push_back({slice(gate, ff, e), slice(up, ff, e), slice(down, d, e)});
      }
    } else {
      for (int e = 0; e < hp.n_expert; ++e) {
        const std::string s = "." + std::to_string(e) + ".weight";
        layer.push_back({prep(bind_matrix(f, p + "ffn_gate" + s, d, ff)), prep(bind_matrix(f, p + "ffn_up" + s, d, ff)),
                         prep(bind_matrix(f, p + "ffn_down" + s, ff, d))});
      }
    }
  }
  return store;
}

}  // namespace sy
