#include "collectives/communicator.h"

#include "collectives/algorithms/barrier_dissemination.h"
#include "collectives/algorithms/broadcast_tree.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "framework/core/check.h"

namespace laconic {

namespace {
void check_peer(const Communicator& c, int peer) {
  LC_CHECK(peer >= 0 && peer < c.size(), "rank ", c.rank(), ": peer ", peer, " outside a world of ",
           c.size(), " ranks");
}
}  // namespace

void Communicator::send(const void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  do_send(data, bytes, peer);
  count(bytes, 0, 1);
}

void Communicator::recv(void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  do_recv(data, bytes, peer);
  count(0, bytes, 0);
}

void Communicator::sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                            std::size_t recv_bytes, int from) {
  check_peer(*this, to);
  check_peer(*this, from);
  do_sendrecv(send_data, send_bytes, to, recv_data, recv_bytes, from);
  count(send_bytes, recv_bytes, 1);
}

void Communicator::all_reduce(std::span<float> data, ReduceOp op) {
  RingAllReduce(*this, data, op, reduce_scratch_).run();
}

void Communicator::broadcast(void* data, std::size_t bytes, int root) {
  BroadcastTree(*this, data, bytes, root).run();
}

void Communicator::barrier() { BarrierDissemination(*this).run(); }

}  // namespace laconic
