// The parameter layout the sync tests share: five tensors of 6x5, 5, 4x3x2, 4 and 7 elements
// (offsets 0, 30, 35, 59, 63; 70 in all), matrices and vectors, so buckets and reducers see both.
#pragma once

#include <cstddef>

#include "core/params.h"

namespace laconic {

constexpr std::size_t kSmallStoreSize = 70;

inline ParamStore small_store() {
  ParamStore s;
  s.add("a.weight", {6, 5}, ParamGroup::decay);
  s.add("a.bias", {5}, ParamGroup::no_decay);
  s.add("b.weight", {4, 3, 2}, ParamGroup::decay);
  s.add("b.bias", {4}, ParamGroup::no_decay);
  s.add("c", {7}, ParamGroup::no_decay);
  s.finalize();
  return s;
}

// A bucket cap of `floats` elements, in the MiB DataParallelOptions takes.
inline double mib(std::size_t floats) { return static_cast<double>(floats * sizeof(float)) / (1024.0 * 1024.0); }

}  // namespace laconic
