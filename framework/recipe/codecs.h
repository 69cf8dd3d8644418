// TOML values as the recipe code sees them: the node a codec reads (schema.h's TomlNode) and how a
// value the user wrote is echoed back in messages. The codecs themselves are in codecs.cpp.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "framework/recipe/schema.h"

namespace laconic {

struct TomlNode {
  const toml::node& node;
};

namespace recipe_detail {

// How a value the user wrote is echoed back in "got ..." (one line, TOML-like).
std::string describe(const toml::node& node);

}  // namespace recipe_detail
}  // namespace laconic
