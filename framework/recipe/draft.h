#pragma once

#include <string>
#include <utility>
#include <vector>

#include "framework/recipe/components.h"
#include "framework/recipe/fields.h"
#include "framework/recipe/recipe.h"

namespace laconic::recipe_detail {

// The recipe being built, with where each value came from so that cross-field errors can point
// at the line (or override) that set it.
struct Draft {
  Recipe recipe;
  std::string file;
  std::vector<std::string> origin;        // per schema() index; "" = default
  std::vector<int> order;                 // per schema() index; when it was set (0 = never)
  std::vector<std::pair<std::string, std::string>> sections;  // section -> "FILE:LINE:COL"
  int next = 1;

  explicit Draft(std::string name) : file(std::move(name)) {
    register_builtins();  // before sizing by schema(): the built-ins' sections add keys to it
    origin.resize(schema().size());
    order.resize(schema().size());
    recipe.path = file;
  }
};

}  // namespace laconic::recipe_detail
