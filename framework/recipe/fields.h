// The table of recipe keys: the built-in ones (builtin_schema.h), then the keys of the sections
// components register (components.h: register_section); how a key path finds its Field, and the
// messages for a key or section that is not in the table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "framework/recipe/schema.h"

namespace laconic::recipe_detail {

// Every recipe key: the built-in ones, then the registered sections'.
const std::vector<Field>& schema();

// The struct a field reads into.
void* section_of(const Field& f, Recipe& r);
const void* section_of(const Field& f, const Recipe& r);

// The field of "section.key"; nullptr when there is none.
const Field* find_field(std::string_view path);
bool is_section(std::string_view name);

std::string unknown_section_message(std::string_view section);
// For a path whose section exists (or that has no section at all, like a top-level "steps = 1").
std::string unknown_key_message(std::string_view path);

}  // namespace laconic::recipe_detail
