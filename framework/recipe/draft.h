#pragma once

#include <string>
#include <utility>
#include <vector>

#include "framework/recipe/fields.h"
#include "framework/recipe/recipe.h"
#include "framework/recipe/registry.h"

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

  // The built-ins register on the registry's first use, some with sections of their own (sync.sparta):
  // that happens before the schema is sized here, not while it is walked.
  explicit Draft(std::string name)
      : file(std::move(name)), origin((registry(), schema().size())), order(schema().size()) {
    recipe.path = file;
  }
};

}  // namespace laconic::recipe_detail
