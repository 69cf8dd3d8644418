// The recipe schema's building blocks, shared by the built-in sections (builtin_schema.cpp) and the
// sections user code registers with a model, dataset, optimizer, reducer or strategy
// (framework/recipe/registry.h): a key is a Field that binds "section.key" to a member of the
// section's options struct with a Bound; the member's C++ type picks the FieldCodec that reads,
// checks, prints and describes it. Unknown keys, wrong types and out-of-bound values are rejected
// with FILE:LINE:COL the same way for both.
//
//   struct MyCnnOptions { int channels = 16; double dropout = 0.1; bool operator==(const MyCnnOptions&) const = default; };
//   laconic::Section<MyCnnOptions>()
//       .add<&MyCnnOptions::channels>("channels", laconic::at_least(1))
//       .add<&MyCnnOptions::dropout>("dropout", laconic::half_open(0, 1))
//
// Member types: int, std::int64_t, std::uint64_t, float, double, bool, std::string (non-empty),
// std::vector<int>, std::vector<std::string>, FilePath, Bandwidth ("100 Gbit/s"), Duration
// ("30 ms"), AutoBool, AutoNumber<int>, AutoNumber<double>, and enums that declare their names
// (core/enum_names.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/enum_names.h"

namespace laconic {

// ---- value types with units or a "none" ----

// Quantities with units: recipes write "100 Gbit/s" and "30 ms" (or plain numbers in bytes/s
// and seconds).
struct Bandwidth {
  double bytes_per_s = 0;
  bool operator==(const Bandwidth&) const = default;
};
struct Duration {
  double seconds = 0;
  bool operator==(const Duration&) const = default;
};
// A file path, possibly empty (none).
struct FilePath {
  std::string path;
  bool empty() const { return path.empty(); }
  bool operator==(const FilePath&) const = default;
};
// A list of ranks, possibly empty.
struct RankList {
  std::vector<int> ranks;
  bool operator==(const RankList&) const = default;
};
// true, false, or "auto" (unset: the default that depends on other keys).
struct AutoBool {
  std::optional<bool> value;
  bool resolve(bool otherwise) const { return value.value_or(otherwise); }
  bool operator==(const AutoBool&) const = default;
};
// A number or "auto", as AutoBool: unset, the key takes the value another key gives.
template <typename T>
struct AutoNumber {
  std::optional<T> value;
  T resolve(T otherwise) const { return value.value_or(otherwise); }
  bool operator==(const AutoNumber&) const = default;
};

// ---- bounds ----

// An interval on the number line; integer, float and list-of-integer keys share it.
struct Bound {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;

  bool admits(double v) const { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); }
  std::string text() const;  // " >= 1", " > 0", " in [0, 1)", or "" when unbounded
};

constexpr Bound at_least(double lo) { return {.lo = lo}; }
constexpr Bound above(double lo) { return {.lo = lo, .lo_open = true}; }
constexpr Bound closed(double lo, double hi) { return {.lo = lo, .hi = hi}; }
constexpr Bound half_open(double lo, double hi) { return {.lo = lo, .hi = hi, .hi_open = true}; }

// ---- codecs ----

// A TOML value as the parser saw it (wraps toml++'s node; defined in codecs.h).
struct TomlNode;

// One per member type:
//   expected(bound)         what a valid value looks like, for messages
//   read(node, bound, out)  false when the node is the wrong type or out of bound (out untouched)
//   write(value)            TOML text that read() accepts back as the same value
// Defined in codecs.cpp for the types listed at the top; enums are handled here, by name.
template <typename V>
struct FieldCodec {
  static std::string expected(const Bound& b);
  static bool read(const TomlNode& node, const Bound& b, V& out);
  static std::string write(const V& v);
};

namespace schema_detail {
std::string quote(std::string_view s);                 // a one-line TOML basic string
std::optional<std::string> read_string(const TomlNode& node);  // the node's string, if it is one
}  // namespace schema_detail

template <typename E>
  requires std::is_enum_v<E>
