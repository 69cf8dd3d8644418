// StagingCommunicator (collectives/cuda/staging_communicator.h): device buffers carried over the
// threads backend, world sizes 1-4 with every rank on the one GPU. Every collective, dtype and op
// equals the threads backend on host buffers bit for bit, with the same bytes counted; the
// algorithm and groups set on the wrapper reach the inner communicator. Skips without a device.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/cuda/staging_communicator.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/device.h"
#include "tests/cuda/collective_parity.h"

namespace laconic {
namespace {

TEST(StagingCommunicator, MatchesThreadsBackendAtWorldSizes1To4) {
  LC_NEED_DEVICE();
  for (int n = 1; n <= 4; ++n) {
    run_threads(n, [&](Communicator& host) {
      StagingCommunicator comm(host);
      EXPECT_EQ(comm.backend(), "threads+staging");
      EXPECT_EQ(comm.memory(), Device::cuda);
      EXPECT_EQ(comm.rank(), host.rank());
      EXPECT_EQ(comm.size(), n);
      test::expect_collectives_match(comm, host);
    });
  }
}

// set_algorithm / set_groups on the wrapper run the inner communicator's algorithm with them:
// the hierarchical all-reduce over two groups gives the host run's bits and bytes.
TEST(StagingCommunicator, ForwardsAlgorithmAndGroups) {
  LC_NEED_DEVICE();
  run_threads(4, [&](Communicator& host) {
    StagingCommunicator comm(host);
    const std::vector<int> groups{0, 0, 1, 1};
    comm.set_groups(groups);
    comm.set_algorithm(Algorithm::hierarchical);
    test::Both x(test::random_elements(DType::f32, 1001, 77 + static_cast<std::uint64_t>(host.rank())), DType::f32);

    const ByteCounters d0 = comm.bytes();
    comm.all_reduce(x.side(true), ReduceOp::avg);
    const ByteCounters d1 = comm.bytes();
    EXPECT_EQ(host.algorithm(), Algorithm::hierarchical);
    EXPECT_EQ(host.groups(), groups);

    const ByteCounters h0 = host.bytes();
    host.all_reduce(x.side(false), ReduceOp::avg);
    const ByteCounters h1 = host.bytes();
    EXPECT_TRUE(x.device_bytes() == x.host);
    EXPECT_EQ(d1.sent - d0.sent, h1.sent - h0.sent);
    EXPECT_EQ(d1.recv - d0.recv, h1.recv - h0.recv);
    EXPECT_EQ(d1.messages_sent - d0.messages_sent, h1.messages_sent - h0.messages_sent);
  });
}

TEST(StagingCommunicator, ReserveThenReuse) {
  LC_NEED_DEVICE();
  run_threads(2, [&](Communicator& host) {
    StagingCommunicator comm(host);
    comm.reserve(1 << 20);
    DeviceArray<float> x(Device::cuda, 1000);
    std::vector<float> ones(1000, 1.0f), got(1000);
    for (int step = 0; step < 3; ++step) {  // the same buffers every step
      x.upload(ones);
      comm.all_reduce(Buf{x.data(), x.size(), DType::f32}, ReduceOp::sum);
      x.download(got);
      for (float v : got) ASSERT_EQ(v, 2.0f);
    }
  });
}

TEST(StagingCommunicator, RejectsADeviceCommunicatorInside) {
  LC_NEED_DEVICE();
  ThreadsWorld world(1);
  ThreadsCommunicator host(world, 0);
  StagingCommunicator staged(host);
  Communicator& device_comm = staged;
  EXPECT_THROW(StagingCommunicator twice(device_comm), Error);
}

}  // namespace
}  // namespace laconic
