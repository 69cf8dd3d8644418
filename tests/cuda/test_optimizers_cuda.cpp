// Parity of the fused CUDA optimizers and gradient clipping (optimizers/cuda/) with the CPU loops
// (optimizers/*.cpp, the specification). A realistic layout (tensors of 1, 2, 3 elements and of
// prime sizes, across several 4096-element windows, both groups, one tensor of zero weights and
// one of zero gradients for the trust-ratio corner cases) runs 3 steps on the CPU and 3 on the
// GPU (the same ParamStore moved with to(Device::cuda)); parameters and every state buffer are
// compared, printing max abs/rel differences and how many elements differ at all. The
// elementwise formulas round as the CPU does (round-to-nearest intrinsics, no fma), so the only
// expected difference is the order of the double norm sums (LARS, LAMB): a few ulps at most.
// Every test skips (never passes silently) without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/params.h"
#include "core/rng.h"
#include "optimizers/adamw.h"
#include "optimizers/clip.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"
#include "optimizers/muon.h"
#include "optimizers/sgd.h"

namespace laconic {
namespace {

#define LC_REQUIRE_DEVICE() \
  if (!::laconic::cuda_available()) GTEST_SKIP() << "no CUDA device"

struct Spec {
  const char* name;
  std::vector<std::int64_t> shape;
  ParamGroup group;
};
// ~147k parameters, offsets mostly not multiples of 4 (the kernels' unaligned heads and tails).
const std::vector<Spec>& layout() {
  static const std::vector<Spec> specs = {
      {"embed", {509, 67}, ParamGroup::decay},          // 34103: many windows
      {"embed.norm.gain", {67}, ParamGroup::no_decay},  //
      {"one", {1}, ParamGroup::decay},                  //
      {"one.bias", {1}, ParamGroup::no_decay},          //
      {"w1", {67, 131}, ParamGroup::decay},             // 8777
      {"b1", {131}, ParamGroup::no_decay},              //
      {"w2", {4099}, ParamGroup::decay},                // prime, just over one window
      {"zero_w", {13, 7}, ParamGroup::decay},           // weights all 0: trust 1
      {"zero_g", {29}, ParamGroup::decay},              // gradients all 0: LARS trust 1
      {"w3", {100003}, ParamGroup::decay},              // prime
      {"b3", {3}, ParamGroup::no_decay},                //
      {"tail", {2}, ParamGroup::decay},                 //
  };
  return specs;
}

std::size_t view_index(const ParamStore& s, const std::string& name) {
  for (std::size_t i = 0; i < s.views().size(); ++i)
    if (s.view(i).name == name) return i;
  return s.views().size();
}

// Host values of the gradients for step t (zero for zero_g).
std::vector<float> grads_for(const ParamStore& s, int t) {
  const std::uint64_t key = rng::key({rng::kTest, 8, static_cast<std::uint64_t>(t)});
  std::vector<float> g(s.size());
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * rng::normal(key, i);
  const ParamView& z = s.view(view_index(s, "zero_g"));
  std::fill_n(g.begin() + static_cast<std::ptrdiff_t>(z.offset), z.numel, 0.0f);
  return g;
}

// A finalized host store with random weights (zero for zero_w).
std::unique_ptr<ParamStore> make_store() {
  auto s = std::make_unique<ParamStore>();
  for (const Spec& spec : layout()) s->add(spec.name, spec.shape, spec.group);
  s->finalize();
  const std::uint64_t key = rng::key({rng::kTest, 7});
  for (std::size_t i = 0; i < s->size(); ++i) s->params()[i] = 0.5f * rng::normal(key, i);
  const ParamView& z = s->view(view_index(*s, "zero_w"));
  std::fill_n(s->params().begin() + static_cast<std::ptrdiff_t>(z.offset), z.numel, 0.0f);
  return s;
}

std::vector<float> to_host(std::span<const float> data, Device d) {
  std::vector<float> h(data.size());
  copy_bytes(h.data(), Device::cpu, data.data(), d, data.size_bytes());
  return h;
}
void set_grads(ParamStore& s, const std::vector<float>& g) {
  copy_bytes(s.grads().data(), s.device(), g.data(), Device::cpu, g.size() * sizeof(float));
}

// Max |got - want| must stay within `ulps` float epsilons of the buffer's largest |want|.
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                  double ulps = 4) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_abs = 0, max_rel = 0, max_ref = 0;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    ASSERT_FALSE(std::isnan(g) != std::isnan(w)) << what << " element " << i;
    const double d = std::abs(g - w);
    differ += got[i] != want[i];
    max_abs = std::max(max_abs, d);
    if (w != 0) max_rel = std::max(max_rel, d / std::abs(w));
    max_ref = std::max(max_ref, std::abs(w));
  }
  std::cout << "[ parity   ] " << what << " max_abs_diff=" << max_abs << " max_rel_diff=" << max_rel
            << " differing=" << differ << "/" << got.size() << " (max |ref|=" << max_ref << ")\n";
  ::testing::Test::RecordProperty(what, std::to_string(max_abs));
  EXPECT_LE(max_abs, ulps * FLT_EPSILON * std::max(max_ref, 1e-30)) << what;
}

