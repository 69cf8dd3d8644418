// The NCCL backend (collectives/cuda/nccl_communicator.h): every collective, dtype and op on
// device buffers against the threads backend on host buffers (world size 1 here; every GPU of
// the machine, up to 8, when there are several), byte counts, and the failure paths: a timeout
// and an NCCL error each abort the communicator with a message naming the rank, and every
// later call throws. (The nominal byte formulas the backend counts with are checked without a
// device in tests/collectives/nominal_bytes_test.cpp.) Tests that need a device skip without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/cuda/nccl_communicator.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/device.h"
#include "tests/cuda/collective_parity.h"

namespace laconic {
namespace {

TEST(NcclCommunicator, AvailableMeansADevice) { EXPECT_EQ(NcclCommunicator::available(), cuda_available()); }

TEST(NcclCommunicator, WorldOfOneMatchesThreadsBackend) {
  LC_NEED_DEVICE();
  ThreadsWorld world(1);
  ThreadsCommunicator boot(world, 0);
  NcclCommunicator nccl(boot, {.timeout_s = 60});
  EXPECT_EQ(nccl.backend(), "nccl");
  EXPECT_EQ(nccl.memory(), Device::cuda);
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.size(), 1);
  EXPECT_EQ(nccl.device(), 0);
  test::expect_collectives_match(nccl, boot);
  EXPECT_FALSE(nccl.aborted());
}

// One rank per GPU, ranks as threads (the bootstrap is their threads communicator, which is also
// the reference). Float sums agree to rounding (NCCL's order is its own); the rest bitwise.
TEST(NcclCommunicator, EveryGpuMatchesThreadsBackend) {
  LC_NEED_DEVICE();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs 2 or more GPUs, found " << devices;
  const int n = std::min(devices, 8);
  run_threads(n, [&](Communicator& boot) {
    NcclCommunicator nccl(boot, {.timeout_s = 120});
    EXPECT_EQ(nccl.device(), boot.rank());
    test::expect_collectives_match(nccl, boot, {.exact_float_sums = false});
  });
}

// Holds the host function on a stream until `flag` is set.
void CUDART_CB block_until(void* flag) {
  auto* f = static_cast<std::atomic<bool>*>(flag);
  while (!f->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

struct Joined {  // joins on every exit of the test, ASSERTs included
  std::thread thread;
  ~Joined() {
    if (thread.joinable()) thread.join();
  }
};

void expect_refused(const std::function<void()>& call, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << " did not throw after the abort";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
    EXPECT_NE(m.find("communicator aborted"), std::string::npos) << m;
  }
}

TEST(NcclCommunicator, TimeoutAbortsAndLaterCallsThrow) {
  LC_NEED_DEVICE();
  ThreadsWorld world(1);
  ThreadsCommunicator boot(world, 0);
  constexpr double kTimeout = 2;
  NcclCommunicator nccl(boot, {.timeout_s = kTimeout});
  DeviceArray<float> x(Device::cuda, 1024);
  const Buf data{x.data(), x.size(), DType::f32};
  nccl.all_reduce(data, ReduceOp::sum);  // a working communicator first

  // Hold the legacy default stream, where the inputs' kernels run: the operation's stream waits
  // for it, as for gradients never finished, so nothing completes. Released a second after the
  // deadline, since ncclCommAbort may wait for what is queued on NCCL's streams.
  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(cudaStreamLegacy, block_until, &release), cudaSuccess);
  Joined releaser{std::thread([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout + 1));
    release = true;
  })};
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    nccl.all_reduce(data, ReduceOp::sum);
  } catch (const Error& e) {
    message = e.what();
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  releaser.thread.join();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::cout << "[ timeout  ] after " << elapsed << " s: " << message << "\n";
  EXPECT_NE(message.find("rank 0: NCCL all_reduce of 4096 bytes timed out after 2 s"), std::string::npos) << message;
  EXPECT_GE(elapsed, kTimeout);
  EXPECT_LE(elapsed, kTimeout + 20);
  EXPECT_TRUE(nccl.aborted());

  expect_refused([&] { nccl.all_reduce(data, ReduceOp::sum); }, "all_reduce");
  expect_refused([&] { nccl.barrier(); }, "barrier");
  expect_refused([&] { nccl.broadcast(data, 0); }, "broadcast");
  expect_refused([&] { nccl.sendrecv(x.data(), 16, 0, x.data() + 16, 16, 0); }, "sendrecv");
  expect_refused([&] { nccl.all_reduce_async(data, ReduceOp::avg)->wait(); }, "all_reduce_async");
}

TEST(NcclCommunicator, NcclErrorAbortsAndLaterCallsThrow) {
  LC_NEED_DEVICE();
  ThreadsWorld world(1);
  ThreadsCommunicator boot(world, 0);
  NcclCommunicator nccl(boot, {.timeout_s = 10});
  DeviceArray<std::byte> x(Device::cuda, 64);
  // NCCL rejects a send to this rank itself without the matching receive in the same group
  // (ncclInvalidUsage); were it to wait instead, the timeout would end it. Either way: aborted.
  std::string message;
  try {
    nccl.send(x.data(), 64, 0);
  } catch (const Error& e) {
    message = e.what();
  }
  std::cout << "[ error    ] " << message << "\n";
  EXPECT_NE(message.find("rank 0: NCCL send of 64 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("communicator aborted"), std::string::npos) << message;
  EXPECT_TRUE(nccl.aborted());
  expect_refused([&] { nccl.barrier(); }, "barrier");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the context is still healthy
}

TEST(NcclCommunicator, RejectsADeviceBootstrap) {
  LC_NEED_DEVICE();
  ThreadsWorld world(1);
  ThreadsCommunicator boot(world, 0);
  NcclCommunicator first(boot, {.timeout_s = 60});
  Communicator& device_comm = first;
  EXPECT_THROW(NcclCommunicator second(device_comm), Error);
}

}  // namespace
}  // namespace laconic
