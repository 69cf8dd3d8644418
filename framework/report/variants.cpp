#include "framework/report/variants.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/check.h"

namespace laconic {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "section.key" or "section.sub.key": dotted identifiers, at least two.
bool is_dotted_key(const std::string& key) {
  std::size_t start = 0, parts = 0;
  while (true) {
    const auto dot = key.find('.', start);
    if (!is_identifier(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    ++parts;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts >= 2;
}

// Keeps names usable as directory names and shell words without quoting.
std::string filesystem_safe(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-';
    if (keep) out += c;
    else if (out.empty() || out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  if (out.empty()) return "empty";
  if (out.front() == '.') out.insert(out.begin(), '_');  // never a hidden directory, never ".."
  return out;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

VaryAxis parse_vary(const std::string& spec) {
  const std::string where = "--vary " + spec;
  const auto eq = spec.find('=');
  if (eq == std::string::npos) LC_INPUT_ERROR(where, ": expected section.key=value1,value2,...");
  VaryAxis axis;
  axis.key = trim(spec.substr(0, eq));
  if (!is_dotted_key(axis.key))
    LC_INPUT_ERROR(where, ": expected a recipe key like sync.strategy before '=', got \"", axis.key, "\"");
  // Split on commas outside brackets and quotes: array values ("[256,128]") stay whole.
  std::string current;
  int depth = 0;
  char quote = 0;
  const std::string values = spec.substr(eq + 1);
  auto finish = [&] {
    const std::string v = trim(current);
    if (v.empty()) LC_INPUT_ERROR(where, ": empty value in the list (expected value1,value2,...)");
    if (std::find(axis.values.begin(), axis.values.end(), v) != axis.values.end())
      LC_INPUT_ERROR(where, ": value ", v, " is listed twice");
    axis.values.push_back(v);
    current.clear();
  };
  for (const char c : values) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[') {
      ++depth;
    } else if (c == ']') {
      if (--depth < 0) LC_INPUT_ERROR(where, ": unbalanced ']'");
    } else if (c == ',' && depth == 0) {
      finish();
      continue;
    }
    current += c;
  }
  if (quote || depth != 0) LC_INPUT_ERROR(where, ": unterminated ", quote ? "quote" : "'['");
  finish();
  return axis;
}

std::vector<Variant> make_variants(const std::vector<VaryAxis>& axes) {
  LC_CHECK(!axes.empty(), "no axes");
  std::map<std::string, int> last_part;  // how many axes end in each last key component
  for (std::size_t i = 0; i < axes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (axes[i].key == axes[j].key) LC_INPUT_ERROR("--vary ", axes[i].key, ": the key is varied twice");
    ++last_part[axes[i].key.substr(axes[i].key.rfind('.') + 1)];
  }
  auto label = [&](const std::string& key) {
    const std::string last = key.substr(key.rfind('.') + 1);
    return last_part[last] > 1 ? key : last;
  };

  std::vector<Variant> out;
  std::set<std::string> taken;
  std::vector<std::size_t> index(axes.size(), 0);  // an odometer: the last axis turns fastest
  while (true) {
    Variant v;
    std::vector<std::string> parts;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const std::string& value = axes[a].values[index[a]];
      v.assignments.push_back(axes[a].key + "=" + value);
      parts.push_back(axes.size() == 1 ? filesystem_safe(value)
                                       : filesystem_safe(label(axes[a].key)) + "=" + filesystem_safe(value));
    }
    v.name = join(parts, ",");
    for (int n = 2; taken.count(v.name); ++n) v.name = join(parts, ",") + "-" + std::to_string(n);
    taken.insert(v.name);
    out.push_back(std::move(v));
    std::size_t a = axes.size();
    while (a > 0 && ++index[a - 1] == axes[a - 1].values.size()) index[--a] = 0;
    if (a == 0) break;
  }
  return out;
}

}  // namespace laconic
