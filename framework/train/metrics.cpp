#include "framework/train/metrics.h"

#include <algorithm>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/input.h"
#include "core/json.h"
#include "framework/train/run_dir.h"

namespace laconic {
namespace {

template <class T>
nlohmann::json to_object(const T& record) {
  nlohmann::json j = nlohmann::json::object();
  T::visit(record, [&](const char* name, const auto& v, bool optional) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::optional<std::uint64_t>>) {
      if (v) j[name] = *v;
    } else if constexpr (std::is_same_v<V, std::string>) {
      if (!v.empty()) j[name] = v;  // optional strings: absent when empty
    } else if constexpr (std::is_same_v<V, double>) {
      if (!(optional && std::isnan(v))) j[name] = v;  // NaN -> null
    } else {
      j[name] = v;
    }
  });
  return j;
}

// Fields absent or null: doubles NaN, integers their default. A field of the wrong type is an
// InputError naming it.
template <class T>
T from_object(const nlohmann::json& j, const std::string& where) {
  T out;
  T::visit(out, [&](const char* name, auto& v, bool) {
    using V = std::decay_t<decltype(v)>;
    const auto it = j.find(name);
    const bool absent = it == j.end() || it->is_null();
    if constexpr (std::is_same_v<V, double>) {
      v = kAbsent;
      if (absent) return;
    } else if (absent) {
      return;
    }
    if constexpr (std::is_same_v<V, std::string>) {
      if (!it->is_string()) LC_INPUT_ERROR(where, ": \"", name, "\": expected a string, got ", it->type_name());
      v = it->template get<std::string>();
      return;
    }
    if (!it->is_number()) LC_INPUT_ERROR(where, ": \"", name, "\": expected a number, got ", it->type_name());
    if constexpr (std::is_same_v<V, std::optional<std::uint64_t>>)
      v = it->template get<std::uint64_t>();
    else
      v = it->template get<V>();
  });
  return out;
}

nlohmann::json parse_object(const std::string& text, const std::string& where) {
  const nlohmann::json j = parse_json(text, where);
  if (!j.is_object()) LC_INPUT_ERROR(where, ": expected a JSON object, got ", j.type_name());
  return j;
}

}  // namespace

std::string to_json_line(const MetricsRecord& r) { return to_object(r).dump(); }

std::string to_json(const RunSummary& s) { return to_object(s).dump(2) + "\n"; }

void write_summary(const std::string& run_dir, const RunSummary& s) { write_file_atomic(run_dir + "/summary.json", to_json(s)); }

MetricsRecord parse_metrics_record(const std::string& line, const std::string& where) {
  const nlohmann::json j = parse_object(line, where);
  if (!j.contains("step") || !j["step"].is_number()) LC_INPUT_ERROR(where, ": expected a record with a \"step\"");
  return from_object<MetricsRecord>(j, where);
}

RunSummary parse_summary(const std::string& text, const std::string& where) {
  const nlohmann::json j = parse_object(text, where);
  if (!j.contains("bytes_sent") || !j["bytes_sent"].is_number()) LC_INPUT_ERROR(where, ": bytes_sent is missing");
  return from_object<RunSummary>(j, where);
}

std::vector<MetricsRecord> read_metrics(const std::string& path) {
  const std::string text = read_input_file(path, kMaxMetricsBytes, "metrics.jsonl");
  std::vector<MetricsRecord> out;
  std::size_t begin = 0;
  for (int n = 1; begin < text.size(); ++n) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out.push_back(parse_metrics_record(line, path + ":" + std::to_string(n)));
  }
  return out;
}

double peak_rate(std::span<const double> t, std::span<const std::uint64_t> bytes) {
  double peak = kAbsent;
  for (std::size_t k = 1; k < t.size() && k < bytes.size(); ++k) {
    if (!(t[k] > t[k - 1])) continue;
    const double rate = static_cast<double>(bytes[k] - std::min(bytes[k - 1], bytes[k])) / (t[k] - t[k - 1]);
    if (std::isnan(peak) || rate > peak) peak = rate;
  }
  return peak;
}

double peak_inter_rate(const std::vector<MetricsRecord>& records) {
  std::vector<double> t;
  std::vector<std::uint64_t> bytes;
  for (const MetricsRecord& m : records) {
    if (!m.bytes_inter || std::isnan(m.sim_time_s)) continue;
    t.push_back(m.sim_time_s);
    bytes.push_back(*m.bytes_inter);
  }
  return peak_rate(t, bytes);
}

}  // namespace laconic
