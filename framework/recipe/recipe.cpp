// Recipe parsing, overrides and printing, all driven by one schema table (schema() below): each
// entry binds a TOML key path to a Recipe member with its validation bound. The member's C++ type
// picks a Codec that knows how to read, check, print and describe that kind of value, so adding a
// key is one line in schema() and nothing else.
#include "framework/recipe/recipe.h"
#include "framework/data/tokenizer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include <toml++/toml.h>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/input.h"
#include "core/units.h"

namespace laconic {
namespace {

// ---- text helpers ----

// A TOML basic string on one line: used both in to_toml() and in messages, which must stay one line.
// With quotes = false, only control characters are escaped (for names echoed in messages).
std::string escape(std::string_view s, bool quotes = true) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '"': out += quotes ? "\\\"" : "\""; break;
      case '\\': out += quotes ? "\\\\" : "\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}
std::string quote(std::string_view s) { return "\"" + escape(s) + "\""; }
// A name the user wrote (a quoted TOML key may hold a newline), safe to echo in a one-line message.
std::string one_line(std::string_view s) { return escape(s, false); }

// Shortest text that reads back to the same value (std::to_chars guarantees the round trip), always
// spelled as a TOML float so that printing 2.0 does not turn a float key into an integer one.
template <std::floating_point T>
std::string format_float(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  LC_CHECK(res.ec == std::errc(), "to_chars failed");
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <typename Range, typename Fn>
std::string join(const Range& items, std::string_view sep, Fn&& fn) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += fn(item);
  }
  return out;
}

// How a value the user wrote is echoed back in "got ..." (one line, TOML-like).
std::string describe(const toml::node& node) {
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

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `word`, if it is near enough to be a plausible typo.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance && d < std::max(word.size(), c.size())) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

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

struct TomlNode {
  const toml::node& node;
};

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
// The member types registered sections may use (schema.h); the built-in schema instantiates what
// else it needs below.
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

namespace schema_detail {
std::string quote(std::string_view s) { return laconic::quote(s); }
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

namespace {

// ---- the schema ----

// Adds the keys of one built-in section: Path is the chain of members from Recipe to the struct
// holding it (one for [sync], two for [sync.topk]), Member a member of that. The keys of a
// registered section are the same Fields, built by Section<T> (schema.h).
template <auto... Path>
struct SectionBuilder {
  std::string name;
  std::vector<Field>& out;

