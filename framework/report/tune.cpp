#include "framework/report/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/check.h"
#include "framework/report/seeds.h"

namespace laconic {
namespace {

// "key=value" -> (key, value).
std::pair<std::string, std::string> split_assignment(const std::string& a) {
  const auto eq = a.find('=');
  return {a.substr(0, eq), eq == std::string::npos ? "" : a.substr(eq + 1)};
}

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The best (lowest) mean validation loss at each value of `key`, over the other keys' values,
// in the order the values first appear.
std::vector<std::pair<std::string, double>> sensitivity(const TunedVariant& t, const std::string& key) {
  std::vector<std::pair<std::string, double>> out;
  for (const TunedConfig& c : t.configs)
    for (const std::string& a : c.config.assignments) {
      const auto [k, value] = split_assignment(a);
      if (k != key) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == value; });
      if (it == out.end()) it = out.insert(out.end(), {value, kAbsent});
      const double m = c.validation.mean;
      if (std::isfinite(m) && (std::isnan(it->second) || m < it->second)) it->second = m;
    }
  return out;
}

// The keys whose chosen value is the first or last of its grid (a wider grid might do better).
std::vector<std::string> edge_keys(const TunedVariant& t) {
  std::vector<std::string> out;
  if (t.all_failed) return out;
  for (const std::string& a : t.configs[t.chosen].config.assignments) {
    const auto [key, value] = split_assignment(a);
    const auto values = sensitivity(t, key);
    if (values.size() > 2 && (values.front().first == value || values.back().first == value)) out.push_back(key + " = " + value);
  }
  return out;
}

void write_variant(std::ostream& os, const TunedVariant& t, const std::string& loss_word) {
  os << "\n### " << t.name << "\n\n";
  if (t.configs.size() < 2) {
    os << "Nothing tuned (no --tune applies to it).\n";
    return;
  }
  os << "| configuration | validation " << loss_word << " | |\n|---|---:|---|\n";
  for (std::size_t i = 0; i < t.configs.size(); ++i) {
    const TunedConfig& c = t.configs[i];
    const std::string loss = c.failure.empty() ? format_stat(c.validation, 4) : "failed: " + c.failure;
    os << "| " << c.config.name << " | " << loss << " | " << (i == t.chosen && !t.all_failed ? "**chosen**" : "") << " |\n";
  }
  if (t.all_failed) os << "\n**Warning**: no configuration had a finite loss on every seed; the first is kept.\n";
  os << "\nSensitivity (the best mean at each value, over the other keys):";
  for (const std::string& key : t.keys) {
    os << "\n- " << key << ":";
    for (const auto& [value, loss] : sensitivity(t, key)) os << " " << value << " → " << fmt(loss, 4) << ";";
  }
  os << "\n";
  for (const std::string& e : edge_keys(t))
    os << "\n**Warning**: the chosen " << e << " is at the edge of its grid: a wider grid may find a better value.\n";
}

}  // namespace

bool tunes(const TuneAxis& a, const Variant& v) { return a.variant.empty() || a.variant == v.name; }

TuneAxis parse_tune(const std::string& spec) {
  TuneAxis t;
  std::string rest = spec;
  // A VARIANT: prefix is told from a value with a ':' in it by what follows it: a key and '='.
  const auto colon = spec.find(':');
  if (colon != std::string::npos) {
    const std::string after = spec.substr(colon + 1);
    const auto eq = after.find('=');
    if (eq != std::string::npos && after.substr(0, eq).find('.') != std::string::npos &&
        spec.substr(0, colon).find('=') == std::string::npos) {
      t.variant = spec.substr(0, colon);
      rest = after;
      if (t.variant.empty()) LC_INPUT_ERROR("--tune ", spec, ": empty variant name before ':'");
    }
  }
  try {
    t.axis = parse_vary(rest);
  } catch (const InputError& e) {
    const std::string msg = e.what(), named = "--vary " + rest;  // parse_vary's errors start so
    throw InputError(msg.rfind(named, 0) == 0 ? "--tune " + spec + msg.substr(named.size()) : msg);
  }
  return t;
}

