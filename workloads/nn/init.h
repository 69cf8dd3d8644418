// Deterministic parameter initialisation. Each tensor draws from its own counter-based stream,
// keyed by (seed, kInit, hash of the tensor's name): the values depend only on the seed and the
// name, not on declaration order, so adding a layer never changes how the others start.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/params.h"

namespace laconic::nn {

// FNV-1a, 64 bit (Fowler, Noll, Vo): a fixed hash, unlike std::hash, so keys are portable.
std::uint64_t name_hash(std::string_view name);

// The rng key of a parameter tensor's initialisation stream.
std::uint64_t init_key(std::uint64_t seed, std::string_view name);

// These work on a store on any device, with the same values (on a device they are drawn on the
// host, then copied).
// Fills view `view` of `store` with U(-bound, bound).
void init_uniform(ParamStore& store, std::size_t view, float bound, std::uint64_t seed);
// Fills view `view` of `store` with N(0, stddev^2).
void init_normal(ParamStore& store, std::size_t view, float stddev, std::uint64_t seed);
// Fills view `view` of `store` with a constant.
void init_constant(ParamStore& store, std::size_t view, float value);

}  // namespace laconic::nn