  template <auto Member>
  SectionBuilder& add(std::string key, Bound bound = {}) {
    using S = std::remove_cvref_t<decltype((std::declval<Recipe&>() .* ... .* Path))>;
    using V = std::remove_cvref_t<decltype(std::declval<S&>().*Member)>;
    out.push_back(Field{name, std::move(key), bound, &FieldCodec<V>::expected,
                        [](const TomlNode& n, const Bound& b, void* sec) {
                          return FieldCodec<V>::read(n, b, static_cast<S*>(sec)->*Member);
                        },
                        [](const void* sec) { return FieldCodec<V>::write(static_cast<const S*>(sec)->*Member); },
                        [](Recipe& r) -> void* { return &(r .* ... .* Path); }});
    return *this;
  }
};

// DiLoCo's keys, shared by [sync.diloco] and [sync.streaming_diloco] (whose config extends it).
template <typename Builder>
Builder&& add_diloco_keys(Builder&& b) {
  b.template add<&DilocoConfig::period>("period", at_least(1))
      .template add<&DilocoConfig::warmup_steps>("warmup_steps", at_least(0))
      .template add<&DilocoConfig::outer_lr>("outer_lr", above(0))
      .template add<&DilocoConfig::outer_momentum>("outer_momentum", half_open(0, 1))
      .template add<&DilocoConfig::nesterov>("nesterov")
      .template add<&DilocoConfig::reducer>("reducer")
      .template add<&DilocoConfig::dtype>("dtype")
      .template add<&DilocoConfig::block>("block", at_least(1))
      .template add<&DilocoConfig::error_feedback>("error_feedback")
      .template add<&DilocoConfig::period_schedule>("period_schedule");
  return std::forward<Builder>(b);
}

// Every built-in recipe key, in the order to_toml() prints them. Ranges are the ones documented in recipe.h.
const std::vector<Field>& builtin_schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> f;
    SectionBuilder<&Recipe::run>{"run", f}
        .add<&RunConfig::name>("name")
        .add<&RunConfig::seed>("seed", at_least(0))
        .add<&RunConfig::out_dir>("out_dir");
    SectionBuilder<&Recipe::model>{"model", f}
        .add<&ModelConfig::name>("name")
        .add<&ModelConfig::hidden>("hidden", at_least(1))
        .add<&ModelConfig::activation>("activation")
        .add<&ModelConfig::dropout>("dropout", half_open(0, 1))
        .add<&ModelConfig::layernorm>("layernorm")
        .add<&ModelConfig::dim>("dim", at_least(1))
        .add<&ModelConfig::layers>("layers", at_least(1))
        .add<&ModelConfig::heads>("heads", at_least(1))
        .add<&ModelConfig::ffn>("ffn", at_least(1))
        .add<&ModelConfig::init_from>("init_from");
    SectionBuilder<&Recipe::data>{"data", f}
        .add<&DataConfig::name>("name")
        .add<&DataConfig::path>("path")
        .add<&DataConfig::seq_len>("seq_len", closed(2, 4096))
        .add<&DataConfig::vocab_size>("vocab_size", closed(1, 1 << 20))
        .add<&DataConfig::eval_fraction>("eval_fraction", half_open(0, 1))
        .add<&DataConfig::mask_prob>("mask_prob", Bound{.lo = 0, .hi = 1, .lo_open = true, .hi_open = true})
        .add<&DataConfig::extensions>("extensions")
        .add<&DataConfig::lowercase>("lowercase")
        .add<&DataConfig::train_path>("train_path")
        .add<&DataConfig::val_path>("val_path")
        .add<&DataConfig::token_format>("token_format");
    SectionBuilder<&Recipe::train>{"train", f}
        .add<&TrainConfig::steps>("steps", at_least(0))
        .add<&TrainConfig::epochs>("epochs", at_least(0))
        .add<&TrainConfig::micro_batch>("micro_batch", at_least(1))
        .add<&TrainConfig::grad_accum>("grad_accum", at_least(1))
        .add<&TrainConfig::eval_every>("eval_every", at_least(0))
        .add<&TrainConfig::log_every>("log_every", at_least(1))
        .add<&TrainConfig::noise_scale>("noise_scale")
        .add<&TrainConfig::trace>("trace")
        .add<&TrainConfig::time_limit>("time_limit", at_least(0));
    SectionBuilder<&Recipe::optimizer>{"optimizer", f}
        .add<&OptimizerConfig::name>("name")
        .add<&OptimizerConfig::lr>("lr", above(0))
        .add<&OptimizerConfig::momentum>("momentum", half_open(0, 1))
        .add<&OptimizerConfig::nesterov>("nesterov")
        .add<&OptimizerConfig::weight_decay>("weight_decay", at_least(0))
        .add<&OptimizerConfig::beta1>("beta1", half_open(0, 1))
        .add<&OptimizerConfig::beta2>("beta2", half_open(0, 1))
        .add<&OptimizerConfig::eps>("eps", above(0))
        .add<&OptimizerConfig::eta>("eta", above(0))
        .add<&OptimizerConfig::trust_min>("trust_min", at_least(0))
        .add<&OptimizerConfig::trust_max>("trust_max", at_least(0))
        .add<&OptimizerConfig::trust_without_decay>("trust_without_decay")
        .add<&OptimizerConfig::grad_clip>("grad_clip", at_least(0));
    SectionBuilder<&Recipe::schedule>{"schedule", f}
        .add<&ScheduleConfig::warmup_steps>("warmup_steps", at_least(0))
        .add<&ScheduleConfig::decay>("decay")
        .add<&ScheduleConfig::min_lr_ratio>("min_lr_ratio", closed(0, 1))
        .add<&ScheduleConfig::power>("power", above(0))
        .add<&ScheduleConfig::scaling_rule>("scaling_rule")
        .add<&ScheduleConfig::base_batch>("base_batch", at_least(0));
    SectionBuilder<&Recipe::distributed>{"distributed", f}
        .add<&DistributedConfig::backend>("backend")
        .add<&DistributedConfig::device>("device")
        .add<&DistributedConfig::world_size>("world_size", closed(1, 1024))
        .add<&DistributedConfig::timeout_s>("timeout_s", above(0))
        .add<&DistributedConfig::algorithm>("algorithm");
    SectionBuilder<&Recipe::sync>{"sync", f}
        .add<&SyncConfig::strategy>("strategy")
        .add<&SyncConfig::bucket_mb>("bucket_mb", above(0))
        .add<&SyncConfig::overlap>("overlap")
        .add<&SyncConfig::momentum>("momentum", half_open(0, 1))
        .add<&SyncConfig::intra>("intra")
        .add<&SyncConfig::phases>("phases");
    SectionBuilder<&Recipe::sync, &SyncConfig::allreduce>{"sync.allreduce", f}
        .add<&AllReduceConfig::dtype>("dtype");
    SectionBuilder<&Recipe::sync, &SyncConfig::topk>{"sync.topk", f}
        .add<&TopKOptions::ratio>("ratio", Bound{.lo = 0, .hi = 1, .lo_open = true})
        .add<&TopKOptions::error_feedback>("error_feedback")
        .add<&TopKOptions::selection>("selection")
        .add<&TopKOptions::sample_fraction>("sample_fraction", Bound{.lo = 0, .hi = 1, .lo_open = true})
        .add<&TopKOptions::warmup_steps>("warmup_steps", at_least(0));
    SectionBuilder<&Recipe::sync, &SyncConfig::powersgd>{"sync.powersgd", f}
        .add<&PowerSgdOptions::rank>("rank", closed(1, 1024))
        .add<&PowerSgdOptions::start_iter>("start_iter", at_least(0))
        .add<&PowerSgdOptions::min_compression_rate>("min_compression_rate", at_least(1))
        .add<&PowerSgdOptions::error_feedback>("error_feedback")
        .add<&PowerSgdOptions::warm_start>("warm_start");
    SectionBuilder<&Recipe::sync, &SyncConfig::onebit>{"sync.onebit", f}
        .add<&OneBitOptions::warmup_steps>("warmup_steps", at_least(0))
        .add<&OneBitOptions::error_feedback>("error_feedback")
        .add<&OneBitOptions::scale>("scale");
    SectionBuilder<&Recipe::sync, &SyncConfig::local_sgd>{"sync.local_sgd", f}
        .add<&LocalSgdConfig::period>("period", at_least(1))
        .add<&LocalSgdConfig::warmup_steps>("warmup_steps", at_least(0))
        .add<&LocalSgdConfig::reducer>("reducer")
        .add<&LocalSgdConfig::dtype>("dtype")
        .add<&LocalSgdConfig::block>("block", at_least(1))
        .add<&LocalSgdConfig::error_feedback>("error_feedback")
        .add<&LocalSgdConfig::period_schedule>("period_schedule");
    add_diloco_keys(SectionBuilder<&Recipe::sync, &SyncConfig::diloco>{"sync.diloco", f});
    add_diloco_keys(SectionBuilder<&Recipe::sync, &SyncConfig::streaming_diloco>{"sync.streaming_diloco", f})
        .add<&StreamingDilocoConfig::fragments>("fragments", closed(1, 1 << 20))
        .add<&StreamingDilocoConfig::overlap_steps>("overlap_steps", at_least(0))
        .add<&StreamingDilocoConfig::mixing>("mixing", half_open(0, 1));
    SectionBuilder<&Recipe::sync, &SyncConfig::sparseloco>{"sync.sparseloco", f}
        .add<&SparseLocoConfig::period>("period", at_least(1))
        .add<&SparseLocoConfig::warmup_steps>("warmup_steps", at_least(0))
        .add<&SparseLocoConfig::outer_lr>("outer_lr", above(0))
        .add<&SparseLocoConfig::ratio>("ratio", Bound{.lo = 0, .hi = 1, .lo_open = true})
        .add<&SparseLocoConfig::chunk>("chunk", closed(2, 1 << 24))
        .add<&SparseLocoConfig::beta>("beta", closed(0, 1))
        .add<&SparseLocoConfig::dtype>("dtype")
        .add<&SparseLocoConfig::period_schedule>("period_schedule");
    SectionBuilder<&Recipe::sync, &SyncConfig::demo>{"sync.demo", f}
        .add<&DemoConfig::chunk>("chunk", closed(2, 4096))
        .add<&DemoConfig::topk>("topk", at_least(1))
        .add<&DemoConfig::beta>("beta", half_open(0, 1))
        .add<&DemoConfig::dtype>("dtype")
        .add<&DemoConfig::dct>("dct")
        .add<&DemoConfig::average>("average")
        .add<&DemoConfig::fold_lr>("fold_lr");
    SectionBuilder<&Recipe::network>{"network", f}
        .add<&NetworkConfig::groups>("groups", closed(0, 1024))
        .add<&NetworkConfig::intra_bandwidth>("intra_bandwidth", above(0))
        .add<&NetworkConfig::intra_latency>("intra_latency", at_least(0))
        .add<&NetworkConfig::inter_bandwidth>("inter_bandwidth", above(0))
        .add<&NetworkConfig::inter_latency>("inter_latency", at_least(0))
        .add<&NetworkConfig::stragglers>("stragglers")
        .add<&NetworkConfig::straggler_slowdown>("straggler_slowdown", at_least(1))
        .add<&NetworkConfig::compute>("compute")
        .add<&NetworkConfig::device_tflops>("device_tflops", above(0))
        .add<&NetworkConfig::mfu>("mfu", half_open(0, 1))
        .add<&NetworkConfig::inter_link>("inter_link")
        .add<&NetworkConfig::platform>("platform");
    SectionBuilder<&Recipe::checkpoint>{"checkpoint", f}
        .add<&CheckpointConfig::every>("every", at_least(0))
        .add<&CheckpointConfig::keep_latest>("keep_latest", at_least(1))
        .add<&CheckpointConfig::dir>("dir");
    SectionBuilder<&Recipe::guards>{"guards", f}
        .add<&GuardsConfig::nonfinite>("nonfinite")
        .add<&GuardsConfig::max_consecutive_skips>("max_consecutive_skips", at_least(1))
        .add<&GuardsConfig::check_every>("check_every", at_least(0))
        .add<&GuardsConfig::straggler_factor>("straggler_factor", above(1))
        .add<&GuardsConfig::straggler_records>("straggler_records", at_least(1));
    SectionBuilder<&Recipe::elastic>{"elastic", f}
        .add<&ElasticConfig::join_timeout_s>("join_timeout_s", above(0))
        .add<&ElasticConfig::sync_timeout_s>("sync_timeout_s", above(0))
        .add<&ElasticConfig::join_wait_s>("join_wait_s", above(0))
        .add<&ElasticConfig::max_attempts>("max_attempts", closed(1, 100))
        .add<&ElasticConfig::address>("address");
    SectionBuilder<&Recipe::fault>{"fault", f}
        .add<&FaultConfig::kind>("kind")
        .add<&FaultConfig::rank>("rank", at_least(0))
        .add<&FaultConfig::step>("step", at_least(0));
    return f;
  }();
  return fields;
}

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

// Every recipe key: the built-in ones, then the registered sections'.
const std::vector<Field>& schema() { return registered().fields; }

// The struct a field reads into.
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

// For a path whose section exists (or that has no section at all, like a top-level "steps = 1").
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

// ---- loading ----

std::string at(std::string_view file, const toml::source_region& where) {
  return detail::concat(file, ":", where.begin.line, ":", where.begin.column);
}

// The recipe being built, with where each value came from so that cross-field errors can point
// at the line (or override) that set it.
struct Draft {
  Recipe recipe;
  std::string file;
  std::vector<std::string> origin;        // per schema() index; "" = default
  std::vector<int> order;                 // per schema() index; when it was set (0 = never)
  std::vector<std::pair<std::string, std::string>> sections;  // section -> "FILE:LINE:COL"
  int next = 1;