using Factory = std::function<std::unique_ptr<Optimizer>()>;
const std::vector<std::pair<std::string, Factory>>& optimizers() {
  static const std::vector<std::pair<std::string, Factory>> all = {
      {"sgd", [] { return std::make_unique<Sgd>(SgdOptions{}); }},
      {"sgd_momentum", [] { return std::make_unique<Sgd>(SgdOptions{0.9, false, 1e-2}); }},
      {"sgd_nesterov", [] { return std::make_unique<Sgd>(SgdOptions{0.9, true, 1e-2}); }},
      {"adamw", [] { return std::make_unique<AdamW>(AdamWOptions{0.9, 0.999, 1e-8, 0.1}); }},
      {"lars", [] { return std::make_unique<Lars>(LarsOptions{0.9, 0.02, 1e-3, 1e-9}); }},
      {"lamb", [] { return std::make_unique<Lamb>(LambOptions{}); }},
      {"lamb_clamped", [] { return std::make_unique<Lamb>(LambOptions{0.9, 0.999, 1e-6, 0.01, true, 0.5, 2.0, false}); }},
      {"lamb_no_bias_correction",
       [] { return std::make_unique<Lamb>(LambOptions{0.8, 0.99, 1e-6, 0.05, false, 0.0, 0.0, false}); }},
      // weight_decay 0: Adam's step (apex's rule), or trust-scaled with trust_without_decay.
      {"lamb_no_decay", [] { return std::make_unique<Lamb>(LambOptions{0.9, 0.999, 1e-6, 0.0, true, 0.0, 0.0, false}); }},
      {"lamb_no_decay_trust",
       [] { return std::make_unique<Lamb>(LambOptions{0.9, 0.999, 1e-6, 0.0, true, 0.0, 0.0, true}); }},
  };
  return all;
}

constexpr int kSteps = 3;
constexpr double kLr[kSteps] = {0.01, 0.02, 0.015};

// Runs kSteps on `store` (its device) with fresh gradients each step.
void run(Optimizer& opt, ParamStore& store, int first = 0, int last = kSteps) {
  for (int t = first; t < last; ++t) {
    set_grads(store, grads_for(store, t));
    opt.step(store, kLr[t]);
  }
}

void compare_runs(const std::string& name, Optimizer& cpu_opt, ParamStore& cpu, Optimizer& gpu_opt, ParamStore& gpu,
                  double ulps = 4) {
  expect_close(name + " params", to_host(gpu.params(), gpu.device()), to_host(cpu.params(), Device::cpu), ulps);
  const auto want = cpu_opt.state(), got = gpu_opt.state();
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].name, want[k].name);
    // Moment buffers live with the parameters; the step count stays a host float.
    EXPECT_EQ(got[k].device, got[k].name == "step" ? Device::cpu : Device::cuda) << name << " " << got[k].name;
    expect_close(name + " " + want[k].name, to_host(got[k].data, got[k].device), to_host(want[k].data, want[k].device),
                 ulps);
  }
}

TEST(OptimizersCuda, StepsMatchCpu) {
  LC_REQUIRE_DEVICE();
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto cpu = make_store(), gpu = make_store();
    gpu->to(Device::cuda);
    auto cpu_opt = make(), gpu_opt = make();
    run(*cpu_opt, *cpu);
    run(*gpu_opt, *gpu);
    compare_runs(name, *cpu_opt, *cpu, *gpu_opt, *gpu);
  }
}

