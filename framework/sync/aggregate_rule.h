// How an elastic run combines its replicas' pseudo-gradients ([elastic] aggregate): the recipe's
// value, at the layer both the recipe (framework/recipe) and the replica groups that apply it
// (framework/elastic/aggregate.h) stand on.
#pragma once

#include <array>
#include <span>

#include "core/enum_names.h"

namespace laconic {

enum class Aggregate { mean, trimmed_mean, median };
inline constexpr std::array kAggregateNames{"mean", "trimmed_mean", "median"};
constexpr std::span<const char* const> names(Aggregate) { return kAggregateNames; }
inline const char* name_of(Aggregate a) { return enum_name(a); }

}  // namespace laconic