  explicit Draft(std::string name) : file(std::move(name)), origin(schema().size()), order(schema().size()) {
    recipe.path = file;
  }
};

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

// Where to point a cross-field error: the latest of the given keys to be set, else their section,
// else the file.
std::string locate(const Draft& d, std::span<const std::string_view> paths) {
  int best = 0;
  std::string where;
  for (const auto path : paths) {
    const Field* f = find_field(path);
    if (!f) continue;  // a section's name ("sync.demo"), not a key
    const auto index = static_cast<std::size_t>(f - schema().data());
    if (d.order[index] > best) {
      best = d.order[index];
      where = d.origin[index];
    }
  }
  if (!where.empty() || paths.empty()) return where.empty() ? d.file : where;
  const auto section = paths.front().substr(0, paths.front().rfind('.'));
  for (const auto& [name, loc] : d.sections)
    if (name == section) return loc;
  return d.file;
}
std::string locate(const Draft& d, std::initializer_list<std::string_view> paths) {
  return locate(d, std::span<const std::string_view>(paths.begin(), paths.size()));
}

void check_cross_fields(const Draft& d) {
  const Recipe& r = d.recipe;
  if (r.train.steps == 0 && r.train.epochs == 0)
    LC_INPUT_ERROR(locate(d, {"train.steps", "train.epochs"}),
                   ": train.steps, train.epochs: expected train.steps >= 1 or train.epochs > 0, "
                   "got both 0");
  if (r.optimizer.nesterov && r.optimizer.momentum == 0)
    LC_INPUT_ERROR(locate(d, {"optimizer.nesterov", "optimizer.momentum"}),
                   ": optimizer.nesterov: expected optimizer.momentum > 0 with nesterov = true, got "
                   "optimizer.momentum = ",
                   format_float(r.optimizer.momentum));
  const bool transformer = r.model.name == "bert" || r.model.name == "gpt";
  if (transformer && r.model.dim % r.model.heads != 0)
    LC_INPUT_ERROR(locate(d, {"model.heads", "model.dim"}), ": model.heads: expected a divisor of model.dim = ",
                   r.model.dim, ", got ", r.model.heads);
  // Built-in models on built-in data; a registered model or dataset checks what it is given.
  const bool builtin_pair = (r.model.name == "mlp" || transformer) &&
                            (r.data.name == "fashion_mnist" || r.data.name == "text" || r.data.name == "tokens");
  const bool data_fits = r.data.name == "fashion_mnist" ? r.model.name == "mlp"
                         : r.data.name == "text"        ? transformer
                                                        : r.model.name == "gpt";
  if (builtin_pair && !data_fits)
    LC_INPUT_ERROR(locate(d, {"model.name", "data.name"}), ": model.name: expected ",
                   r.data.name == "text"     ? "\"bert\" or \"gpt\" for data.name = \"text\""
                   : r.data.name == "tokens" ? "\"gpt\" for data.name = \"tokens\""
                                                     : "\"mlp\" for data.name = \"fashion_mnist\"",
                   ", got \"", r.model.name, "\"");
  if (r.data.name == "text" && r.data.vocab_size < kFirstMergeToken)
    LC_INPUT_ERROR(locate(d, {"data.vocab_size", "data.name"}), ": data.vocab_size: expected at least ", kFirstMergeToken,
                   " for data.name = \"text\" (the BPE's special and byte tokens), got ", r.data.vocab_size);
  if (r.data.name == "tokens" && r.data.train_path.path.empty())
    LC_INPUT_ERROR(locate(d, {"data.train_path", "data.name"}),
                   ": data.train_path: expected a file or glob pattern of token files for data.name = \"tokens\", got none");
  if (r.optimizer.trust_max > 0 && r.optimizer.trust_max < r.optimizer.trust_min)
    LC_INPUT_ERROR(locate(d, {"optimizer.trust_max", "optimizer.trust_min"}),
                   ": optimizer.trust_max: expected 0 (no clamp) or >= optimizer.trust_min = ",
                   format_float(r.optimizer.trust_min), ", got ", format_float(r.optimizer.trust_max));
  const int world = r.distributed.world_size;
  if (r.network.groups > 0 && world % r.network.groups != 0)
    LC_INPUT_ERROR(locate(d, {"network.groups", "distributed.world_size"}),
                   ": network.groups: expected a divisor of distributed.world_size = ", world,
                   " (groups of equal size), got ", r.network.groups);
  if (r.sync.intra == IntraKind::allreduce && r.network.groups < 2)
    LC_INPUT_ERROR(locate(d, {"sync.intra", "network.groups"}),
                   ": sync.intra: expected network.groups >= 2 for \"allreduce\" inside groups (the groups are the "
                   "network's), got network.groups = ", r.network.groups);
  if (r.distributed.device == DeviceKind::cuda)
    if (const std::string what = host_only_use(r); !what.empty())
      LC_INPUT_ERROR(locate(d, {"distributed.device", "sync.strategy", "sync.phases"}),
                     ": distributed.device: expected \"cpu\" with ", what, " (it runs on host buffers), got \"cuda\"");
  // What the strategies in use (sync.strategy, or each of sync.phases) say of the rest of the recipe.
  for (const std::string& s : strategies_in_use(r.sync)) {
    const StrategyTraits& t = strategy_traits(s);
    if (r.sync.momentum > 0 && !t.momentum)
      LC_INPUT_ERROR(locate(d, {"sync.momentum", "sync.strategy", "sync.phases"}), ": sync.momentum: expected 0 with ",
                     t.periodic ? periodic_strategy_names() : s, " (momentum correction applies to gradient strategies; ",
                     t.periodic ? "give the inner optimizer its momentum" : s + " keeps its own, if any",
                     "), got ", format_float(r.sync.momentum));
    if (t.conflicts)
      if (const std::optional<RecipeConflict> c = t.conflicts(r)) {
        std::vector<std::string_view> keys(c->keys.begin(), c->keys.end());
        LC_INPUT_ERROR(locate(d, keys), ": ", c->message);
      }
  }
  // A codec other than fp32 replaces the dense reducer, and runs on host buffers.
  const auto check_codec = [&](const std::string& section, const OuterCodecConfig& c, const ReducerName& reducer) {
    if (c.dtype != laconic::Codec::fp32 && reducer != "allreduce")
      LC_INPUT_ERROR(locate(d, {section + ".dtype", section + ".reducer"}), ": ", section,
                     ".dtype: expected \"fp32\" with reducer = \"", reducer,
                     "\" (a codec replaces the dense reducer), got \"", name_of(c.dtype), "\"");
  };
  check_codec("sync.local_sgd", r.sync.local_sgd, r.sync.local_sgd.reducer);
  check_codec("sync.diloco", r.sync.diloco, r.sync.diloco.reducer);
  check_codec("sync.streaming_diloco", r.sync.streaming_diloco, r.sync.streaming_diloco.reducer);
  const StreamingDilocoConfig& sd = r.sync.streaming_diloco;
  std::int64_t shortest = sd.period;
  if (!sd.period_schedule.segments.empty()) {
    shortest = sd.period_schedule.segments.front().period;
    for (const auto& seg : sd.period_schedule.segments) shortest = std::min(shortest, seg.period);
  }
  if (sd.overlap_steps >= shortest)
    LC_INPUT_ERROR(locate(d, {"sync.streaming_diloco.overlap_steps", "sync.streaming_diloco.period",
                              "sync.streaming_diloco.period_schedule"}),
                   ": sync.streaming_diloco.overlap_steps: expected below the shortest period (", shortest,
                   "), got ", sd.overlap_steps);
  if (r.sync.demo.dct == DemoDct::two_d ? r.sync.demo.topk > r.sync.demo.chunk * r.sync.demo.chunk
                                         : r.sync.demo.topk > r.sync.demo.chunk)
    LC_INPUT_ERROR(locate(d, {"sync.demo.topk", "sync.demo.chunk", "sync.demo.dct"}), ": sync.demo.topk: expected at most ",
                   r.sync.demo.dct == DemoDct::two_d ? "a block, sync.demo.chunk^2 = " : "sync.demo.chunk = ",
                   r.sync.demo.dct == DemoDct::two_d ? r.sync.demo.chunk * r.sync.demo.chunk : r.sync.demo.chunk,
                   " (dct = \"", name_of(r.sync.demo.dct), "\"), got ", r.sync.demo.topk);
  if (r.fault.kind != FaultKind::none && r.fault.rank >= world)
    LC_INPUT_ERROR(locate(d, {"fault.rank", "distributed.world_size"}),
                   ": fault.rank: expected a rank below distributed.world_size = ", world, ", got ", r.fault.rank);
  for (const int s : r.network.stragglers.ranks)
    if (s >= world)
      LC_INPUT_ERROR(locate(d, {"network.stragglers", "distributed.world_size"}),
                     ": network.stragglers: expected ranks below distributed.world_size = ", world,
                     ", got ", s);
}

}  // namespace

