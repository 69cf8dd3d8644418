// The field codecs: one per C++ member type of a recipe key, behind schema.h's FieldCodec; and
// schema.h's Bound and SectionValues.
#include "framework/recipe/codecs.h"

#include <charconv>
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/units.h"
#include "framework/recipe/recipe.h"
#include "framework/recipe/recipe_text.h"

namespace laconic {

std::string recipe_detail::describe(const toml::node& node) {
  if (const auto* s = node.as_string()) return quote(s->get());
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return format_float(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* a = node.as_array()) {
    // A long array is echoed by its first values and its length: the message stays readable.
    constexpr std::size_t kEchoed = 8;
    std::string out;
    for (std::size_t i = 0; i < a->size() && i < kEchoed; ++i) out += (i ? ", " : "") + describe((*a)[i]);
    if (a->size() > kEchoed) out += ", ... (" + std::to_string(a->size()) + " values)";
    return "[" + out + "]";
  }
  if (const auto* t = node.as_table()) {  // inline tables (phases) are echoed; [sections] are not
    if (!t->is_inline()) return "a table";
    std::string out;
    for (const auto& [key, value] : *t) out += (out.empty() ? "" : ", ") + one_line(key.str()) + " = " + describe(value);
    return "{" + out + "}";
  }
  std::ostringstream os;  // dates and times
  node.visit([&os](const auto& v) { os << v; });
  return os.str();
}

namespace {

using recipe_detail::format_float;
using recipe_detail::join;
using recipe_detail::quote;

// ---- codecs: one per C++ member type ----
//   expected(bound)  what a valid value looks like, for messages
//   read(node, bound) the checked value, or nullopt when the node is the wrong type or out of bound
//   write(value)     TOML text that read() accepts back as the same value

template <typename T>
struct ValueCodec;

template <typename T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;

template <Integer T>
struct ValueCodec<T> {
  static std::string expected(const Bound& b) { return "an integer" + b.text(); }
  static std::optional<T> read(const toml::node& node, const Bound& b) {
    const auto* v = node.as_integer();  // floats are rejected: 64.0 is not a batch size
    if (!v || !std::in_range<T>(v->get()) || !b.admits(static_cast<double>(v->get())))
      return std::nullopt;
    return static_cast<T>(v->get());
  }
  static std::string write(T v) { return std::to_string(v); }
};

template <std::floating_point T>
struct ValueCodec<T> {
  static std::string expected(const Bound& b) { return "a number" + b.text(); }
  static std::optional<T> read(const toml::node& node, const Bound& b) {
    double v = 0;
    if (const auto* f = node.as_floating_point()) {
      v = f->get();
    } else if (const auto* i = node.as_integer()) {
      v = static_cast<double>(i->get());  // steps-like integers are fine where a float is expected
    } else {
      return std::nullopt;
    }
    // Range first: narrowing a double beyond the float range (dropout = 1e308) is undefined.
    if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<T>::max() || !b.admits(v)) return std::nullopt;
    return static_cast<T>(v);
  }
  static std::string write(T v) { return format_float(v); }
};

template <>
struct ValueCodec<bool> {
  static std::string expected(const Bound&) { return "a boolean (true or false)"; }
  static std::optional<bool> read(const toml::node& node, const Bound&) {
    return node.value_exact<bool>();
  }
  static std::string write(bool v) { return v ? "true" : "false"; }
};

template <>
struct ValueCodec<std::string> {
  static std::string expected(const Bound&) { return "a non-empty string"; }
  static std::optional<std::string> read(const toml::node& node, const Bound&) {
    const auto* s = node.as_string();
    if (!s || s->get().empty()) return std::nullopt;
    return s->get();
  }
  static std::string write(const std::string& v) { return quote(v); }
};

template <>
struct ValueCodec<std::vector<int>> {
  static std::string expected(const Bound& b) { return "a non-empty array of integers" + b.text(); }
  static std::optional<std::vector<int>> read(const toml::node& node, const Bound& b) {
    const auto* a = node.as_array();
    if (!a || a->empty()) return std::nullopt;
    std::vector<int> out;
    for (const auto& item : *a) {
      const auto v = ValueCodec<int>::read(item, b);
      if (!v) return std::nullopt;
      out.push_back(*v);
    }
    return out;
  }
  static std::string write(const std::vector<int>& v) {
    return "[" + join(v, ", ", ValueCodec<int>::write) + "]";
  }
};

template <>
struct ValueCodec<std::vector<std::string>> {
  static std::string expected(const Bound&) { return "a non-empty array of strings"; }
  static std::optional<std::vector<std::string>> read(const toml::node& node, const Bound&) {
    const auto* a = node.as_array();
    if (!a || a->empty()) return std::nullopt;
    std::vector<std::string> out;
    for (const auto& item : *a) {
      const auto* s = item.as_string();
      if (!s) return std::nullopt;
      out.push_back(s->get());
    }
    return out;
  }
  static std::string write(const std::vector<std::string>& v) { return "[" + join(v, ", ", quote) + "]"; }
};

template <>
struct ValueCodec<FilePath> {
  static std::string expected(const Bound&) { return "a file path (a string; \"\" for none)"; }
  static std::optional<FilePath> read(const toml::node& node, const Bound&) {
    const auto* s = node.as_string();
    if (!s) return std::nullopt;
    return FilePath{s->get()};
  }
  static std::string write(const FilePath& v) { return quote(v.path); }
};

// A possibly empty list of ranks (>= 0).
template <>
struct ValueCodec<RankList> {
  static std::string expected(const Bound&) { return "an array of rank numbers (integers >= 0)"; }
  static std::optional<RankList> read(const toml::node& node, const Bound&) {
    const auto* a = node.as_array();
    if (!a) return std::nullopt;
    RankList out;
    for (const auto& item : *a) {
      const auto v = ValueCodec<int>::read(item, at_least(0));
      if (!v) return std::nullopt;
      out.ranks.push_back(*v);
    }
    return out;
  }
  static std::string write(const RankList& v) { return "[" + join(v.ranks, ", ", ValueCodec<int>::write) + "]"; }
};

template <>
struct ValueCodec<AutoBool> {
  static std::string expected(const Bound&) { return "true, false or \"auto\""; }
  static std::optional<AutoBool> read(const toml::node& node, const Bound&) {
    if (const auto b = node.value_exact<bool>()) return AutoBool{*b};
    if (const auto* s = node.as_string(); s && s->get() == "auto") return AutoBool{};
    return std::nullopt;
  }
  static std::string write(const AutoBool& v) { return v.value ? (*v.value ? "true" : "false") : "\"auto\""; }
};

template <typename T>
struct ValueCodec<AutoNumber<T>> {
  static std::string expected(const Bound& b) { return ValueCodec<T>::expected(b) + " or \"auto\""; }
  static std::optional<AutoNumber<T>> read(const toml::node& node, const Bound& b) {
    if (const auto* s = node.as_string(); s && s->get() == "auto") return AutoNumber<T>{};
    const auto v = ValueCodec<T>::read(node, b);
    if (!v) return std::nullopt;
    return AutoNumber<T>{*v};
  }
  static std::string write(const AutoNumber<T>& v) { return v.value ? ValueCodec<T>::write(*v.value) : "\"auto\""; }
};

// Quantities with units: a string parsed by core/units.h, or a plain number in base units.
// Written back with units when that text reads back exactly, else as the plain number.
template <typename Q, auto Member, auto Parse, auto Format>
struct UnitCodec {
  static std::optional<Q> read(const toml::node& node, const Bound& b) {
    std::optional<double> v;
    if (const auto* s = node.as_string()) v = Parse(s->get());
    else v = ValueCodec<double>::read(node, {});
    if (!v || !b.admits(*v)) return std::nullopt;
    Q q;
    q.*Member = *v;
    return q;
  }
  static std::string write(const Q& q) {
    const std::string text = Format(q.*Member);
    const auto back = Parse(text);
    return back && *back == q.*Member ? quote(text) : format_float(q.*Member);
  }
};

template <>
struct ValueCodec<Bandwidth> : UnitCodec<Bandwidth, &Bandwidth::bytes_per_s, parse_bandwidth, format_bandwidth> {
  static std::string expected(const Bound&) {
    return "a bandwidth like \"100 Gbit/s\" or \"450 GB/s\" (units bit/s..Tbit/s, B/s..TB/s)";
  }
};

template <>
struct ValueCodec<Duration> : UnitCodec<Duration, &Duration::seconds, parse_duration, format_duration> {
  static std::string expected(const Bound&) {
    return "a duration like \"5 us\", \"30 ms\" or \"3h50m\" (units ns, us, ms, s, min; h, m, s combined)";
  }
};

// A component's name: one of the built-in or registered names (components.h).
template <Component C>
struct ValueCodec<ComponentName<C>> {
  static std::string expected(const Bound&) {
    return "one of " + join(component_names(C), ", ", [](const std::string& n) { return quote(n); });
  }
  static std::optional<ComponentName<C>> read(const toml::node& node, const Bound&) {
    const auto* s = node.as_string();
    if (!s || !has_component(C, s->get())) return std::nullopt;
    return ComponentName<C>{s->get()};
  }
  static std::string write(const ComponentName<C>& v) { return quote(v.value); }
};

// A strategy schedule: an array of inline tables {strategy = "...", steps = N}; every phase but
// the last needs steps >= 1; the last may omit it (or give 0): it runs to the end.
template <>
struct ValueCodec<SyncPhases> {
  static std::string expected(const Bound&) {
    return "an array of phases like [{strategy = \"allreduce\", steps = 500}, {strategy = \"powersgd\"}] "
           "(steps >= 1 except in the last phase; strategies: " +
           join(component_names(Component::strategy), ", ", [](const std::string& n) { return quote(n); }) + ")";
  }
  static std::optional<SyncPhases> read(const toml::node& node, const Bound&) {
    const auto* a = node.as_array();
    if (!a) return std::nullopt;
    SyncPhases out;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* t = (*a)[i].as_table();
      if (!t) return std::nullopt;
      SyncPhase p;
      for (const auto& [key, value] : *t) {
        if (key.str() == "strategy") {
          const auto s = ValueCodec<StrategyName>::read(value, {});
          if (!s) return std::nullopt;
          p.strategy = *s;
        } else if (key.str() == "steps") {
          const auto n = ValueCodec<std::int64_t>::read(value, at_least(0));
          if (!n) return std::nullopt;
          p.steps = *n;
        } else {
          return std::nullopt;
        }
      }
      if (!t->contains("strategy") || (p.steps == 0 && i + 1 < a->size())) return std::nullopt;
      out.phases.push_back(p);
    }
    return out;
  }
  static std::string write(const SyncPhases& v) {
    return "[" + join(v.phases, ", ", [](const SyncPhase& p) {
             return "{ strategy = " + ValueCodec<StrategyName>::write(p.strategy) +
                    (p.steps > 0 ? ", steps = " + ValueCodec<std::int64_t>::write(p.steps) : std::string()) + " }";
           }) + "]";
  }
};

