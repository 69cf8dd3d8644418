#include "framework/recipe/fields.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "core/check.h"
#include "framework/recipe/builtin_schema.h"
#include "framework/recipe/recipe.h"
#include "framework/recipe/recipe_text.h"

namespace laconic {
namespace recipe_detail {
namespace {

// ---- registered components ----

struct Registered {
  struct Section {
    Component component;
    std::string name;     // the component's
    std::string section;  // "model.NAME", ...
    const SectionType* type;
    std::shared_ptr<void> defaults;
  };
  std::vector<Section> sections;
  std::vector<Field> fields;  // builtin_schema() then the registered sections' keys
  Registered() : fields(builtin_schema()) {}
  const Section* find(std::string_view section) const {
    for (const Section& s : sections)
      if (s.section == section) return &s;
    return nullptr;
  }
};
Registered& registered() {
  static Registered r;
  return r;
}

}  // namespace

const std::vector<Field>& schema() { return registered().fields; }

void* section_of(const Field& f, Recipe& r) {
  if (f.builtin) return f.builtin(r);
  const Registered::Section* s = registered().find(f.section);
  LC_CHECK(s, "no registered section [", f.section, "]");
  return r.sections.mutable_section(f.section, *s->type);
}
const void* section_of(const Field& f, const Recipe& r) {
  if (f.builtin) return f.builtin(const_cast<Recipe&>(r));  // read only
  if (const void* v = r.sections.section(f.section)) return v;
  const Registered::Section* s = registered().find(f.section);
  LC_CHECK(s, "no registered section [", f.section, "]");
  return s->defaults.get();
}

namespace {

// Printed and hashed: every built-in key; a registered section's keys when its component is used.
bool printed(const Field& f, const Recipe& r) {
  if (f.builtin) return true;
  const Registered::Section* s = registered().find(f.section);
  return s && uses_component(r, s->component, s->name);
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& f : schema())
    if (out.empty() || out.back() != f.section) out.emplace_back(f.section);
  for (const auto& s : registered().sections)  // a registered section may have no keys yet
    if (std::find(out.begin(), out.end(), s.section) == out.end()) out.push_back(s.section);
  return out;
}

std::vector<std::string> keys_in(std::string_view section) {
  std::vector<std::string> out;
  for (const auto& f : schema())
    if (f.section == section) out.emplace_back(f.key);
  return out;
}

}  // namespace

const Field* find_field(std::string_view path) {
  for (const auto& f : schema())  // f.path() == path, without building the string (a hot loop)
    if (path.size() == f.section.size() + 1 + f.key.size() && path.starts_with(f.section) &&
        path[f.section.size()] == '.' && path.ends_with(f.key))
      return &f;
  // A registered section without keys of its own is still a section (is_section), never a key.
  return nullptr;
}

bool is_section(std::string_view name) {
  const auto all = section_names();
  return std::find(all.begin(), all.end(), name) != all.end();
}

std::string unknown_section_message(std::string_view section) {
  const auto all = section_names();
  const auto guess = closest(section, all);
  return detail::concat("unknown section [", one_line(section), "] (",
                        guess ? "did you mean [" + *guess + "]? " : "",
                        "valid sections: ", join(all, ", ", std::identity{}), ")");
}

std::string unknown_key_message(std::string_view path) {
  const auto dot = path.rfind('.');
  const std::string_view section = dot == std::string_view::npos ? "" : path.substr(0, dot);
  const std::string_view key = dot == std::string_view::npos ? path : path.substr(dot + 1);
  if (!section.empty() && !is_section(section)) return unknown_section_message(section);

  // A typo inside the section first; else the same key in another section ("train.lr").
  std::optional<std::string> guess;
  if (!section.empty())
    if (auto k = closest(key, keys_in(section))) guess = detail::concat(section, ".", *k);
  if (!guess)
    for (const auto& f : schema())
      if (f.key == key) guess = f.path();
  const std::string valid =
      section.empty() ? "top-level entries must be sections: " + join(section_names(), ", ", std::identity{})
                      : detail::concat("valid keys in [", section, "]: ",
                                       join(keys_in(section), ", ", std::identity{}));
  return detail::concat("unknown key '", one_line(path), "' (", guess ? "did you mean '" + *guess + "'? " : "",
                        valid, ")");
}

}  // namespace recipe_detail

using recipe_detail::is_section;
using recipe_detail::printed;
using recipe_detail::Registered;
using recipe_detail::registered;
using recipe_detail::schema;
using recipe_detail::section_of;

std::string component_section(Component c, std::string_view name) {
  const char* parent = c == Component::model       ? "model"
                       : c == Component::data      ? "data"
                       : c == Component::optimizer ? "optimizer"
                                                   : "sync";
  return detail::concat(parent, ".", name);
}

void register_section(Component c, const std::string& name, SectionSchema schema) {
  Registered& reg = registered();
  const std::string section = component_section(c, name);
  LC_CHECK(!is_section(section), "register ", enum_name(c), " '", name, "': section [", section, "] exists");
  reg.sections.push_back({c, name, section, schema.type, schema.type->make()});
  for (Field& f : schema.fields) {
    f.section = section;
    f.builtin = nullptr;
    reg.fields.push_back(std::move(f));
  }
}

std::string to_toml(const Recipe& recipe) {
  std::string out =
      "# Laconic recipe, fully resolved: every key with the value the run used (defaults included).\n";
  if (!recipe.path.empty()) out += "# Source: " + recipe.path + "\n";
  std::string section;
  for (const auto& f : schema()) {
    if (!printed(f, recipe)) continue;
    const std::string value = f.write(section_of(f, recipe));
    if (f.section != section) {
      section = f.section;
      out += detail::concat("\n[", section, "]\n");
    }
    out += detail::concat(f.key, " = ", value, "\n");
  }
  return out;
}

}  // namespace laconic
