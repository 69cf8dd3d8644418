// Asynchronous DiLoCo (Liu et al., "Asynchronous Local-SGD Training for Language Modeling", arXiv
// 2401.09135): replicas of different speeds push their pseudo-gradients to a server as they finish
// a round, and the server applies each arrival at once, with Delayed Nesterov (DN) outer momentum
// and, optionally, Dynamic Local Updates (DyLU). The rule is the one of HALoS's reimplementation of
// the paper's Algorithm 3 (github utnslab/halos, DelayedNesterovOptimizer) with its c = 0 default.
//
// The server. Every rank holds the same copy of it (no parameter server: the arrivals reach every
// rank by a collective): theta (the outer parameters), the DN momentum m, the buffer D of the
// window's arrivals and the arrival count t. On arrival of a pseudo-gradient g (anchor - theta_r,
// the replica's round against the server parameters it started from):
//   D <- D + g / N
//   t + 1 a multiple of N:  m <- beta m + D;  theta <- theta - eps ((1 - cN + c) beta m + g / N);  D <- 0
//   otherwise:              theta <- theta - eps (c beta m + g / N)
// (N = window arrivals per momentum update, c = activation in [0, 1/N], eps = outer_lr, beta =
// momentum). With c = 0 a window of N arrivals adds up to one Nesterov step on their mean, which is
// DiLoCo's outer step when the N arrivals are the N replicas' of one round. `delayed_nesterov =
// false` buffers instead: nothing moves until the N-th arrival, then DiLoCo's outer Nesterov step
// (torch SGD) on D: equal speeds and N = replicas make it DiLoCo bit for bit. The replica that
// arrived restarts from the server's theta (its new anchor) at once; the others keep going.
//
// Speeds. Every rank steps in lockstep (the step loop's steps are ticks of the fastest replica's
// step time), and a replica f times slower computes on only 1/f of them: replica r with slowdown
// f_r (hundredths, q_r = 100 f_r) has done L_r(u) = floor((u + 1) * 100 / q_r) local steps after
// tick u (u = step - first_step) and computes at tick u when L_r(u) > L_r(u - 1); on the others the
// step loop skips its forward, backward and optimizer (computes() false: it still takes its batch
// of the data order, which it leaves unseen). It arrives after its H_r-th local step of a round:
// H_r = period, or with DyLU H_r = max(1, floor(period * f_min / f_r)) (each replica's steps in
// proportion to its speed, so all take about as long). Within a tick arrivals are ordered by when
// their last step finished (L_r q_r), then by rank, and applied in runs that end at the window's
// boundaries: a run of k arrivals is one collective (k = 1: a broadcast from the replica that
// arrived; k > 1: an all-reduce of the arrivals' sum, the others contributing zeros), and every
// replica of the run restarts from the server's theta after it. The speeds are
//   "network":  the recipe's [network] (straggler_slowdown for network.stragglers, else 1), so the
//               arrival order is the simulated one and a run is deterministic for a recipe and seed;
//   "measured": calibrated from the run: every replica computes every tick of the first round, then
//               each replica's median forward and backward time over it, relative to the fastest's
//               and rounded to 0.1, sets its slowdown (kept in checkpoints).
// At the run's last step every replica arrives (a round cut short pushes what it did) and adopts
// the server's theta, so the run ends with the server's model on every rank.
//
// Bytes: per arrival run, a broadcast (k = 1) or all-reduce (k > 1) of 4n bytes; with equal speeds
// one all-reduce per period, DiLoCo's. Checkpoints hold what is in flight: the replica's anchor
// (the version its round started from), the server's theta, D and m, and measured speeds; t and
// the schedule follow from the step, so a resumed run is bit for bit the uninterrupted one. Host
// buffers; not with sync.intra, phases or elastic replicas.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "framework/sync/sync_strategy.h"
#include "optimizers/sgd.h"

