// The reducers' device plumbing that needs no device: a reducer refuses a communicator whose
// buffers live elsewhere, and a build without CUDA refuses cuda reducers. (The device kernels'
// parity is tests/cuda/test_reducers_cuda.cpp.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/reducer.h"
#include "compression/topk.h"
#include "core/check.h"
#include "core/device.h"
#include "tests/compression/solo_communicator.h"

namespace laconic {
namespace {

TEST(ReducerDevice, CpuReducersRefuseADeviceCommunicator) {
  const BucketLayout bucket = flat_bucket(64);
  std::vector<float> data(64, 1.0f);
  SoloCommunicator device_comm(Device::cuda);  // says cuda; never touched before the check fires
  DenseReducer dense;
  TopKReducer topk;
  OneBitReducer onebit;
  PowerSgdReducer powersgd(PowerSgdOptions{.start_iter = 0});
  for (Reducer* r : std::vector<Reducer*>{&dense, &topk, &onebit, &powersgd}) {
    r->prepare(std::vector<BucketLayout>{bucket});
    try {
      r->reduce(data, bucket, 0, device_comm);
      ADD_FAILURE() << r->describe() << " accepted a cuda communicator";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("keeps its buffers on cpu but the 'solo' communicator takes cuda buffers"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(data, std::vector<float>(64, 1.0f));  // untouched
}

TEST(ReducerDevice, CudaReducersNeedACudaBuild) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA: tests/cuda covers the cuda reducers";
  EXPECT_THROW(DenseReducer(DType::bf16, Device::cuda), Error);
  EXPECT_THROW(TopKReducer(TopKOptions{.device = Device::cuda}), Error);
  EXPECT_THROW(OneBitReducer(OneBitOptions{.device = Device::cuda}), Error);
  EXPECT_THROW(PowerSgdReducer(PowerSgdOptions{.device = Device::cuda}), Error);
}

TEST(ReducerDevice, StateSaysWhereItLives) {
  TopKReducer topk;
  topk.prepare(std::vector<BucketLayout>{flat_bucket(10)});
  for (const StateTensor& t : topk.state()) EXPECT_EQ(t.device, Device::cpu) << t.name;
}

}  // namespace
}  // namespace laconic
