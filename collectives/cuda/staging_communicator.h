// Device buffers over a host backend: every operation copies its device input into pinned host
// memory, runs the wrapped (host) communicator on it, and copies the result back to the device.
// memory() == Device::cuda. What it is for:
//  - several ranks sharing one GPU in one process (threads backend): NCCL refuses two ranks on
//    one GPU, and tests run world sizes 1-4 on one device this way;
//  - device = "cuda" on machines whose ranks talk only through MPI.
//
//   laconic::run_threads(4, [&](laconic::Communicator& host) {
//     laconic::StagingCommunicator comm(host);     // host: any backend with memory() == cpu
//     comm.all_reduce(laconic::Buf{grads_on_device, n, laconic::DType::f32}, laconic::ReduceOp::avg);
//   });
//
// Plain C++ (no CUDA header); built only with LACONIC_HAVE_CUDA (collectives/cuda/).
//
// Results are the inner communicator's, bit for bit: the same algorithm runs on the same bytes.
// Copies are cudaMemcpy on the legacy default stream, where every Laconic kernel runs, so the
// input copy sees the kernels queued before it and the result is on the device (and visible to
// later kernels) when the call returns. The device is the one current on the constructing
// thread; every operation makes it current on the thread that runs it (the communication
// thread of the async queue included).
//
// Host staging: two pinned buffers (cudaMallocHost; input and output of an operation), grown to
// the largest operation seen and reused: no allocation in steady state (reserve() grows them up
// front).
//
// Bytes and settings: the wrapper shows the inner communicator's ledger and policy
// (Communicator::ShowInner): every byte is counted once, by the inner that moves it, and
// set_algorithm / set_groups on either apply to the collectives the inner runs.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/communicator.h"

namespace laconic {

class StagingCommunicator final : public Communicator {
 public:
  // `inner` is not owned and must outlive this communicator; its buffers must be host memory.
  // `device`: the CUDA ordinal of this rank (made current here); -1: the one already current.
  explicit StagingCommunicator(Communicator& inner, int device = -1);
  ~StagingCommunicator() override;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend() + "+staging"; }
  Device memory() const override { return Device::cuda; }

  Communicator& inner() { return inner_; }
  // Grows both pinned staging buffers to at least `bytes` now.
  void reserve(std::size_t bytes);

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

  // In: the call's input to pinned host memory; the inner's collective on the host copies; out.
  void do_collective(const CollectiveCall& call) override;
  void on_async_thread_start() override;  // this rank's GPU current on the communication thread

 private:
  struct Pinned {
    void* data = nullptr;
    std::size_t capacity = 0;
  };
  // Host staging buffer `slot` (0: input, 1: output) of at least `bytes`.
  void* host(int slot, std::size_t bytes);
  // This rank's device current on the calling thread.
  void prepare();
  // Device -> host slot, and host slot -> device (both synchronous; nothing for 0 bytes).
  void* stage_in(int slot, const void* device_src, std::size_t bytes);
  void stage_out(void* device_dst, const void* host_src, std::size_t bytes);
  Communicator& inner_;
  int device_ = 0;
  Pinned pinned_[2];
};

}  // namespace laconic
