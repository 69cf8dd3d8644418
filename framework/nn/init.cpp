#include "framework/nn/init.h"

#include <algorithm>

#include "framework/core/check.h"
#include "framework/core/rng.h"

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

void init_uniform(ParamStore& store, std::size_t view, float bound, std::uint64_t seed) {
  LC_CHECK(store.finalized(), "init before ParamStore::finalize()");
  const ParamView& v = store.view(view);
  const std::uint64_t key = init_key(seed, v.name);
  float* p = store.param(view);
  for (std::size_t i = 0; i < v.numel; ++i) p[i] = bound * (2.0f * rng::uniform(key, i) - 1.0f);
}

void init_normal(ParamStore& store, std::size_t view, float stddev, std::uint64_t seed) {
  LC_CHECK(store.finalized(), "init before ParamStore::finalize()");
  const ParamView& v = store.view(view);
  const std::uint64_t key = init_key(seed, v.name);
  float* p = store.param(view);
  for (std::size_t i = 0; i < v.numel; ++i) p[i] = stddev * rng::normal(key, i);
}

void init_constant(ParamStore& store, std::size_t view, float value) {
  LC_CHECK(store.finalized(), "init before ParamStore::finalize()");
  std::fill_n(store.param(view), store.view(view).numel, value);
}

}  // namespace laconic::nn
