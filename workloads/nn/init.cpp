#include "workloads/nn/init.h"

#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace laconic::nn {

std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t init_key(std::uint64_t seed, std::string_view name) {
  return rng::key({seed, rng::kInit, name_hash(name)});
}

namespace {

// Fills view `view` with value(i) for i in [0, numel): in place on the host; for a store on a
// device, on the host first and then copied (initialisation is not in the step loop, so the
// temporary costs nothing that matters), so a model initialises the same wherever it lives.
template <typename F>
void fill_view(ParamStore& store, std::size_t view, F value) {
  LC_CHECK(store.finalized(), "init before ParamStore::finalize()");
  const std::size_t n = store.view(view).numel;
  if (store.device() == Device::cpu) {
    float* p = store.param(view);
    for (std::size_t i = 0; i < n; ++i) p[i] = value(i);
    return;
  }
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = value(i);
  copy_bytes(store.param(view), store.device(), host.data(), Device::cpu, n * sizeof(float));
}

}  // namespace

void init_uniform(ParamStore& store, std::size_t view, float bound, std::uint64_t seed) {
  const std::uint64_t key = init_key(seed, store.view(view).name);
  fill_view(store, view, [&](std::size_t i) { return bound * (2.0f * rng::uniform(key, i) - 1.0f); });
}

void init_normal(ParamStore& store, std::size_t view, float stddev, std::uint64_t seed) {
  const std::uint64_t key = init_key(seed, store.view(view).name);
  fill_view(store, view, [&](std::size_t i) { return stddev * rng::normal(key, i); });
}

void init_constant(ParamStore& store, std::size_t view, float value) {
  fill_view(store, view, [&](std::size_t) { return value; });
}

}  // namespace laconic::nn