// Muon on the GPU (cuBLAS's GEMMs in the Newton-Schulz iteration, the momentum and the update as
// kernels, AdamW's fused kernel over the other tensors) against the CPU step: a tall and a wide
// hidden matrix, an embedding-like 2-D tensor and 1-D tensors (AdamW), three steps. The AdamW
// group and the momentum agree to a few ulps; the matrices' updates to the GEMMs' rounding, which
// the iteration amplifies where X has small singular values (p'(0) = 3.4445 per step).
TEST(OptimizersCuda, MuonMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const auto make = [] {
    auto s = std::make_unique<ParamStore>();
    s->add("tall", {131, 67}, ParamGroup::decay, ParamKind::hidden_matrix);
    s->add("tall.bias", {131}, ParamGroup::no_decay);
    s->add("wide", {29, 517}, ParamGroup::decay, ParamKind::hidden_matrix);
    s->add("embed", {509, 67}, ParamGroup::decay);
    s->add("gain", {67}, ParamGroup::no_decay);
    s->finalize();
    const std::uint64_t key = rng::key({rng::kTest, 9});
    for (std::size_t i = 0; i < s->size(); ++i) s->params()[i] = 0.5f * rng::normal(key, i);
    return s;
  };
  for (const bool nesterov : {true, false}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "plain momentum");
    auto cpu = make(), gpu = make();
    gpu->to(Device::cuda);
    const MuonOptions mo{0.95, nesterov, 5};
    const AdamWOptions ao{0.9, 0.95, 1e-8, 0.1};
    Muon cpu_opt(mo, ao), gpu_opt(mo, ao);
    for (int t = 0; t < kSteps; ++t) {
      std::vector<float> g(cpu->size());
      const std::uint64_t key = rng::key({rng::kTest, 10, static_cast<std::uint64_t>(t)});
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * rng::normal(key, i);
      set_grads(*cpu, g);
      set_grads(*gpu, g);
      cpu_opt.step(*cpu, kLr[t]);
      gpu_opt.step(*gpu, kLr[t]);
    }
    for (std::size_t v = 0; v < cpu->views().size(); ++v) {
      const ParamView& view = cpu->view(v);
      const auto slice = [&](const ParamStore& s) {
        const std::vector<float> all = to_host(s.params(), s.device());
        return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(view.offset),
                                  all.begin() + static_cast<std::ptrdiff_t>(view.offset + view.numel));
      };
      // Parameters of about 0.5, updates of lr * 0.2 * sqrt(max(rows, cols)) * O, about 0.005 per
      // element: 64 ulps of 0.5 bound the matrices' difference at 0.1% of an update.
      expect_close("muon " + view.name, slice(*gpu), slice(*cpu), view.kind == ParamKind::hidden_matrix ? 64 : 4);
    }
    const auto want = cpu_opt.state(), got = gpu_opt.state();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size(); ++k)
      expect_close("muon state " + want[k].name, to_host(got[k].data, got[k].device),
                   to_host(want[k].data, want[k].device));
  }
}

TEST(OptimizersCuda, StoreMovedMidRunContinues) {
  // Two CPU steps, then the store (and with it the optimizer's state) moves to the GPU for the
  // third: the same as three CPU steps.
  LC_REQUIRE_DEVICE();
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto cpu = make_store(), moved = make_store();
    auto cpu_opt = make(), moved_opt = make();
    run(*cpu_opt, *cpu);
    run(*moved_opt, *moved, 0, kSteps - 1);
    moved->to(Device::cuda);
    run(*moved_opt, *moved, kSteps - 1, kSteps);
    compare_runs(name + " moved", *cpu_opt, *cpu, *moved_opt, *moved);
  }
}

TEST(OptimizersCuda, CopiedDeviceStateContinuesBitwise) {
  // state() exposes every device buffer: a fresh optimizer given a copy continues bit for bit.
  LC_REQUIRE_DEVICE();
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto a = make_store(), b = make_store();
    a->to(Device::cuda);
    b->to(Device::cuda);
    auto opt_a = make(), opt_b = make();
    run(*opt_a, *a, 0, 2);
    copy_bytes(b->params().data(), Device::cuda, a->params().data(), Device::cuda, a->params().size_bytes());
    opt_b->prepare(*b);
    const auto from = opt_a->state(), to = opt_b->state();
    ASSERT_EQ(from.size(), to.size());
    for (std::size_t k = 0; k < from.size(); ++k) {
      ASSERT_EQ(from[k].data.size(), to[k].data.size()) << from[k].name;
      copy_bytes(to[k].data.data(), to[k].device, from[k].data.data(), from[k].device, from[k].data.size_bytes());
    }
    run(*opt_a, *a, 2, 3);
    run(*opt_b, *b, 2, 3);
    EXPECT_EQ(to_host(a->params(), Device::cuda), to_host(b->params(), Device::cuda)) << name;
  }
}

