#include "base/worker_signals.h"

#include <pthread.h>
#include <signal.h>

namespace sy {

void block_stop_signals_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace sy
