#include "collectives/cuda/staging_communicator.h"

#include <cuda_runtime.h>

#include "framework/core/check.h"
#include "framework/core/device.h"
#include "framework/core/cuda/cuda_check.h"

namespace laconic {

StagingCommunicator::StagingCommunicator(Communicator& inner, int device)
    : Communicator(SharePolicy{}, inner), inner_(inner) {
  LC_CHECK(inner.memory() == Device::cpu, "StagingCommunicator wraps a host communicator; ", inner.backend(),
           " takes ", name_of(inner.memory()), " buffers");
  if (device >= 0) LC_CUDA_CHECK(cudaSetDevice(device));
  LC_CUDA_CHECK(cudaGetDevice(&device_));
}

StagingCommunicator::~StagingCommunicator() {
  stop_async();
  for (Pinned& p : pinned_)
    if (p.data) (void)cudaFreeHost(p.data);  // a destructor: nothing to do on error
}

void* StagingCommunicator::host(int slot, std::size_t bytes) {
  Pinned& p = pinned_[slot];
  if (bytes > p.capacity) {
    // Grown, never shrunk, contents not kept: the largest operation sets the size once.
    if (p.data) LC_CUDA_CHECK(cudaFreeHost(p.data));
    p.data = nullptr;
    p.capacity = 0;
    LC_CUDA_CHECK(cudaMallocHost(&p.data, bytes));
    p.capacity = bytes;
  }
  return p.data;
}

void StagingCommunicator::reserve(std::size_t bytes) {
  host(0, bytes);
  host(1, bytes);
}

void StagingCommunicator::on_async_thread_start() { LC_CUDA_CHECK(cudaSetDevice(device_)); }

void StagingCommunicator::prepare() {
  LC_CUDA_CHECK(cudaSetDevice(device_));
}

void* StagingCommunicator::stage_in(int slot, const void* device_src, std::size_t bytes) {
  void* h = host(slot, bytes);
  copy_bytes(h, Device::cpu, device_src, Device::cuda, bytes);
  return h;
}

void StagingCommunicator::stage_out(void* device_dst, const void* host_src, std::size_t bytes) {
  copy_bytes(device_dst, Device::cuda, host_src, Device::cpu, bytes);
}

template <class Op>
void StagingCommunicator::counted(Op op) {
  const ByteCounters before = inner_.bytes();
  op();
  const ByteCounters after = inner_.bytes();
  count(after.sent - before.sent, after.recv - before.recv, after.messages_sent - before.messages_sent);
}

// ---- point-to-point (the base class counts them, as the inner does) ----

void StagingCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  prepare();
  inner_.send(stage_in(0, data, bytes), bytes, peer);
}

void StagingCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  prepare();
  void* h = host(1, bytes);
  inner_.recv(h, bytes, peer);
  stage_out(data, h, bytes);
}

void StagingCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                      std::size_t recv_bytes, int from) {
  prepare();
  const void* s = stage_in(0, send_data, send_bytes);
  void* h = host(1, recv_bytes);
  inner_.sendrecv(s, send_bytes, to, h, recv_bytes, from);
  stage_out(recv_data, h, recv_bytes);
}

// ---- collectives: in, the inner's collective on the host copies, out ----

void StagingCommunicator::do_all_reduce(Buf data, ReduceOp op) {
  prepare();
  const Buf h{stage_in(0, data.data, data.bytes()), data.count, data.dtype};
  counted([&] { inner_.all_reduce(h, op); });
  stage_out(data.data, h.data, data.bytes());
}

void StagingCommunicator::do_reduce(Buf data, ReduceOp op, int root) {
  prepare();
  const Buf h{stage_in(0, data.data, data.bytes()), data.count, data.dtype};
  counted([&] { inner_.reduce(h, op, root); });
  if (rank() == root) stage_out(data.data, h.data, data.bytes());  // other ranks' data is unchanged
}

void StagingCommunicator::do_reduce_scatter(CBuf send, Buf recv, ReduceOp op) {
  prepare();
  const CBuf s{stage_in(0, send.data, send.bytes()), send.count, send.dtype};
  const Buf r{host(1, recv.bytes()), recv.count, recv.dtype};
  counted([&] { inner_.reduce_scatter(s, r, op); });
  stage_out(recv.data, r.data, recv.bytes());
}

void StagingCommunicator::do_all_gather(CBuf send, Buf recv) {
  prepare();
  // Separate host buffers: an in-place all-gather (send = this rank's block of recv) works too.
  const CBuf s{stage_in(0, send.data, send.bytes()), send.count, send.dtype};
  const Buf r{host(1, recv.bytes()), recv.count, recv.dtype};
  counted([&] { inner_.all_gather(s, r); });
  stage_out(recv.data, r.data, recv.bytes());
}

void StagingCommunicator::do_all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  prepare();
  const CBuf s{stage_in(0, send.data, send.bytes()), send.count, send.dtype};
  const Buf r{host(1, recv.bytes()), recv.count, recv.dtype};
  counted([&] { inner_.all_gather_v(s, r, counts); });
  stage_out(recv.data, r.data, recv.bytes());
}

void StagingCommunicator::do_all_to_all(CBuf send, Buf recv) {
  prepare();
  const CBuf s{stage_in(0, send.data, send.bytes()), send.count, send.dtype};
  const Buf r{host(1, recv.bytes()), recv.count, recv.dtype};
  counted([&] { inner_.all_to_all(s, r); });
  stage_out(recv.data, r.data, recv.bytes());
}

void StagingCommunicator::do_broadcast(Buf data, int root) {
  prepare();
  const bool at_root = rank() == root;
  const Buf h{at_root ? stage_in(0, data.data, data.bytes()) : host(0, data.bytes()), data.count, data.dtype};
  counted([&] { inner_.broadcast(h, root); });
  if (!at_root) stage_out(data.data, h.data, data.bytes());
}

void StagingCommunicator::do_barrier() {
  prepare();
  counted([&] { inner_.barrier(); });
}

}  // namespace laconic