namespace laconic {

enum class ReplicaSpeeds { network, measured };
inline constexpr std::array kReplicaSpeedNames{"network", "measured"};
constexpr std::span<const char* const> names(ReplicaSpeeds) { return kReplicaSpeedNames; }

struct AsyncDilocoOptions {
  std::int64_t period = 32;      // H: local steps per round (the fastest replica's, with DyLU)
  double outer_lr = 0.7;         // eps
  double momentum = 0.9;         // beta
  bool delayed_nesterov = true;  // DN; false: DiLoCo's Nesterov step every N-th arrival
  std::int64_t window = 0;       // N: arrivals per momentum update; 0 = the number of replicas
  double activation = 0.0;       // c in [0, 1/N]: the momentum's share applied at every arrival (DN)
  bool dylu = false;             // each replica's H in proportion to its speed
  ReplicaSpeeds speeds = ReplicaSpeeds::network;
  // Set by the factory, not recipe keys: each rank's slowdown (>= 1; empty: all 1) for "network",
  // where this strategy's steps start, and the run's last step (-1: none).
  std::vector<double> slowdown;
  std::int64_t first_step = 0;
  std::int64_t last_step = -1;
  bool operator==(const AsyncDilocoOptions&) const = default;
};

class AsyncDiloco final : public SyncStrategy {
 public:
  explicit AsyncDiloco(AsyncDilocoOptions opts);
  ~AsyncDiloco() override;
  void after_backward(std::int64_t /*step*/) override {}
  void step_computed(std::int64_t step, double seconds) override;
  bool after_update(std::int64_t step) override;
  bool computes(std::int64_t step) const override;
  bool reduces_gradients(std::int64_t /*step*/) const override { return false; }
  bool averages_params(std::int64_t step) const override;
  bool ranks_meet(std::int64_t step) const override { return averages_params(step); }
  bool replicas_agree_after(std::int64_t step) const override { return step == opts_.last_step; }
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_; }
  // "async.anchor" (this replica's), "async.server" (theta), "async.buffer" (D), "async.momentum"
  // (m, DN) or "async.outer.momentum" (the buffered step's), and with measured speeds
  // "async.speeds" (q per rank; 0 until calibrated) and "async.calibration" (this rank's times).
  std::vector<StateTensor> state() override;

  // The schedule (valid once bound; measured speeds once calibrated): replica r's local steps
  // after tick u, its round length, and whether it arrives at tick u.
  std::int64_t local_steps(int r, std::int64_t u) const;
  std::int64_t round(int r) const;
  bool arrives(int r, std::int64_t u) const;
  // Each rank's slowdown in hundredths (100 = the fastest); measured: 0 until calibrated.
  std::span<const float> speeds() const { return q_; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  struct Arrival {
    std::int64_t finished;  // L_r q_r: when its last step finished, in hundredths of a tick
    int rank;
  };
  std::int64_t origin() const;  // the tick where speeds take effect (measured: after the first round)
  bool calibrating(std::int64_t u) const;
  void calibrate();
  std::int64_t arrivals_before(std::int64_t u) const;
  void apply(std::span<const Arrival> run, bool boundary);

  AsyncDilocoOptions opts_;
  int world_ = 1, me_ = 0;
  std::int64_t window_ = 1;
  std::vector<float> q_;            // per rank, hundredths (integers, exact in a float)
  std::vector<float> calibration_;  // measured: this rank's forward and backward seconds per tick of the first round
  std::vector<float> gathered_;     // measured: every rank's median (an all-reduce of one-hot rows)
  std::vector<float> anchor_, momentum_, sum_;
  ParamStore server_;            // params() = theta, grads() = D
  std::unique_ptr<Sgd> outer_;   // delayed_nesterov = false: the buffered Nesterov step
  std::vector<Arrival> arriving_;
  std::int64_t count_ = -1;      // arrivals applied (t); -1: to be derived from the schedule
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
