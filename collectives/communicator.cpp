#include "collectives/communicator.h"

#include <cstdio>
#include <cstring>

#include "collectives/algorithms/barrier_dissemination.h"
#include "collectives/algorithms/broadcast_tree.h"
#include "collectives/algorithms/hierarchical.h"
#include "collectives/algorithms/pairwise_alltoall.h"
#include "collectives/algorithms/rabenseifner.h"
#include "collectives/algorithms/recursive_doubling.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/tree_reduce.h"
#include "framework/core/check.h"

namespace laconic {

Communicator::Communicator() = default;

Communicator::Communicator(SharePolicy, Communicator& inner) : policy_(inner.policy_) {}

Communicator::~Communicator() {
  if (async_) {
    // A backend forgot stop_async(): joining now may call into a destroyed backend.
    std::fprintf(stderr, "laconic: Communicator destroyed with a running communication thread\n");
    stop_async();
  }
}

void Communicator::stop_async() { async_.reset(); }

AsyncQueue& Communicator::async() {
  if (!async_) async_ = std::make_unique<AsyncQueue>([this] { on_async_thread_start(); });
  return *async_;
}

void Communicator::run_async(Work& work, std::function<void()> op) { async().run(work, std::move(op)); }

void Communicator::reserve_async(std::size_t ops) { async().reserve(ops); }

void Communicator::drain() {
  if (async_) async_->drain();
}

void Communicator::wait_all() { drain(); }

std::span<std::byte> Communicator::scratch(std::size_t bytes, int slot) {
  auto& s = scratch_[slot];
  if (s.size() < bytes) s.resize(bytes);
  return {s.data(), bytes};
}

// ---- counting ----

int Communicator::tier_to(int peer) const {
  const std::vector<int>& g = policy_->groups;
  if (g.empty()) return 0;
  return g[static_cast<std::size_t>(rank())] == g[static_cast<std::size_t>(peer)] ? 0 : 1;
}

void Communicator::count_sent(int peer, std::uint64_t bytes, std::uint64_t messages) {
  Counters& c = tiers_[tier_to(peer)];
  c.sent.fetch_add(bytes, std::memory_order_relaxed);
  c.messages.fetch_add(messages, std::memory_order_relaxed);
}

void Communicator::count_recv(int peer, std::uint64_t bytes) {
  tiers_[tier_to(peer)].recv.fetch_add(bytes, std::memory_order_relaxed);
}

void Communicator::count(std::uint64_t sent, std::uint64_t recv, std::uint64_t messages) {
  const int p = size(), r = rank();
  count_sent((r + 1) % p, sent, messages);
  count_recv((r + p - 1) % p, recv);
}

// ---- point-to-point ----

namespace {
void check_peer(const Communicator& c, int peer) {
  LC_CHECK(peer >= 0 && peer < c.size(), "rank ", c.rank(), ": peer ", peer, " outside a world of ",
           c.size(), " ranks");
}
void check_root(const Communicator& c, int root) {
  LC_CHECK(root >= 0 && root < c.size(), "root ", root, " outside a world of ", c.size(), " ranks");
}
}  // namespace

void Communicator::send(const void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  drain();
  do_send(data, bytes, peer);
  count_sent(peer, bytes, 1);
}

void Communicator::recv(void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  drain();
  do_recv(data, bytes, peer);
  count_recv(peer, bytes);
}

void Communicator::sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                            std::size_t recv_bytes, int from) {
  check_peer(*this, to);
  check_peer(*this, from);
  drain();
  do_sendrecv(send_data, send_bytes, to, recv_data, recv_bytes, from);
  count_sent(to, send_bytes, 1);
  count_recv(from, recv_bytes);
}

// ---- collectives: argument checks, then the (possibly native) implementation ----

void Communicator::all_reduce(Buf data, ReduceOp op) {
  drain();
  do_all_reduce(data, op);
}

void Communicator::reduce(Buf data, ReduceOp op, int root) {
  check_root(*this, root);
  drain();
  do_reduce(data, op, root);
}

void Communicator::reduce_scatter(CBuf send, Buf recv, ReduceOp op) {
  LC_CHECK(send.dtype == recv.dtype && send.count == recv.count * static_cast<std::size_t>(size()),
           "reduce_scatter: send must hold size() blocks of recv.count elements; got ", send.count,
           " and ", recv.count, " for ", size(), " ranks");
  drain();
  do_reduce_scatter(send, recv, op);
}

void Communicator::all_gather(CBuf send, Buf recv) {
  LC_CHECK(send.dtype == recv.dtype && recv.count == send.count * static_cast<std::size_t>(size()),
           "all_gather: recv must hold size() blocks of send.count elements; got ", send.count,
           " and ", recv.count, " for ", size(), " ranks");
  drain();
  do_all_gather(send, recv);
}

