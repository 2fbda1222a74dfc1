// `switchyard pack`: a copy of a GGUF model whose Q4_0 / Q8_0 weight matrices are stored in
// the CPU kernels' packed layout (kernels/cpu/packed.h). Loading such a file packs nothing,
// and the expert cache reads experts from it straight into their slots: without it every
// expert read from disk is repacked in memory (on a Zen 3 test machine 42-60 ms per token
// at a 50% cache, on the CPU cores the decode needs). Metadata and every other tensor are
// copied unchanged; packed tensors carry switchyard's own type numbers
// (formats/gguf_reader.h), which other GGUF readers refuse rather than misread.
#pragma once

#include <cstdint>
#include <string>

#include "base/thread_pool.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"

namespace sy {

// True for the tensors `pack` converts: Q4_0 / Q8_0 matrices (2-D, or 3-D expert stacks)
// not packed yet whose rows hold at least one 256-value group.
bool packs_tensor(const GgufTensorInfo& t);

struct PackStats {
  int64_t tensors = 0;
  int64_t packed = 0;         // tensors converted
  uint64_t packed_bytes = 0;  // their bytes
  uint64_t file_bytes = 0;
};

// Writes the packed copy of `in` to `out` (a different file). Throws sy::Error when `in`
// has nothing to pack (no such matrices, or packed already) or cannot be written.
PackStats write_packed_model(const std::string& in, const std::string& out, ThreadPool& pool,
                             const GgufWriter::Progress& progress = {});

}  // namespace sy
