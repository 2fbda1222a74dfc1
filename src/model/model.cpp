#include "model/model.h"

namespace sy {

std::unique_ptr<Model> Model::load(const std::string& path) {
  auto m = std::make_unique<Model>();
  m->file_ = GgufFile::open(path);
  m->hp_ = HParams::from_gguf(*m->file_);
  m->weights_ = ModelWeights::bind(*m->file_, m->hp_);
  m->experts_ = ResidentExpertStore::from_gguf(*m->file_, m->hp_);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  return m;
}

}  // namespace sy
