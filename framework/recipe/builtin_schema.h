// The built-in recipe keys ([run] to [fault]), each bound to its member of Recipe (recipe.h).
#pragma once

#include <vector>

#include "framework/recipe/schema.h"

namespace laconic::recipe_detail {

// Every built-in recipe key, in the order to_toml() prints them. Ranges are the ones documented in recipe.h.
const std::vector<Field>& builtin_schema();

}  // namespace laconic::recipe_detail
