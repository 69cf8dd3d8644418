// A world of one rank whose buffers live on a given device: enough to run any reducer's reduce()
// at world size 1 without a real backend (tests/compression for the refusals, tests/cuda for
// the device reducers). The collectives of a single rank: all-reduce / reduce / broadcast leave
// the data as it is (an average over one rank is the value itself, exactly), gathers and
// all-to-all copy the one block. Point-to-point has no peer and is an error.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "collectives/communicator.h"
#include "core/check.h"
#include "core/device.h"

namespace laconic {

class SoloCommunicator final : public Communicator {
 public:
  explicit SoloCommunicator(Device memory) : memory_(memory) {}
  ~SoloCommunicator() override { stop_async(); }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "solo"; }
  Device memory() const override { return memory_; }

 protected:
  void do_send(const void*, std::size_t, int) override { LC_CHECK(false, "solo communicator: no peer"); }
  void do_recv(void*, std::size_t, int) override { LC_CHECK(false, "solo communicator: no peer"); }
  void do_sendrecv(const void*, std::size_t, int, void*, std::size_t, int) override {
    LC_CHECK(false, "solo communicator: no peer");
  }
  bool native(const CollectiveCall& c) override {
    // One rank: in-place calls and the barrier leave everything as it is; the others copy the
    // one block (copy_bytes does nothing for dst == src, the in-place gathers).
    if (!c.in_place() && c.kind != Collective::barrier) copy(c.data.data, c.send.data, c.data.bytes());
    return true;
  }

 private:
  void copy(void* dst, const void* src, std::size_t bytes) { copy_bytes(dst, memory_, src, memory_, bytes); }
  Device memory_;
};

}  // namespace laconic
