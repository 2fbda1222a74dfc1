// Worker threads block the signals that ask the process to stop, so that those always reach
// a thread that means to handle them. A process-directed signal goes to any one thread that
// does not block it: were that an I/O or compute worker (the expert store starts its readers
// while the model loads, before `serve` blocks the signals and starts its watcher), SIGTERM
// would end the server at once instead of letting it finish its requests, and SIGINT from a
// shell that ignores it for background jobs would be lost.
#pragma once

#include <signal.h>

namespace sy {

// SIGINT and SIGTERM: the signals that ask the process to stop.
sigset_t stop_signals();

// Blocks them in the calling thread; call first thing in a worker thread.
void block_stop_signals_in_this_thread();

}  // namespace sy
