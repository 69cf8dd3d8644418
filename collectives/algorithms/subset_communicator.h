// A view of a subset of a transport's ranks as a communicator of its own, so the existing
// algorithm classes (RingReduceScatter, TreeReduce, BroadcastTree, ...) run unchanged over, say,
// the members of one node or the leaders of all nodes: rank i of the view is world rank
// members[i], and its point-to-point calls go through the parent's counted send/recv, so every
// byte is counted once, on the parent. Only the members call into a view; the others never
// construct one. Construction allocates nothing (the member list is the caller's).
#pragma once

#include <span>
#include <string>

#include "collectives/communicator.h"

namespace laconic {

class SubsetCommunicator final : public Communicator {
 public:
  // `members`: distinct world ranks in the view's rank order; must contain parent.rank().
  SubsetCommunicator(Transport& parent, std::span<const int> members);
  ~SubsetCommunicator() override { stop_async(); }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string backend() const override { return parent_.backend(); }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

 private:
  Transport& parent_;
  std::span<const int> members_;
  int rank_ = -1;
};

}  // namespace laconic