// A period schedule: an array of inline tables {steps = N, period = H}, steps a multiple of its
// period (>= 1) except in the last segment, which may omit steps (or give 0): it runs to the end.
template <>
struct ValueCodec<PeriodSchedule> {
  static std::string expected(const Bound&) {
    return "an array of segments like [{steps = 200, period = 10}, {period = 50}] (period >= 1; steps a "
           "multiple of the period, >= 1 except in the last segment)";
  }
  static std::optional<PeriodSchedule> read(const toml::node& node, const Bound&) {
    const auto* a = node.as_array();
    if (!a) return std::nullopt;
    PeriodSchedule out;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* t = (*a)[i].as_table();
      if (!t || !t->contains("period")) return std::nullopt;
      PeriodSegment seg;
      for (const auto& [key, value] : *t) {
        const bool steps = key.str() == "steps";
        if (!steps && key.str() != "period") return std::nullopt;
        const auto n = ValueCodec<std::int64_t>::read(value, at_least(steps ? 0 : 1));
        if (!n) return std::nullopt;
        (steps ? seg.steps : seg.period) = *n;
      }
      if ((seg.steps == 0 && i + 1 < a->size()) || seg.steps % seg.period != 0) return std::nullopt;
      out.segments.push_back(seg);
    }
    return out;
  }
  static std::string write(const PeriodSchedule& v) {
    return "[" + join(v.segments, ", ", [](const PeriodSegment& p) {
             return "{ " + (p.steps > 0 ? "steps = " + ValueCodec<std::int64_t>::write(p.steps) + ", " : std::string()) +
                    "period = " + ValueCodec<std::int64_t>::write(p.period) + " }";
           }) + "]";
  }
};

}  // namespace