bool uses_strategy(const SyncConfig& sync, std::string_view kind) {
  if (sync.phases.phases.empty()) return sync.strategy == kind;
  return std::any_of(sync.phases.phases.begin(), sync.phases.phases.end(),
                     [&](const SyncPhase& p) { return p.strategy == kind; });
}

std::string recipe_float(double v) { return format_float(v); }

std::string host_only_use(const Recipe& r) {
  for (const std::string& s : strategies_in_use(r.sync)) {
    if (!has_component(Component::strategy, s)) continue;
    const StrategyTraits& t = strategy_traits(s);
    if (!t.cuda) return s;
    if (std::string why = t.host_only ? t.host_only(r) : ""; !why.empty()) return why;
    const std::string reducer = t.reducer ? t.reducer(r) : "";
    if (reducer.empty() || reducer == s || !has_component(Component::reducer, reducer)) continue;
    const ReducerTraits& rt = reducer_traits(reducer);
    if (!rt.cuda) return "reducer \"" + reducer + "\"";
    if (std::string why = rt.host_only ? rt.host_only(r) : ""; !why.empty()) return why;
  }
  return "";
}

std::vector<std::string> strategies_in_use(const SyncConfig& sync) {
  if (sync.phases.phases.empty()) return {sync.strategy.value};
  std::vector<std::string> out;
  for (const SyncPhase& p : sync.phases.phases)
    if (std::find(out.begin(), out.end(), p.strategy.value) == out.end()) out.push_back(p.strategy.value);
  return out;
}

