// Replicas beyond a periodic strategy's communicator: elastic training (framework/elastic) runs
// each replica as its own process (its ranks in one communicator, as usual) and reduces every
// outer sync's pseudo-gradient across the replicas alive at that sync through a ReplicaGroup.
//
// PeriodicAveraging calls it on the replica's rank 0 only, after averaging the pseudo-gradient
// over the replica's ranks (dense fp32: the replica's own links), and broadcasts the result to
// its other ranks. The group forms the sync's quorum, runs `reduce` (the strategy's reducer over
// the buckets) on the quorum's communicator, and leaves in `delta` the mean of the quorum's
// pseudo-gradients weighted by the examples each replica processed since its previous sync.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "core/state.h"

namespace laconic {

struct ReplicaSync {
  std::int64_t step = 0;         // the step whose sync this is
  int fragment = 0;              // which fragment (streaming DiLoCo), 0 otherwise
  std::int64_t local_steps = 0;  // inner steps since this fragment's previous sync
  double share = 1;              // the fragment's share of the parameters (its sync carries that much of the steps)
  std::span<float> delta;        // in: this replica's pseudo-gradient; out: the quorum's weighted mean
  std::span<const float> anchor; // theta_global of the fragment (identical on every replica in step)
  // The reducer's state (error feedback): a failed attempt's reduction may have changed it, so the
  // group restores it, and `delta`, before retrying with the replicas left.
  std::vector<StateTensor> reducer_state;
  // The strategy's reduction (an average over the communicator's ranks) of `delta`, in buckets.
  std::function<void(Communicator&)> reduce;
};

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  // Throws when this replica can no longer take part (framework/elastic: ReplicaDropped).
  virtual void reduce(ReplicaSync& sync) = 0;
};

}  // namespace laconic
