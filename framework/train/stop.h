// Stopping a run early and cleanly (preemption). While a SignalStop exists, SIGTERM (how
// schedulers preempt), SIGINT (Ctrl-C) and SIGUSR1 only record the signal: every rank finishes the
// step it is in, the ranks agree on the step through the control communicator (one 4-byte
// all-reduce after each step), write a checkpoint of it, and the run ends with summary.json's
// "stopped": "signal". A second signal ends the process at once (the signal's default action).
// train.time_limit stops the same way on its own, by rank 0's clock, one mean step before the limit.
#pragma once

#include <string>

namespace laconic {

class SignalStop {
 public:
  // Installs the handlers (SA_RESTART: system calls the signal interrupts resume); the previous
  // handlers come back on destruction. One at a time per process.
  SignalStop();
  ~SignalStop();
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  // The first signal caught since construction (0: none). Async-signal-safe to read.
  static int received();
};

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string signal_name(int sig);

}  // namespace laconic
