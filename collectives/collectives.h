// Collectives over a Transport: one call described as a value (CollectiveCall), the algorithm
// policy (a fixed algorithm, or a chooser per message size), and Collectives, which runs our
// algorithm classes (collectives/algorithms/) for a call over any transport, in a fixed reduction
// order, so results are deterministic and identical on every rank.
//
// A Communicator (communicator.h) hands every collective to one virtual function as a
// CollectiveCall: a backend with native collectives (MPI, NCCL) implements them in one place, and
// a wrapper (the simulated network, device staging) changes one function, not one per kind.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "collectives/collective_kind.h"
#include "collectives/dtype.h"
#include "core/enum_names.h"

namespace laconic {

class Transport;

// Which algorithm a collective runs. `native` = the backend's own (MPI_Allreduce, NCCL, ...),
// `auto_` = chosen per call by the alpha-beta cost model (collectives/netsim/cost_model.h).
enum class Algorithm { native, ring, recursive_doubling, rabenseifner, hierarchical, auto_ };
inline constexpr std::array kAlgorithmNames{"native", "ring", "recursive_doubling", "rabenseifner", "hierarchical", "auto"};
constexpr std::span<const char* const> names(Algorithm) { return kAlgorithmNames; }
inline const char* name_of(Algorithm a) { return enum_name(a); }

// One collective call. In place (all_reduce, reduce, broadcast): `data` is the buffer and `send`
// is unused. Otherwise `send` is the input and `data` the output. `counts` (all_gather only)
// makes it variable: rank r contributes counts[r] elements.
struct CollectiveCall {
  Collective kind = Collective::barrier;
  Buf data;
  CBuf send;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  std::span<const std::size_t> counts;

  bool in_place() const {
    return kind == Collective::all_reduce || kind == Collective::reduce || kind == Collective::broadcast;
  }
  // The buffer whose element count bounds a native library's int counts.
  std::size_t elements() const { return in_place() || kind == Collective::all_gather ? data.count : send.count; }
};

// A backend's native collectives, one member function per kind (all_reduce_native(data, op), ...,
// barrier_native()), called for `c`: the one dispatch MPI and NCCL share. A backend declares
// `template <class B> friend void run_native(B&, const CollectiveCall&);` to keep them private.
template <class Backend>
void run_native(Backend& b, const CollectiveCall& c) {
  switch (c.kind) {
    case Collective::all_reduce: return b.all_reduce_native(c.data, c.op);
    case Collective::reduce: return b.reduce_native(c.data, c.op, c.root);
    case Collective::reduce_scatter: return b.reduce_scatter_native(c.send, c.data, c.op);
    case Collective::all_gather:
      if (c.counts.empty()) return b.all_gather_native(c.send, c.data);
      return b.all_gather_v_native(c.send, c.data, c.counts);
    case Collective::all_to_all: return b.all_to_all_native(c.send, c.data);
    case Collective::broadcast: return b.broadcast_native(c.data, c.root);
    case Collective::barrier: return b.barrier_native();
  }
}

// The settings collectives run with; a wrapper and the communicator it wraps may share one.
struct CollectivePolicy {
  Algorithm algorithm = Algorithm::ring;
  std::function<Algorithm(std::size_t bytes)> chooser;  // for auto_; none: a fixed size rule
};

class Collectives {
 public:
  Collectives() : policy_(std::make_shared<CollectivePolicy>()) {}
  explicit Collectives(std::shared_ptr<CollectivePolicy> shared) : policy_(std::move(shared)) {}

  CollectivePolicy& policy() { return *policy_; }
  const CollectivePolicy& policy() const { return *policy_; }
  const std::shared_ptr<CollectivePolicy>& shared_policy() const { return policy_; }

  // Runs `call` with our algorithms over `t`'s point-to-point exchange (Algorithm::native means
  // our default here: the ring). Scratch is kept across calls: steady state allocates nothing.
  void run(Transport& t, const CollectiveCall& call);
  // The algorithm an all-reduce of `bytes` runs (the policy's, auto_ resolved by size).
  Algorithm all_reduce_algorithm(std::size_t bytes) const;

 private:
  void all_reduce(Transport& t, Buf data, ReduceOp op);
  std::span<std::byte> scratch(std::size_t bytes, int slot = 0);

  std::shared_ptr<CollectivePolicy> policy_;
  std::vector<std::byte> scratch_[2];
};

}  // namespace laconic
