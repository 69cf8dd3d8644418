// The checks of a recipe that span keys (train.steps with train.epochs, model.heads with model.dim,
// the strategies' traits with the rest, ...), run once every key and override is read.
#pragma once

#include "framework/recipe/draft.h"

namespace laconic::recipe_detail {

// InputError pointing at the latest of the keys in conflict to be set (file and line, or override).
void check_cross_fields(const Draft& d);

}  // namespace laconic::recipe_detail
