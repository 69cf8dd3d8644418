#include "collectives/cuda/staging_communicator.h"

#include <cuda_runtime.h>

#include "core/check.h"
#include "core/device.h"
#include "core/cuda/cuda_check.h"

namespace laconic {

StagingCommunicator::StagingCommunicator(Communicator& inner, int device)
    : Communicator(ShowInner{}, inner), inner_(inner) {
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

// ---- point-to-point (counted by the inner) ----

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

void StagingCommunicator::do_collective(const CollectiveCall& call) {
  prepare();
  CollectiveCall h = call;
  const bool at_root = rank() == call.root;
  if (call.in_place()) {
    // A broadcast's input is the root's only; every other rank's buffer is just received into.
    const bool input = call.kind != Collective::broadcast || at_root;
    h.data.data = input ? stage_in(0, call.data.data, call.data.bytes()) : host(0, call.data.bytes());
  } else if (call.kind != Collective::barrier) {
    // Separate host buffers: an in-place all-gather (send = this rank's block of recv) works too.
    h.send.data = stage_in(0, call.send.data, call.send.bytes());
    h.data.data = host(1, call.data.bytes());
  }
  inner_.collective(h);
  // A reduce leaves non-roots' data unchanged; a broadcast leaves the root's.
  const bool output = call.kind == Collective::reduce      ? at_root
                      : call.kind == Collective::broadcast ? !at_root
                                                           : call.kind != Collective::barrier;
  if (output) stage_out(call.data.data, h.data.data, call.data.bytes());
}

}  // namespace laconic
