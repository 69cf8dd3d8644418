#include "collectives/algorithms/subset_communicator.h"

#include "framework/core/check.h"

namespace laconic {

SubsetCommunicator::SubsetCommunicator(Transport& parent, std::span<const int> members)
    : parent_(parent), members_(members) {
  for (std::size_t i = 0; i < members.size(); ++i)
    if (members[i] == parent.rank()) rank_ = static_cast<int>(i);
  LC_CHECK(rank_ >= 0, "rank ", parent.rank(), " is not a member of this subset communicator");
  forwards_messages();
}

void SubsetCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  parent_.send(data, bytes, members_[static_cast<std::size_t>(peer)]);
}

void SubsetCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  parent_.recv(data, bytes, members_[static_cast<std::size_t>(peer)]);
}

void SubsetCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                     std::size_t recv_bytes, int from) {
  parent_.sendrecv(send_data, send_bytes, members_[static_cast<std::size_t>(to)], recv_data, recv_bytes,
                   members_[static_cast<std::size_t>(from)]);
}

}  // namespace laconic
