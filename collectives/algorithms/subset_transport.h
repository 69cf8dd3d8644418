// A view of a subset of a transport's ranks as a transport of its own, so the algorithm classes
// (RingReduceScatter, TreeReduce, BroadcastTree, ...) run unchanged over, say, the members of one
// node or the leaders of all nodes: rank i of the view is world rank members[i], and its
// point-to-point calls go through the parent's counted send/recv, so every byte is counted once,
// on the parent. Only the members call into a view; the others never construct one. Construction
// allocates nothing (the member list is the caller's). The same view with collectives on top (a
// strategy's reducer over one group) is SubsetCommunicator (collectives/subset_communicator.h).
#pragma once

#include <span>
#include <string>

#include "collectives/transport.h"
#include "core/check.h"

namespace laconic {

// Base: Transport, or a class derived from it (Communicator).
template <class Base>
class SubsetView : public Base {
 public:
  // `members`: distinct world ranks in the view's rank order; must contain parent.rank().
  SubsetView(Transport& parent, std::span<const int> members) : parent_(parent), members_(members) {
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i] == parent.rank()) rank_ = static_cast<int>(i);
    LC_CHECK(rank_ >= 0, "rank ", parent.rank(), " is not a member of this subset of ranks");
    this->forwards_messages();
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string backend() const override { return parent_.backend(); }
  int world_rank(int r) const override { return parent_.world_rank(world(r)); }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override { parent_.send(data, bytes, world(peer)); }
  void do_recv(void* data, std::size_t bytes, int peer) override { parent_.recv(data, bytes, world(peer)); }
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data, std::size_t recv_bytes,
                   int from) override {
    parent_.sendrecv(send_data, send_bytes, world(to), recv_data, recv_bytes, world(from));
  }

 private:
  int world(int peer) const { return members_[static_cast<std::size_t>(peer)]; }

  Transport& parent_;
  std::span<const int> members_;
  int rank_ = -1;
};

using SubsetTransport = SubsetView<Transport>;

}  // namespace laconic