TEST(ClipCuda, NormAndClippingMatchCpu) {
  LC_REQUIRE_DEVICE();
  auto cpu = make_store(), gpu = make_store();
  gpu->to(Device::cuda);
  const auto g = grads_for(*cpu, 0);
  set_grads(*cpu, g);
  set_grads(*gpu, g);
  const double n_cpu = clip_grad_norm(cpu->grads(), 1.0);
  const double n_gpu = clip_grad_norm(gpu->grads(), 1.0, Device::cuda);
  std::cout << "[ parity   ] global norm cpu=" << n_cpu << " gpu=" << n_gpu
            << " rel_diff=" << std::abs(n_gpu - n_cpu) / n_cpu << "\n";
  EXPECT_NEAR(n_gpu, n_cpu, 1e-13 * n_cpu);
  ASSERT_LT(1.0 / (n_cpu + 1e-6), 1.0) << "the test should clip";
  expect_close("clipped grads", to_host(gpu->grads(), Device::cuda), to_host(cpu->grads(), Device::cpu), 0);
  // Below the threshold nothing changes.
  const auto before = to_host(gpu->grads(), Device::cuda);
  EXPECT_NEAR(clip_grad_norm(gpu->grads(), 1e6, Device::cuda), 1.0, 1e-6);
  EXPECT_EQ(to_host(gpu->grads(), Device::cuda), before);
  // A non-finite norm leaves the gradients alone.
  clip_to_norm(gpu->grads(), std::numeric_limits<double>::infinity(), 1.0, Device::cuda);
  EXPECT_EQ(to_host(gpu->grads(), Device::cuda), before);
}

TEST(ClipCuda, RangesAtEveryAlignment) {
  // The noise scale takes |g|^2 of gradient ranges that start anywhere: heads and tails of 0-3
  // elements around the float4 body, and sizes below one float4.
  LC_REQUIRE_DEVICE();
  const std::size_t n = 70001;
  std::vector<float> host(n);
  const std::uint64_t key = rng::key({rng::kTest, 9});
  for (std::size_t i = 0; i < n; ++i) host[i] = rng::normal(key, i);
  DeviceArray<float> dev(Device::cuda, n);
  dev.upload(host);
  for (std::size_t offset : {0, 1, 2, 3, 5}) {
    for (std::size_t len : {0, 1, 2, 3, 4, 5, 7, 8, 9, 4097, 65537}) {
      const std::span<const float> h(host.data() + offset, len), d(dev.data() + offset, len);
      const double want = global_grad_norm(h), got = global_grad_norm(d, Device::cuda);
      EXPECT_NEAR(got, want, 1e-13 * std::max(want, 1e-30)) << "offset " << offset << " len " << len;
    }
  }
  // Scaling a range leaves its neighbours alone and matches the CPU bit for bit.
  std::vector<float> want = host;
  const std::size_t lo = 3, len = 9999;
  clip_to_norm(std::span<float>(want.data() + lo, len), 7.0, 1.0);
  clip_to_norm(std::span<float>(dev.data() + lo, len), 7.0, 1.0, Device::cuda);
  std::vector<float> got(n);
  dev.download(got);
  expect_close("clipped range", got, want, 0);
}

TEST(OptimizersCuda, StepAllocatesNothingAfterTheFirst) {
  // Device memory in use (cudaMemGetInfo) before and after more steps: any cudaMalloc of a page
  // or more would show. The host side of step() allocates nothing either (tests/optimizers).
  LC_REQUIRE_DEVICE();
  for (const auto& [name, make] : optimizers()) {
    SCOPED_TRACE(name);
    auto store = make_store();
    store->to(Device::cuda);
    auto opt = make();
    const auto g = grads_for(*store, 0);
    set_grads(*store, g);
    opt->step(*store, 0.01);
    (void)clip_grad_norm(store->grads(), 1.0, Device::cuda);
    synchronize(Device::cuda);
    std::size_t free0 = 0, free1 = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    for (int t = 0; t < 5; ++t) {
      opt->step(*store, 0.01);
      (void)clip_grad_norm(store->grads(), 1.0, Device::cuda);
    }
    synchronize(Device::cuda);
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free1, free0) << name;
  }
}

}  // namespace
}  // namespace laconic
