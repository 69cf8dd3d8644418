// Alpha-beta-gamma cost of every collective we run (Hockney's model as used by Thakur,
// Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH"):
// a message of n bytes costs α + nβ on a link, and reducing n bytes costs nγ. For p ranks and a
// buffer of n bytes (lg = log2; p' = largest power of two <= p; [c] = 1 if c else 0):
//
//   ring all-reduce           2(p-1)·α + 2(p-1)/p·nβ + (p-1)/p·nγ
//   recursive doubling        (lg p' + 2[p≠p'])·α + (lg p' + 2[p≠p'])·nβ + (lg p' + [p≠p'])·nγ
//   Rabenseifner              (2 lg p' + 2[p≠p'])·α + (2(p'-1)/p' + 2[p≠p'])·nβ + ((p'-1)/p' + [p≠p'])·nγ
//   ring reduce-scatter       (p-1)·α + (p-1)/p·nβ + (p-1)/p·nγ      (n = the whole input)
//   ring all-gather           (p-1)·α + (p-1)/p·nβ                   (n = the whole output)
//   binomial broadcast        ⌈lg p⌉·(α + nβ)
//   binomial reduce           ⌈lg p⌉·(α + nβ + nγ)
//   pairwise all-to-all       (p-1)·(α + n/p·β)                       (n = one rank's send buffer)
//   dissemination barrier     ⌈lg p⌉·α
//   hierarchical all-reduce   reduce inside each group (binomial, K = largest group, intra link)
//                             + all-reduce among the G group leaders (inter link)
//                             + broadcast inside each group (binomial, intra link)
// The non-power-of-two terms are the fold of collectives/algorithms/recursive_doubling.h: the
// extra ranks hand their whole buffer in before and get the result back after (2 messages of n).
//
// Flat algorithms on a topology with several groups are charged on its bottleneck link (slowest
// bandwidth, largest latency): with groups of consecutive ranks a ring or a butterfly step has
// some pair crossing groups, and a step ends when its slowest message does.
#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <span>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/netsim/topology.h"

namespace laconic {

// A predicted time split into its terms, in seconds.
struct Cost {
  double latency_s = 0;    // the α terms
  double bandwidth_s = 0;  // the β terms
  double reduce_s = 0;     // the γ terms
  double total() const { return latency_s + bandwidth_s + reduce_s; }
};

// γ, seconds per byte reduced (0: reduction is free, the usual assumption on GPUs).
struct CostOptions {
  double gamma_s_per_byte = 0;
  // The algorithm among the group leaders inside a hierarchical all-reduce.
  Algorithm hierarchical_inter = Algorithm::ring;
};

// Each formula above, for `bytes` bytes over `p` ranks on one link. p == 1 costs nothing.
Cost ring_all_reduce_cost(double bytes, int p, const LinkSpec& link, double gamma = 0);
Cost recursive_doubling_all_reduce_cost(double bytes, int p, const LinkSpec& link, double gamma = 0);
Cost rabenseifner_all_reduce_cost(double bytes, int p, const LinkSpec& link, double gamma = 0);
Cost ring_reduce_scatter_cost(double bytes, int p, const LinkSpec& link, double gamma = 0);
Cost ring_all_gather_cost(double bytes, int p, const LinkSpec& link);
Cost tree_broadcast_cost(double bytes, int p, const LinkSpec& link);
Cost tree_reduce_cost(double bytes, int p, const LinkSpec& link, double gamma = 0);
Cost pairwise_all_to_all_cost(double bytes, int p, const LinkSpec& link);
Cost dissemination_barrier_cost(int p, const LinkSpec& link);

// The algorithms a backend can run, in order of preference on a tie.
inline constexpr Algorithm kAllReduceCandidates[] = {Algorithm::ring, Algorithm::recursive_doubling,
                                                     Algorithm::rabenseifner, Algorithm::hierarchical};

// The formulas applied to one topology. Construction summarises the topology (groups, largest
// group, bottleneck link) once, so queries allocate nothing: the chooser and the simulator call
// them per collective.
class CostModel {
 public:
  explicit CostModel(const Topology& topo, CostOptions opts = {});

  // All-reduce of `bytes` with algorithm `a` (ring, recursive_doubling, rabenseifner,
  // hierarchical; flat ones on the bottleneck link). native and auto_ are charged as the
  // cheapest of kAllReduceCandidates.
  Cost all_reduce(Algorithm a, double bytes) const;
  // What a tuned vendor library (NCCL, MPI) is assumed to achieve for collective `c`: the
  // cheapest all-reduce, binomial trees for broadcast/reduce, rings for reduce-scatter and
  // all-gather, pairwise exchange for all-to-all, dissemination for the barrier, all flat ones
  // on the bottleneck link. `bytes` as in the formulas above (barrier: ignored).
  Cost native(Collective c, double bytes) const;
  // The candidate with the lowest predicted all-reduce time (hierarchical is skipped with one
  // group or one rank per group: it would only add steps). The earlier candidate wins a tie.
  Algorithm choose(double bytes, std::span<const Algorithm> candidates = kAllReduceCandidates) const;

  int size() const { return p_; }
  int groups() const { return groups_; }
  int group_size() const { return group_size_; }
  const LinkSpec& flat_link() const { return flat_; }

 private:
  Cost flat(Algorithm a, double bytes, int p, const LinkSpec& link) const;

  CostOptions opts_;
  int p_, groups_, group_size_;
  LinkSpec intra_, inter_, flat_;
};

// One-shot conveniences over CostModel.
Cost hierarchical_all_reduce_cost(double bytes, const Topology& topo, const CostOptions& opts = {});
Cost all_reduce_cost(Algorithm a, double bytes, const Topology& topo, const CostOptions& opts = {});
Cost native_cost(Collective c, double bytes, const Topology& topo, const CostOptions& opts = {});

struct ChooserOptions {
  std::vector<Algorithm> candidates{std::begin(kAllReduceCandidates), std::end(kAllReduceCandidates)};
  CostOptions cost;
};

// The candidate with the lowest predicted all-reduce time for `bytes` on `topo`.
Algorithm choose_all_reduce(const Topology& topo, std::size_t bytes, const ChooserOptions& opts = {});
// For Communicator::set_algorithm_chooser (with set_algorithm(Algorithm::auto_)): the model and
// options are captured by value, so the chooser outlives its arguments and allocates nothing.
std::function<Algorithm(std::size_t)> make_all_reduce_chooser(const Topology& topo, ChooserOptions opts = {});

}  // namespace laconic