void Communicator::all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  LC_CHECK(counts.size() == static_cast<std::size_t>(size()), "all_gather_v: ", counts.size(),
           " counts for ", size(), " ranks");
  std::size_t total = 0;
  for (auto c : counts) total += c;
  LC_CHECK(send.dtype == recv.dtype && send.count == counts[static_cast<std::size_t>(rank())] &&
               recv.count == total,
           "all_gather_v: rank ", rank(), " sends ", send.count, " elements (counts say ",
           counts[static_cast<std::size_t>(rank())], "), recv holds ", recv.count, " (counts sum to ", total, ")");
  drain();
  do_all_gather_v(send, recv, counts);
}

void Communicator::all_to_all(CBuf send, Buf recv) {
  drain();
  do_all_to_all(send, recv);
}

void Communicator::broadcast(Buf data, int root) {
  check_root(*this, root);
  drain();
  do_broadcast(data, root);
}

void Communicator::barrier() {
  drain();
  do_barrier();
}

// ---- async forms: the same calls, run on the communication thread ----

std::shared_ptr<Work> Communicator::all_reduce_async(Buf data, ReduceOp op) {
  return async().submit([this, data, op] { all_reduce(data, op); });
}

std::shared_ptr<Work> Communicator::reduce_scatter_async(CBuf send, Buf recv, ReduceOp op) {
  return async().submit([this, send, recv, op] { reduce_scatter(send, recv, op); });
}

std::shared_ptr<Work> Communicator::all_gather_async(CBuf send, Buf recv) {
  return async().submit([this, send, recv] { all_gather(send, recv); });
}

std::shared_ptr<Work> Communicator::broadcast_async(Buf data, int root) {
  return async().submit([this, data, root] { broadcast(data, root); });
}

// ---- default implementations: our algorithms over point-to-point ----

void Communicator::do_all_reduce(Buf data, ReduceOp op) {
  Algorithm a = policy_->algorithm;
  if (a == Algorithm::auto_) {
    // Without a cost model, MPICH's fixed switch point: recursive doubling (lg p latencies) below
    // 2 KiB, where latency dominates; the bandwidth-optimal ring above (docs/algorithms.md).
    constexpr std::size_t kShortMessage = 2048;
    a = policy_->chooser ? policy_->chooser(data.bytes()) : data.bytes() < kShortMessage ? Algorithm::recursive_doubling : Algorithm::ring;
  }
  const int n = size();
  switch (a) {
    case Algorithm::ring:
    case Algorithm::native:  // a backend without a native all-reduce: ours is its native one
      RingAllReduce(*this, data, op, scratch(RingAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::recursive_doubling:
      RecursiveDoublingAllReduce(*this, data, op,
                                 scratch(RecursiveDoublingAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::rabenseifner:
      RabenseifnerAllReduce(*this, data, op, scratch(RabenseifnerAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::hierarchical:
      HierarchicalAllReduce(*this, data, op, scratch(HierarchicalAllReduce::scratch_bytes(data.count, data.dtype, n)),
                            policy_->groups).run();
      return;
    default:
      LC_CHECK(false, "all-reduce algorithm '", name_of(a), "' is not available");
  }
}

void Communicator::do_reduce(Buf data, ReduceOp op, int root) {
  TreeReduce(*this, data, op, root, scratch(2 * data.bytes())).run();
}

void Communicator::do_reduce_scatter(CBuf send, Buf recv, ReduceOp op) {
  // Work on a copy of `send` (the ring folds in place), then take this rank's reduced block.
  const int n = size(), r = rank();
  std::span<std::byte> work = scratch(send.bytes(), 1);
  if (send.bytes()) std::memcpy(work.data(), send.data, send.bytes());
  const Buf all{work.data(), send.count, send.dtype};
  const RingChunks chunks{send.count, n};
  RingReduceScatter(*this, all, chunks, op, scratch(chunks.max_size() * dtype_size(send.dtype))).run();
  const Buf own = all.sub(chunks.offset(r), chunks.size(r));
  if (op == ReduceOp::avg) finish_avg(own.data, own.count, own.dtype, n);
  if (own.bytes()) std::memcpy(recv.data, own.data, own.bytes());
}

void Communicator::do_all_gather(CBuf send, Buf recv) {
  const RingChunks chunks{recv.count, size()};
  const Buf own = recv.sub(chunks.offset(rank()), chunks.size(rank()));
  // memmove: `send` may be this rank's own block of `recv` (in-place all-gather).
  if (own.bytes()) std::memmove(own.data, send.data, own.bytes());
  RingAllGather(*this, recv, chunks).run();
}

void Communicator::do_all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  const RingChunks chunks{recv.count, size(), counts};
  const Buf own = recv.sub(chunks.offset(rank()), chunks.size(rank()));
  // memmove: `send` may be this rank's own block of `recv` (in-place all-gather).
  if (own.bytes()) std::memmove(own.data, send.data, own.bytes());
  RingAllGather(*this, recv, chunks).run();
}

void Communicator::do_all_to_all(CBuf send, Buf recv) { PairwiseAllToAll(*this, send, recv).run(); }

void Communicator::do_broadcast(Buf data, int root) { BroadcastTree(*this, data.data, data.bytes(), root).run(); }

void Communicator::do_barrier() { BarrierDissemination(*this).run(); }

}  // namespace laconic