void check_tune_axes(const std::vector<TuneAxis>& axes, const std::vector<Variant>& variants,
                     const std::vector<VaryAxis>& vary) {
  std::string names;
  for (const Variant& v : variants) names += (names.empty() ? "" : ", ") + v.name;
  for (const TuneAxis& a : axes) {
    const bool known = a.variant.empty() ||
                       std::any_of(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == a.variant; });
    if (!known) LC_INPUT_ERROR("--tune ", a.variant, ":", a.axis.key, ": no variant is named ", a.variant, " (the variants: ", names, ")");
    for (const VaryAxis& v : vary)
      if (v.key == a.axis.key)
        LC_INPUT_ERROR("--tune ", a.axis.key, ": the key is compared by --vary; tune the other keys of each variant");
  }
  for (const Variant& v : variants) {
    std::set<std::string> keys;
    for (const TuneAxis& a : axes)
      if (tunes(a, v) && !keys.insert(a.axis.key).second)
        LC_INPUT_ERROR("--tune ", a.axis.key, ": tuned twice for variant ", v.name);
  }
}

std::vector<Variant> tune_configs(const Variant& v, const std::vector<TuneAxis>& axes) {
  std::vector<VaryAxis> mine;
  for (const TuneAxis& a : axes)
    if (tunes(a, v)) mine.push_back(a.axis);
  if (mine.empty()) return {Variant{"as given", {}}};
  std::vector<Variant> out = make_variants(mine);
  if (mine.size() == 1)  // "lr=0.1", not "0.1": a configuration is read beside its variant's name
    for (Variant& c : out) c.name = mine[0].key.substr(mine[0].key.rfind('.') + 1) + "=" + c.name;
  return out;
}

void choose(TunedVariant& v, int seeds) {
  v.all_failed = true;
  v.chosen = 0;
  for (std::size_t i = 0; i < v.configs.size(); ++i) {
    const Stat& s = v.configs[i].validation;
    if (s.n != seeds || !std::isfinite(s.mean)) continue;
    if (v.all_failed || s.mean < v.configs[v.chosen].validation.mean) v.chosen = i;
    v.all_failed = false;
  }
}

std::string tuning_markdown(const std::vector<TunedVariant>& tuned, const TuningCost& cost, int seeds,
                            const std::string& loss_word) {
  std::ostringstream os;
  os << "\n## Tuning\n\n"
     << "Each variant's configurations trained with the comparison's data and budget on " << seeds << " tuning seed"
     << (seeds == 1 ? "" : "s") << " (run.seed + " << kTuneSeedOffset << " + k), scored by the " << loss_word
     << " on the validation half of the held-out data (data.eval_split = \"validation\"); the lowest mean was chosen "
     << "and trained again on the comparison's own seeds, whose losses above are on the test half "
     << "(data.eval_split = \"test\"), which no choice saw. Tuning cost: " << cost.runs << " runs, "
     << fmt(cost.examples, 0) << " examples, " << fmt(cost.wall_s, 1) << " s on the wall clock.\n";
  for (const TunedVariant& t : tuned) write_variant(os, t, loss_word);
  return os.str();
}

std::string tuning_json(const std::vector<TunedVariant>& tuned, const TuningCost& cost, int seeds) {
  nlohmann::json j;
  j["seeds"] = seeds;
  j["cost"] = {{"runs", cost.runs}, {"examples", cost.examples}, {"wall_s", cost.wall_s}};
  j["variants"] = nlohmann::json::array();
  for (const TunedVariant& t : tuned) {
    nlohmann::json v{{"name", t.name}, {"keys", t.keys}, {"chosen", t.chosen}, {"all_failed", t.all_failed}};
    v["configs"] = nlohmann::json::array();
    for (const TunedConfig& c : t.configs) {
      nlohmann::json assignments = nlohmann::json::object();
      for (const std::string& a : c.config.assignments) {
        const auto [key, value] = split_assignment(a);
        assignments[key] = value;
      }
      v["configs"].push_back({{"name", c.config.name}, {"assignments", assignments}, {"mean", c.validation.mean},
                              {"std", c.validation.std}, {"n", c.validation.n}, {"failure", c.failure}});
    }
    j["variants"].push_back(v);
  }
  return j.dump(2) + "\n";
}

}  // namespace laconic
