// Which collective a call is, and its name: on its own so that the trace (trace.cpp), which the
// transport records into, names a native collective without including the collectives above it.
#pragma once

#include <array>
#include <span>

#include "core/enum_names.h"

namespace laconic {

enum class Collective { all_reduce, reduce, reduce_scatter, all_gather, all_to_all, broadcast, barrier };
inline constexpr std::array kCollectiveNames{"all_reduce", "reduce", "reduce_scatter", "all_gather",
                                             "all_to_all", "broadcast", "barrier"};
constexpr std::span<const char* const> names(Collective) { return kCollectiveNames; }
inline const char* name_of(Collective c) { return enum_name(c); }

}  // namespace laconic
