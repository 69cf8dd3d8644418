// Recipes: TOML parsed into typed, validated structs.
#pragma once

#include "framework/recipe/recipe.h"
