// Recipe parsing and overrides, driven by one table of keys (fields.h: the built-in ones of
// builtin_schema.cpp, then the registered sections'): each entry binds a TOML key path to a Recipe
// member with its validation bound. The member's C++ type picks a codec (codecs.cpp) that knows how
// to read, check, print and describe that kind of value, so adding a key is one line in
// builtin_schema() and nothing else. The checks that span keys are in checks.cpp.
#include <string_view>
#include <utility>

#include <toml++/toml.h>

#include "core/check.h"
#include "core/input.h"
#include "framework/recipe/checks.h"
#include "framework/recipe/codecs.h"
#include "framework/recipe/draft.h"
#include "framework/recipe/fields.h"
#include "framework/recipe/recipe.h"
#include "framework/recipe/recipe_text.h"

namespace laconic {

using recipe_detail::check_cross_fields;
using recipe_detail::describe;
using recipe_detail::Draft;
using recipe_detail::find_field;
using recipe_detail::is_section;
using recipe_detail::one_line;
using recipe_detail::schema;
using recipe_detail::section_of;
using recipe_detail::unknown_key_message;
using recipe_detail::unknown_section_message;

namespace {

// ---- loading ----

std::string at(std::string_view file, const toml::source_region& where) {
  return detail::concat(file, ":", where.begin.line, ":", where.begin.column);
}

// Sets one field from a TOML node. `where` prefixes errors: "FILE:L:C" (then the key is named)
// or "--key=value" (which names it already).
void assign(Draft& d, const Field& f, const toml::node& node, const std::string& where, bool name_key) {
  if (!f.read(TomlNode{node}, f.bound, section_of(f, d.recipe)))
    LC_INPUT_ERROR(where, ": ", name_key ? f.path() + ": " : "", "expected ", f.expected(f.bound),
                   ", got ", describe(node));
  const auto index = static_cast<std::size_t>(&f - schema().data());
  d.origin[index] = where;
  d.order[index] = d.next++;
}

// The keys of [name], and its subsections ([sync] holds [sync.topk]).
void apply_section(Draft& d, const std::string& name, const toml::table& table) {
  d.sections.emplace_back(name, at(d.file, table.source()));
  for (const auto& [key, value] : table) {
    const std::string path = detail::concat(name, ".", key.str());
    if (const Field* f = find_field(path)) {
      assign(d, *f, value, at(d.file, key.source()), true);
    } else if (is_section(path)) {
      const auto* sub = value.as_table();
      if (!sub) LC_INPUT_ERROR(at(d.file, key.source()), ": ", path, ": expected a table, got ", describe(value));
      apply_section(d, path, *sub);
    } else if (value.is_table()) {  // a subsection misspelt: [model.my_cnnn] is table "my_cnnn" of [model]
      LC_INPUT_ERROR(at(d.file, key.source()), ": ", unknown_section_message(path));
    } else {
      LC_INPUT_ERROR(at(d.file, key.source()), ": ", unknown_key_message(path));
    }
  }
}

void apply_table(Draft& d, const toml::table& root) {
  for (const auto& [section, node] : root) {
    const std::string where = at(d.file, section.source());
    const auto* table = node.as_table();
    if (!table) {
      if (is_section(section.str()))
        LC_INPUT_ERROR(where, ": ", section.str(), ": expected a table, got ", describe(node));
      LC_INPUT_ERROR(where, ": ", unknown_key_message(section.str()));
    }
    if (!is_section(section.str()))
      LC_INPUT_ERROR(at(d.file, node.source()), ": ", unknown_section_message(section.str()));
    apply_section(d, std::string(section.str()), *table);
  }
}

// "section.key=value": value in TOML syntax, or a bare string when it is not valid TOML or when
// only its bare-string reading fits the key (--run.name=2024).
void apply_override(Draft& d, const std::string& text) {
  const std::string where = "--" + one_line(text);
  const auto eq = text.find('=');
  if (eq == std::string::npos) LC_INPUT_ERROR(where, ": expected section.key=value");
  const std::string path = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  const Field* f = find_field(path);
  if (!f) LC_INPUT_ERROR(where, ": ", unknown_key_message(path));

  toml::table parsed;
  try {
    parsed = toml::parse("x = " + value, std::string_view("override"));
  } catch (const toml::parse_error&) {
    parsed.clear();
  }
  const toml::value<std::string> bare(value);
  const toml::node* node = parsed.size() == 1 ? parsed.get("x") : nullptr;
  if (node && f->read(TomlNode{*node}, f->bound, section_of(*f, d.recipe))) {
    assign(d, *f, *node, where, false);  // re-reads: cheap, and records the origin in one place
  } else if (f->read(TomlNode{bare}, f->bound, section_of(*f, d.recipe))) {
    assign(d, *f, bare, where, false);
  } else {
    assign(d, *f, node ? *node : static_cast<const toml::node&>(bare), where, false);  // throws
  }
}

}  // namespace

Recipe parse_recipe(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides) {
  Draft d(name);
  try {
    apply_table(d, toml::parse(text, std::string_view(name)));
  } catch (const toml::parse_error& e) {
    LC_INPUT_ERROR(at(name, e.source()), ": TOML syntax error: ", one_line(e.description()));
  }
  for (const auto& o : overrides) apply_override(d, o);
  check_cross_fields(d);
  return d.recipe;
}

namespace {
std::string read_recipe_text(const std::string& path) { return read_input_file(path, kMaxRecipeBytes, "recipe"); }
}  // namespace

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_recipe(read_recipe_text(path), path, overrides);
}

Recipe with_network_file(const Recipe& base, const std::string& path) {
  const std::string text = read_recipe_text(path);
  Draft d(path);
  d.recipe = base;
  d.recipe.network = NetworkConfig{};
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    LC_INPUT_ERROR(at(path, e.source()), ": TOML syntax error: ", one_line(e.description()));
  }
  const auto* net = root.get_as<toml::table>("network");
  for (const auto& [section, node] : root)
    if (section.str() != "network" || !net)
      LC_INPUT_ERROR(at(path, section.source()), ": a network file holds only a [network] table, got '", section.str(), "'");
  if (!net) LC_INPUT_ERROR(path, ": expected a [network] table");
  apply_section(d, "network", *net);
  check_cross_fields(d);
  d.recipe.path = base.path;
  return d.recipe;
}

}  // namespace laconic