struct FieldCodec<E> {
  static std::string expected(const Bound&) {
    std::string out = "one of ";
    bool first = true;
    for (const char* n : names(E{})) {
      out += (first ? "" : ", ") + schema_detail::quote(n);
      first = false;
    }
    return out;
  }
  static bool read(const TomlNode& node, const Bound&, E& out) {
    const auto s = schema_detail::read_string(node);
    if (!s) return false;
    const auto all = names(E{});
    const auto it = std::find(all.begin(), all.end(), std::string_view(*s));
    if (it == all.end()) return false;
    out = static_cast<E>(it - all.begin());
    return true;
  }
  static std::string write(const E& v) { return schema_detail::quote(enum_name(v)); }
};

// ---- fields and sections ----

struct Recipe;

// One recipe key. `read` and `write` work on the struct of the key's section: a built-in section
// finds it in the Recipe through `builtin`; a registered one (builtin == nullptr) is looked up in
// Recipe::sections by name.
struct Field {
  std::string section;
  std::string key;
  Bound bound;
  std::string (*expected)(const Bound&);
  bool (*read)(const TomlNode&, const Bound&, void* section);  // false: rejected, untouched
  std::string (*write)(const void* section);
  void* (*builtin)(Recipe&) = nullptr;

  std::string path() const { return section + "." + key; }
};

// A registered section's type: how to make, copy and compare its struct without knowing it.
struct SectionType {
  std::shared_ptr<void> (*make)();
  std::shared_ptr<void> (*clone)(const void*);
  bool (*equal)(const void*, const void*);
  const std::type_info* type;
};

template <typename T>
const SectionType& section_type() {
  static const SectionType t{[]() -> std::shared_ptr<void> { return std::make_shared<T>(); },
                             [](const void* p) -> std::shared_ptr<void> { return std::make_shared<T>(*static_cast<const T*>(p)); },
                             [](const void* a, const void* b) { return *static_cast<const T*>(a) == *static_cast<const T*>(b); },
                             &typeid(T)};
  return t;
}

// A section's keys, its struct's type erased (Section<T> builds one). No type: no section.
struct SectionSchema {
  const SectionType* type = nullptr;
  std::vector<Field> fields;  // section names filled in at registration
};

// The keys of an options struct T (default-constructible, copyable, ==): its defaults are the
// recipe's defaults.
template <typename T>
struct Section {
  SectionSchema schema{&section_type<T>(), {}};

  template <auto Member>
  Section& add(std::string key, Bound bound = {}) {
    using V = std::remove_cvref_t<decltype(std::declval<T&>().*Member)>;
    schema.fields.push_back(Field{"", std::move(key), bound, &FieldCodec<V>::expected,
                                  [](const TomlNode& n, const Bound& b, void* s) {
                                    return FieldCodec<V>::read(n, b, static_cast<T*>(s)->*Member);
                                  },
                                  [](const void* s) { return FieldCodec<V>::write(static_cast<const T*>(s)->*Member); }});
    return *this;
  }
  operator SectionSchema() const { return schema; }  // NOLINT: a Section is passed where a schema is taken
};

// The registered sections' values in one recipe ([model.my_cnn], ...): deep copies on copy
// (copy on write), compared by value.
class SectionValues {
 public:
  // The section's struct, or a default one when the recipe does not hold the section (it was
  // built in code). Error when the section holds another type.
  template <typename T>
  const T& get(std::string_view section) const {
    const Entry* e = find(section);
    if (!e) {
      static const T defaults{};
      return defaults;
    }
    LC_CHECK(*e->type->type == typeid(T), "recipe section [", section, "] holds another type than the one asked for");
    return *static_cast<const T*>(e->value.get());
  }
  template <typename T>
  void set(std::string section, T value) {
    *static_cast<T*>(mutable_section(section, section_type<T>())) = std::move(value);
  }
  // The section's struct for writing (made with its defaults when absent).
  void* mutable_section(const std::string& section, const SectionType& type);
  const void* section(std::string_view section) const {
    const Entry* e = find(section);
    return e ? e->value.get() : nullptr;
  }
  bool operator==(const SectionValues& other) const;

 private:
  struct Entry {
    std::string section;
    std::shared_ptr<void> value;
    const SectionType* type;
  };
  const Entry* find(std::string_view section) const {
    for (const Entry& e : entries_)
      if (e.section == section) return &e;
    return nullptr;
  }
  std::vector<Entry> entries_;
};

}  // namespace laconic
