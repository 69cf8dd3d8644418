// Goodput under failures, in simulation: `trainer simulate RUN_DIR --failures mtbf=2h,restart=10m`.
// The run's replayed step time (framework/train/simulate.h) is replayed again with its hosts (its
// ranks) failing at seeded random times, under two policies:
//   data parallel, checkpoint-restart: any host's failure stops the job; the steps since the last
//     checkpoint are lost, and the job goes on once every host is back (restart_s after it failed);
//   elastic periodic training (framework/elastic): a failed host takes its replica (its group of
//     the run's [network], or itself without groups) out; the replica's inner steps since its last
//     sync are lost, it is back restart_s later and rejoins at the next sync with a member's state,
//     contributing again from the sync after; the others go on (the first sync without it waits
//     elastic.join_timeout_s for it).
// Goodput: the useful share of the hosts' time. Data parallel: steps x step time / wall time.
// Elastic: replica-steps that reached theta_global x step time / (replicas x wall time).
// Each host's failures are a Poisson process (exponential times between failures, mean mtbf_s)
// drawn from the seed; the figures are means over `trials` seeds (seed, seed + 1, ...).
#pragma once

#include <cstdint>
#include <string>

namespace laconic {

struct FailureModel {
  double mtbf_s = 0;              // mean time between failures of one host
  double restart_s = 0;           // from a failure to the host being back
  std::uint64_t seed = 1;
  int trials = 20;
  std::int64_t checkpoint_every = 0;  // data parallel's checkpoints, in steps (0: the run's, else the period)
  std::int64_t period = 0;            // elastic's sync period in steps (0: the run's strategy's)
  std::int64_t steps = 0;             // the job's length at the replayed step time (0: the run's steps)
  int replicas = 0;                   // elastic replicas (0: the run's [network] groups, else one per host)
};

// "mtbf=2h,restart=10m[,seed=N][,trials=N][,checkpoint_every=N][,period=N][,steps=N][,replicas=N]" (durations as in
// recipes: "90s", "3h50m", or seconds). Throws InputError naming --failures and the key.
FailureModel parse_failures(const std::string& spec);

struct FailureRun {
  int hosts = 0, replicas = 0;
  std::int64_t steps = 0, period = 0, checkpoint_every = 0;
  double step_s = 0;           // the run's replayed time per step
  double join_timeout_s = 0;
};

struct GoodputResult {
  double failures = 0;                       // per trial, mean (the same for both policies)
  double wall_dp_s = 0, wall_elastic_s = 0;  // means
  double goodput_dp = 0, goodput_elastic = 0;
  double goodput_dp_std = 0, goodput_elastic_std = 0;
  double lost_dp_steps = 0;                  // re-run after rollbacks, mean
  double lost_elastic_replica_steps = 0;     // inner steps that never reached theta_global, mean
};

GoodputResult simulate_failures(const FailureModel& model, const FailureRun& run);

}  // namespace laconic
