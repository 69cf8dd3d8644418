// `trainer plan`: the predicted all-reduce time per step of a model's gradients, per world size
// and algorithm, from the alpha-beta model (cost_model.h), with its bandwidth and latency terms
// shown apart, plus a small-message table where the latency term dominates.
//
// The cluster is nodes of `ranks_per_group` ranks: a world that fits in one node uses the intra
// link, a larger one groups of consecutive ranks whose flat algorithms are charged on the
// bottleneck (inter) link; hierarchical all-reduce is listed when there are several groups.
//
// The defaults reproduce the seed table of docs/references.md ("Collectives"): 7B bf16 parameters
// (S = 14 GB), ring bandwidth term 2(N-1)/N·S/B:
//   N = 8 on 450 GB/s:   1.75·14e9/450e9    = 0.0544 s  (seed: 0.05)
//   N = 64 on 50 GB/s:   1.96875·14e9/50e9  = 0.5513 s  (seed: 0.55)
//   N = 1024 on 50 GB/s: 1.99805·14e9/50e9  = 0.5595 s  (seed: 0.56)
// The seed is the bandwidth term alone. Latency: the ring adds 2(N-1)·α, which must stay under
// about 2.7 us per step for the N = 1024 row to still round to 0.56 (at α = 5 us it is 0.57);
// the defaults take α = 1 us inside a node (NVLink class) and 2 us between nodes (InfiniBand).
#pragma once

#include <ostream>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/netsim/cost_model.h"

namespace laconic {

struct PlanOptions {
  double parameters = 7e9;          // gradient elements all-reduced per step
  DType dtype = DType::bf16;
  std::vector<int> world_sizes = {8, 64, 1024};
  int ranks_per_group = 8;          // ranks sharing the intra link (GPUs per node)
  LinkSpec intra{450e9, 1e-6};      // NVLink-class: 450 GB/s, 1 us
  LinkSpec inter{50e9, 2e-6};       // 400 Gbit/s InfiniBand: 50 GB/s, 2 us
  double gamma_s_per_byte = 0;      // reduction cost; 0 = free (GPU reductions hide under the wire)
  std::vector<Algorithm> algorithms{std::begin(kAllReduceCandidates), std::end(kAllReduceCandidates)};
  std::vector<double> small_message_bytes = {4096};  // latency table rows (empty: no table)
};

// One predicted all-reduce.
struct PlanRow {
  int world_size = 0;
  int groups = 1;
  double bytes = 0;
  Algorithm algorithm = Algorithm::ring;
  Cost cost;
  // nccl-tests bus bandwidth: S/t·2(N-1)/N, bytes per second (0 when N == 1).
  double busbw_Bps = 0;
};

// The cluster the plan assumes for world size n (see the header comment).
Topology plan_topology(const PlanOptions& opts, int n);
// Rows for every world size and algorithm (hierarchical only with several groups), for a
// message of `bytes` bytes.
std::vector<PlanRow> plan_rows(const PlanOptions& opts, double bytes);
// The gradient all-reduce size: parameters · dtype_size(dtype).
double plan_bytes(const PlanOptions& opts);
// Prints the gradient table, then one small-message table per small_message_bytes entry.
void print_plan(const PlanOptions& opts, std::ostream& os);

}  // namespace laconic
