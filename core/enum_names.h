// An enum's spelling, defined once beside the enum: its header declares
//   inline constexpr std::array kFooNames{"a", "b"};            // indexed by the enumerator's value
//   constexpr std::span<const char* const> names(Foo) { return kFooNames; }
// and name_of(Foo), the recipe parser (choices, messages, printing) and anyone else read it
// through enum_name(), found by argument-dependent lookup.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "core/check.h"

namespace laconic {

template <typename E>
const char* enum_name(E value) {
  const auto all = names(value);
  const auto index = static_cast<std::size_t>(value);
  LC_CHECK(index < all.size(), "enum value ", index, " has no name");
  return all[index];
}

}  // namespace laconic