// ---- FieldCodec: the codecs above behind schema.h's type-erased interface ----

template <typename V>
std::string FieldCodec<V>::expected(const Bound& b) {
  return ValueCodec<V>::expected(b);
}
template <typename V>
bool FieldCodec<V>::read(const TomlNode& n, const Bound& b, V& out) {
  auto v = ValueCodec<V>::read(n.node, b);
  if (v) out = std::move(*v);
  return v.has_value();
}
template <typename V>
std::string FieldCodec<V>::write(const V& v) {
  return ValueCodec<V>::write(v);
}
// The member types registered sections may use (schema.h) ...
template struct FieldCodec<int>;
template struct FieldCodec<std::int64_t>;
template struct FieldCodec<std::uint64_t>;
template struct FieldCodec<float>;
template struct FieldCodec<double>;
template struct FieldCodec<bool>;
template struct FieldCodec<std::string>;
template struct FieldCodec<std::vector<int>>;
template struct FieldCodec<std::vector<std::string>>;
template struct FieldCodec<FilePath>;
template struct FieldCodec<Bandwidth>;
template struct FieldCodec<Duration>;
template struct FieldCodec<AutoBool>;
template struct FieldCodec<AutoNumber<int>>;
template struct FieldCodec<AutoNumber<double>>;
// ... and the ones only the built-in schema (builtin_schema.cpp) has; its enums are schema.h's.
template struct FieldCodec<RankList>;
template struct FieldCodec<ModelName>;
template struct FieldCodec<DataName>;
template struct FieldCodec<OptimizerName>;
template struct FieldCodec<ReducerName>;
template struct FieldCodec<StrategyName>;
template struct FieldCodec<SyncPhases>;
template struct FieldCodec<PeriodSchedule>;

