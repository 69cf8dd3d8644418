// Shared by test_nccl.cpp and test_staging.cpp: every collective, dtype and op run on a
// communicator with device buffers, checked against a host communicator of the same world (the
// threads backend, the specification) on the same inputs: results, and bytes counted per call.
// Called on every rank of the world, in the same order (collectives).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/dtype.h"
#include "core/device.h"
#include "core/rng.h"

// Every test that needs a GPU starts with this: it skips (never passes silently) without one.
#define LC_NEED_DEVICE() \
  if (!::laconic::cuda_available()) GTEST_SKIP() << "no CUDA device"

namespace laconic::test {

// `count` finite random elements of type t (floats ~ N(0, 1); i32 in [-1000, 1000]; any u8).
inline std::vector<std::byte> random_elements(DType t, std::size_t count, std::uint64_t stream) {
  const std::uint64_t key = rng::key({rng::kTest, stream});
  std::vector<std::byte> out(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    std::byte* p = out.data() + i * dtype_size(t);
    const float x = rng::normal(key, i);
    switch (t) {
      case DType::f32: std::memcpy(p, &x, 4); break;
      case DType::bf16: { const bf16 v = to_bf16(x); std::memcpy(p, &v, 2); break; }
      case DType::f16: { const f16 v = to_f16(x); std::memcpy(p, &v, 2); break; }
      case DType::i32: {
        const auto v = static_cast<std::int32_t>(rng::below(key, i, 2001)) - 1000;
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::u8: *p = static_cast<std::byte>(rng::below(key, i, 256)); break;
    }
  }
  return out;
}

// Element i of raw bytes of type t, as a double.
inline double element(const std::vector<std::byte>& v, DType t, std::size_t i) {
  const std::byte* p = v.data() + i * dtype_size(t);
  switch (t) {
    case DType::f32: { float x; std::memcpy(&x, p, 4); return x; }
    case DType::bf16: { bf16 x; std::memcpy(&x, p, 2); return from_bf16(x); }
    case DType::f16: { f16 x; std::memcpy(&x, p, 2); return from_f16(x); }
    case DType::i32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::u8: return static_cast<double>(static_cast<std::uint8_t>(*p));
  }
  return 0;
}

// One buffer on both sides, with the same initial bytes: host for the reference communicator,
// device for the one under test.
struct Both {
  std::vector<std::byte> host;
  DeviceArray<std::byte> dev;
  DType t;
  Both(std::vector<std::byte> init, DType type) : host(std::move(init)), dev(Device::cuda, host.size()), t(type) {
    dev.upload(host);
  }
  Buf side(bool on_device) {
    return {on_device ? static_cast<void*>(dev.data()) : static_cast<void*>(host.data()), host.size() / dtype_size(t), t};
  }
  std::vector<std::byte> device_bytes() const {
    std::vector<std::byte> h(dev.size());
    dev.download(h);
    return h;
  }
};

struct ParityOptions {
  // False for NCCL at more than one rank: it sums floats in its own order, so float sums (and
  // averages) agree with the reference to rounding only; everything else is always bitwise.
  bool exact_float_sums = true;
};

// Largest |difference| between a device result and the reference, over all float comparisons
// made with a tolerance; printed once at the end.
class Parity {
 public:
  Parity(Communicator& dev, Communicator& ref, ParityOptions opt) : dev_(dev), ref_(ref), opt_(opt) {}

  // Runs call(comm, on_device) on the device communicator, then on the reference, and compares
  // `out` on both sides and the bytes each call counted.
  template <class Call>
  void check(const std::string& what, bool float_sum, Both& out, Call call) {
    const ByteCounters d0 = dev_.bytes();
    call(dev_, true);
    const ByteCounters d1 = dev_.bytes();
    const ByteCounters r0 = ref_.bytes();
    call(ref_, false);
    const ByteCounters r1 = ref_.bytes();
    const std::string label = detail::concat("rank ", ref_.rank(), "/", ref_.size(), " ", what);
    EXPECT_EQ(d1.sent - d0.sent, r1.sent - r0.sent) << label << ": bytes sent";
    EXPECT_EQ(d1.recv - d0.recv, r1.recv - r0.recv) << label << ": bytes received";
    EXPECT_EQ(d1.messages_sent - d0.messages_sent, r1.messages_sent - r0.messages_sent) << label << ": messages";
    const std::vector<std::byte> got = out.device_bytes();
    ++comparisons_;
    const bool is_float = out.t == DType::f32 || out.t == DType::bf16 || out.t == DType::f16;
    if (opt_.exact_float_sums || !float_sum || !is_float || ref_.size() == 1) {
      EXPECT_TRUE(got == out.host) << label << ": not bitwise equal to the " << ref_.backend() << " backend";
      return;
    }
    // Rounding bound of N-term sums in another order: N·N·eps·max|x| (inputs ~ N(0,1), |x| < 5), x2.
    const double eps = out.t == DType::f32 ? 0x1p-23 : out.t == DType::f16 ? 0x1p-10 : 0x1p-7;
    const double n = ref_.size(), tol = 10 * n * n * eps;
    double diff = 0;
    for (std::size_t i = 0; i < out.host.size() / dtype_size(out.t); ++i)
      diff = std::max(diff, std::abs(element(got, out.t, i) - element(out.host, out.t, i)));
    max_diff_ = std::max(max_diff_, diff);
    EXPECT_LE(diff, tol) << label;
  }

  void report() const {
    std::cout << "[ parity   ] rank " << ref_.rank() << "/" << ref_.size() << " " << dev_.backend() << " vs "
              << ref_.backend() << ": " << comparisons_ << " comparisons, max_abs_diff of float sums=" << max_diff_
              << (opt_.exact_float_sums ? " (all bitwise)" : "") << "\n";
  }

 private:
  Communicator& dev_;
  Communicator& ref_;
  ParityOptions opt_;
  std::size_t comparisons_ = 0;
  double max_diff_ = 0;
};

// Every collective (and sendrecv, barrier, the async forms), every dtype, every op, sizes 0 to
// 1000 elements (not multiples of anything), with inputs that differ per rank.
inline void expect_collectives_match(Communicator& dev, Communicator& ref, ParityOptions opt = {}) {
  ASSERT_EQ(dev.memory(), Device::cuda);
  ASSERT_EQ(ref.memory(), Device::cpu);
  ASSERT_EQ(dev.rank(), ref.rank());
  ASSERT_EQ(dev.size(), ref.size());
  const int n = ref.size(), r = ref.rank();
  const auto un = static_cast<std::size_t>(n);
  Parity parity(dev, ref, opt);
  std::uint64_t stream = 1000 * static_cast<std::uint64_t>(r);  // distinct inputs per rank and call
  const auto input = [&](DType t, std::size_t count) { return Both(random_elements(t, count, ++stream), t); };
  const auto zeros = [&](DType t, std::size_t count) { return Both(std::vector<std::byte>(count * dtype_size(t)), t); };

  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u8}) {
    for (std::size_t count : {0, 1, 5, 33, 1000}) {
      const std::string suffix = detail::concat(" ", name_of(t), " count=", count);
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        const bool float_sum = op != ReduceOp::max;
        const std::string ops = detail::concat(" ", name_of(op), suffix);
        {
          Both x = input(t, count);
          parity.check("all_reduce" + ops, float_sum, x, [&](Communicator& c, bool d) { c.all_reduce(x.side(d), op); });
        }
        for (int root : {0, n - 1}) {
          Both x = input(t, count);
          parity.check(detail::concat("reduce root=", root, ops), float_sum, x,
                       [&](Communicator& c, bool d) { c.reduce(x.side(d), op, root); });
        }
        {
          Both s = input(t, count * un), out = zeros(t, count);
          parity.check("reduce_scatter" + ops, float_sum, out,
                       [&](Communicator& c, bool d) { c.reduce_scatter(s.side(d), out.side(d), op); });
        }
      }
      {
        Both s = input(t, count), out = zeros(t, count * un);
        parity.check("all_gather" + suffix, false, out, [&](Communicator& c, bool d) { c.all_gather(s.side(d), out.side(d)); });
      }
      {
        // Rank q contributes count - min(count, q) elements: unequal, some of them empty.
        std::vector<std::size_t> counts(un);
        for (std::size_t q = 0; q < un; ++q) counts[q] = count - std::min(count, q);
        std::size_t total = 0;
        for (std::size_t c : counts) total += c;
        Both s = input(t, counts[static_cast<std::size_t>(r)]), out = zeros(t, total);
        parity.check("all_gather_v" + suffix, false, out,
                     [&](Communicator& c, bool d) { c.all_gather_v(s.side(d), out.side(d), counts); });
      }
      {
        Both s = input(t, count * un), out = zeros(t, count * un);
        parity.check("all_to_all" + suffix, false, out, [&](Communicator& c, bool d) { c.all_to_all(s.side(d), out.side(d)); });
      }
      for (int root : {0, n - 1}) {
        Both x = input(t, count);
        parity.check(detail::concat("broadcast root=", root, suffix), false, x,
                     [&](Communicator& c, bool d) { c.broadcast(x.side(d), root); });
      }
      {
        // A ring shift: send to the next rank, receive from the previous one (itself when n = 1).
        Both s = input(t, count), out = zeros(t, count);
        const std::size_t bytes = count * dtype_size(t);
        parity.check("sendrecv" + suffix, false, out, [&](Communicator& c, bool d) {
          c.sendrecv(s.side(d).data, bytes, (r + 1) % n, out.side(d).data, bytes, (r + n - 1) % n);
        });
      }
    }
  }
  {
    Both none = zeros(DType::u8, 0);
    parity.check("barrier", false, none, [&](Communicator& c, bool) { c.barrier(); });
  }
  {
    // The async forms: an all-reduce queued alone, then a composite op (reduce-scatter +
    // all-gather) on the communication thread, as the bucketed strategies run them.
    Both x = input(DType::f32, 1000);
    parity.check("all_reduce_async avg f32", true, x, [&](Communicator& c, bool d) {
      c.all_reduce_async(x.side(d), ReduceOp::avg)->wait();
    });
    Both s = input(DType::f32, 100 * un), part = zeros(DType::f32, 100), out = zeros(DType::f32, 100 * un);
    parity.check("run_async reduce_scatter+all_gather f32", true, out, [&](Communicator& c, bool d) {
      Work work;
      c.run_async(work, [&c, &s, &part, &out, d] {
        c.reduce_scatter(s.side(d), part.side(d), ReduceOp::sum);
        c.all_gather(part.side(d), out.side(d));
      });
      work.wait();
    });
  }
  parity.report();
}

}  // namespace laconic::test
