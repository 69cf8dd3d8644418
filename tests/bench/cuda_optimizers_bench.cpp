// Memory bandwidth of the fused CUDA optimizer steps (optimizers/cuda/) over ~25M parameters in
// a BERT-base-like layout (12 layers of 16 tensors at hidden 384, embeddings and MLM head: 215
// tensors), beside a device-to-device cudaMemcpy of the same number of floats in the same run,
// the bound any streaming pass lives under.
//
//   cuda_optimizers_bench [REPS]     (timed steps per row after 3 untimed ones; default 20)
//
// Rows: memcpy, then one per optimizer step (and global-norm clipping). Columns: MB moved per
// step, ms per step (median of REPS, cudaEvent timing on the default stream), GB/s = bytes / ms,
// and that as a fraction of memcpy's GB/s. Bytes are what the kernels must read and write (n
// parameters, n_d of them in the decay group; 4 bytes a float):
//   memcpy   2 x 4n                    read + write
//   sgd      5 x 4n                    read w, g, b; write w, b (momentum, Nesterov, weight decay)
//   adamw    7 x 4n                    read w, g, m, v; write w, m, v
//   lars     2 x 4n_d + 5 x 4n         norms: read w, g (decay tensors); update: read w, g, m; write w, m
//   lamb     6 x 4n + 4 x 4n           moments + norms: read g, m, v, w; write m, v; apply: read m, v, w; write w
//   clip     4n + 2 x 4n               norm: read g; scale: read g, write g (always clipping here)
// Tables, per-chunk partial sums and per-tensor scales (a few hundred KB) are not counted.
// Without a CUDA device (or a CUDA build) it prints "no CUDA device" and exits 0.
#include <cstdio>
#include <cstdlib>

#if defined(LACONIC_HAVE_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/params.h"
#include "core/rng.h"
#include "optimizers/adamw.h"
#include "optimizers/clip.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"
#include "optimizers/sgd.h"
#include "tests/bench/cuda_timing.h"

namespace {

using namespace laconic;
using bench::check;
using bench::median_ms;

constexpr std::int64_t kHidden = 384, kFfn = 1536, kVocab = 8192, kPositions = 512;
constexpr int kLayers = 12;

std::unique_ptr<ParamStore> make_store() {
  auto s = std::make_unique<ParamStore>();
  const auto decay = ParamGroup::decay, none = ParamGroup::no_decay;
  s->add("embeddings.word", {kVocab, kHidden}, decay);
  s->add("embeddings.position", {kPositions, kHidden}, decay);
  s->add("embeddings.token_type", {2, kHidden}, decay);
  s->add("embeddings.norm.gain", {kHidden}, none);
  s->add("embeddings.norm.bias", {kHidden}, none);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    for (const char* m : {"query", "key", "value", "output"}) {
      s->add(p + m + ".weight", {kHidden, kHidden}, decay);
      s->add(p + m + ".bias", {kHidden}, none);
    }
    s->add(p + "attention.norm.gain", {kHidden}, none);
    s->add(p + "attention.norm.bias", {kHidden}, none);
    s->add(p + "ffn.in.weight", {kFfn, kHidden}, decay);
    s->add(p + "ffn.in.bias", {kFfn}, none);
    s->add(p + "ffn.out.weight", {kHidden, kFfn}, decay);
    s->add(p + "ffn.out.bias", {kHidden}, none);
    s->add(p + "ffn.norm.gain", {kHidden}, none);
    s->add(p + "ffn.norm.bias", {kHidden}, none);
  }
  s->add("head.transform.weight", {kHidden, kHidden}, decay);
  s->add("head.transform.bias", {kHidden}, none);
  s->add("head.norm.gain", {kHidden}, none);
  s->add("head.norm.bias", {kHidden}, none);
  s->add("head.decoder.bias", {kVocab}, none);
  s->finalize();
  const auto key = rng::key({1, rng::kTest});
  for (std::size_t i = 0; i < s->size(); ++i) {
    s->params()[i] = 0.02f * rng::normal(key, 2 * i);
    s->grads()[i] = 1e-3f * rng::normal(key, 2 * i + 1);
  }
  s->to(Device::cuda);
  return s;
}

double copy_gbs = 0;

void row(const char* name, double bytes, double ms) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  if (copy_gbs == 0) copy_gbs = gbs;  // the first row is memcpy's
  std::printf("%-8s %10.1f %10.3f %10.1f %9.0f%%\n", name, bytes / 1e6, ms, gbs, 100.0 * gbs / copy_gbs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  if (!cuda_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  auto store = make_store();
  const double n = static_cast<double>(store->size()), f = sizeof(float);
  double n_decay = 0;
  for (const ParamView& v : store->views()) n_decay += v.group == ParamGroup::decay ? static_cast<double>(v.numel) : 0.0;
  std::printf("# %s; %zu parameters in %zu tensors (%.1f%% decay), %.1f MB; REPS=%d, median\n", prop.name,
              store->size(), store->views().size(), 100.0 * n_decay / n, n * f / 1e6, reps);
  std::printf("%-8s %10s %10s %10s %10s\n", "row", "MB/step", "ms", "GB/s", "of memcpy");

  {
    DeviceArray<float> src(Device::cuda, store->size()), dst(Device::cuda, store->size());
    row("memcpy", 2 * f * n, median_ms(reps, [&] {
          check(cudaMemcpyAsync(dst.data(), src.data(), store->size() * sizeof(float), cudaMemcpyDeviceToDevice, 0),
                "cudaMemcpyAsync");
        }));
  }
  const double lr = 1e-3;
  Sgd sgd({0.9, true, 1e-4});
  row("sgd", 5 * f * n, median_ms(reps, [&] { sgd.step(*store, lr); }));
  AdamW adamw({});
  row("adamw", 7 * f * n, median_ms(reps, [&] { adamw.step(*store, lr); }));
  Lars lars({});
  row("lars", 2 * f * n_decay + 5 * f * n, median_ms(reps, [&] { lars.step(*store, lr); }));
  Lamb lamb({});
  row("lamb", 10 * f * n, median_ms(reps, [&] { lamb.step(*store, lr); }));
  // max_norm below the norm at every call (clipping to m leaves the norm just above m), so every
  // call scales: the norm pass and the scaling pass both run.
  row("clip", 3 * f * n, median_ms(reps, [&] { (void)clip_grad_norm(store->grads(), 1e-3, Device::cuda); }));
  return 0;
}

#else  // a build without CUDA

int main() {
  std::printf("no CUDA device (built without CUDA)\n");
  return 0;
}

#endif