namespace schema_detail {
std::string quote(std::string_view s) { return recipe_detail::quote(s); }
std::optional<std::string> read_string(const TomlNode& n) {
  if (const auto* s = n.node.as_string()) return s->get();
  return std::nullopt;
}
}  // namespace schema_detail

std::string Bound::text() const {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  auto num = [](double v) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  if (has_lo && has_hi) return detail::concat(" in ", lo_open ? "(" : "[", num(lo), ", ", num(hi), hi_open ? ")" : "]");
  if (has_lo) return detail::concat(lo_open ? " > " : " >= ", num(lo));
  if (has_hi) return detail::concat(hi_open ? " < " : " <= ", num(hi));
  return "";
}

void* SectionValues::mutable_section(const std::string& section, const SectionType& type) {
  for (Entry& e : entries_) {
    if (e.section != section) continue;
    LC_CHECK(e.type == &type, "recipe section [", section, "] holds another type");
    if (e.value.use_count() > 1) e.value = type.clone(e.value.get());  // copy on write
    return e.value.get();
  }
  entries_.push_back({section, type.make(), &type});
  return entries_.back().value.get();
}

bool SectionValues::operator==(const SectionValues& other) const {
  // Equal when every section either holds has the same value in the other, or (absent there) its defaults.
  const auto covered = [](const SectionValues& a, const SectionValues& b) {
    for (const Entry& e : a.entries_) {
      const Entry* o = b.find(e.section);
      const std::shared_ptr<void> defaults = o ? nullptr : e.type->make();
      if (!e.type->equal(e.value.get(), o ? o->value.get() : defaults.get())) return false;
    }
    return true;
  };
  return covered(*this, other) && covered(other, *this);
}

}  // namespace laconic
