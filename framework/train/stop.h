// Stopping a run early and cleanly (preemption). While a SignalStop exists, SIGTERM (how
// schedulers preempt), SIGINT (Ctrl-C) and SIGUSR1 only record the signal: every rank finishes the
// step it is in, the ranks agree on the step through the control communicator (an 8-byte
// all-reduce, see StopAgreement), write a checkpoint of it, and the run ends with summary.json's
// "stopped": "signal". A second signal ends the process at once (the signal's default action).
// train.time_limit stops the same way on its own, by rank 0's clock, one mean step before the limit.
#pragma once

#include <cstdint>
#include <string>

namespace laconic {

// Why a run ends before its last step, as every rank agreed after a step (Session::agree_to_stop).
enum class StopReason { none, signal, time_limit };
struct Stop {
  StopReason reason = StopReason::none;
  int signal = 0;  // the signal caught (reason == signal)
  explicit operator bool() const { return reason != StopReason::none; }
  // The agreement's wire value and laconic.torch's: 0, the signal, or kTimeLimit (the ranks'
  // maximum: the time limit wins over a signal caught at the same step).
  static constexpr int kTimeLimit = 1 << 20;  // beyond every signal number
  int code() const { return reason == StopReason::time_limit ? kTimeLimit : signal; }
  static Stop from_code(int code);
};

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

// How often the ranks agree on stopping. The agreement is an all-reduce of the whole world on the
// control plane: across a wide-area link a round trip or more, which a step of DiLoCo's inner
// loop would otherwise pay every time. So it runs every step while it takes under kCheapS (any
// run inside one machine or datacenter: the stop comes at the very next step) or is cheap beside a
// step; otherwise every k steps, k chosen by rank 0 (and carried by the agreement itself, so every
// rank knows the next one) such that the agreements cost about kShare of the time between them, a
// signal is still acted on within kMaxGapS of steps at their mean pace (a stalled step delays it
// further), and the time limit is not overrun. A run whose last step comes first just ends. A
// simulated network ([network]) paces it by its own costs, so a recorded run agrees as a
// deployment there would. Asynchronous replicas agree only where they meet anyway (at arrivals:
// SyncStrategy::ranks_meet), a barrier within a round would hold the fast ones back every step.
struct StopAgreement {
  static constexpr double kCheapS = 0.01;
  static constexpr double kShare = 0.02;
  static constexpr double kMaxGapS = 1.0;
  // Steps until the next agreement, >= 1: agree_s the fastest agreement so far (0: none yet), step_s
  // the mean step (both on the simulated network where a run simulates one), wall_step_s the mean
  // step on this machine's clock, elapsed_s the loop's time so far by that clock, limit_s
  // train.time_limit (<= 0: none), lookahead the steps an agreement must see the limit ahead (to
  // the strategy's next meeting, SyncStrategy::ranks_meet).
  static std::int64_t interval(double agree_s, double step_s, double wall_step_s, double elapsed_s, double limit_s,
                               std::int64_t lookahead = 1);
};

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string signal_name(int sig);

}  // namespace laconic