bool uses_component(const Recipe& r, Component c, std::string_view name) {
  switch (c) {
    case Component::model: return r.model.name == name;
    case Component::data: return r.data.name == name;
    case Component::optimizer: return r.optimizer.name == name;
    case Component::strategy: return uses_strategy(r.sync, name);
    case Component::reducer:  // through a strategy in use, as its traits say
      for (const std::string& s : strategies_in_use(r.sync)) {
        if (!has_component(Component::strategy, s)) continue;
        const StrategyTraits& t = strategy_traits(s);
        if (t.reducer && t.reducer(r) == name) return true;
      }
      return false;
  }
  return false;
}

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

namespace {

// A value as a recipe would spell it: floats in their shortest round-trip form (the resolved
// recipe writes 17 digits: 0.10000000000000001), strings in double quotes.
std::string format_value(const toml::node& node) {
  if (const auto* d = node.as_floating_point()) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, d->get());
    std::string out(buf, res.ptr);
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // still a float in TOML
    return out;
  }
  if (const auto* str = node.as_string()) return "\"" + str->get() + "\"";
  if (const auto* a = node.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + format_value(*a->get(i));
    return out + "]";
  }
  std::ostringstream os;
  node.visit([&](const auto& v) { os << v; });
  return os.str();
}

void flatten(const toml::table& t, const std::string& prefix, FlatToml& out) {
  for (const auto& [k, node] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = node.as_table()) {
      flatten(*sub, key, out);
    } else {
      out.emplace_back(key, format_value(node));
    }
  }
}

}  // namespace

std::optional<FlatToml> flatten_toml(const std::string& text) {
  try {
    FlatToml out;
    flatten(toml::parse(text), "", out);
    return out;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

std::string to_toml(const Recipe& recipe) {
  std::string out =
      "# Laconic recipe, fully resolved: every key with the value the run used (defaults included).\n";
  if (!recipe.path.empty()) out += "# Source: " + recipe.path + "\n";
  std::string section;
  for (const auto& f : schema()) {
    if (!printed(f, recipe)) continue;
    if (f.section != section) {
      section = f.section;
      out += detail::concat("\n[", section, "]\n");
    }
    out += detail::concat(f.key, " = ", f.write(section_of(f, recipe)), "\n");
  }
  return out;
}

const char* name_of(BackendKind v) { return enum_name(v); }
const char* name_of(DeviceKind v) { return enum_name(v); }
const char* name_of(WireKind v) { return enum_name(v); }
const char* name_of(IntraKind v) { return enum_name(v); }
const char* name_of(NonfiniteKind v) { return enum_name(v); }
const char* name_of(FaultKind v) { return enum_name(v); }
const char* name_of(ComputeKind v) { return enum_name(v); }

}  // namespace laconic
