#include "parallel/communicator.h"

#include <cstring>
#include <string>

#include "base/error.h"

namespace sy {

void LocalCommunicator::all_gather(const void* send, size_t bytes, void* recv) {
  if (send != recv) std::memmove(recv, send, bytes);
}

void LocalCommunicator::all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                                     const std::vector<int64_t>& recv_counts, size_t item_bytes) {
  if (send_counts.size() != 1 || recv_counts.size() != 1 || send_counts[0] != recv_counts[0]) {
    throw Error("all_to_all_v: a single rank sends exactly what it receives (one count each)");
  }
  if (send != recv) std::memmove(recv, send, static_cast<size_t>(send_counts[0]) * item_bytes);
}

void LocalCommunicator::broadcast(void*, size_t, int root) {
  if (root != 0) throw Error("broadcast: root " + std::to_string(root) + " does not exist (one rank)");
}

}  // namespace sy
