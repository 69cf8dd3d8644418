#include "core/units.h"

#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <span>
#include <utility>

namespace laconic {
namespace {

// Splits "<number><spaces><unit>" and looks the unit up. The number is parsed with from_chars
// (locale-independent).
std::optional<double> parse_with(std::string_view text,
                                 std::span<const std::pair<std::string_view, double>> units) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  double value = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), value);
  if (res.ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  std::string_view unit(res.ptr, static_cast<std::size_t>(text.data() + text.size() - res.ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  for (const auto& [name, scale] : units)
    if (unit == name) return value * scale;
  return std::nullopt;
}

constexpr std::array<std::pair<std::string_view, double>, 23> kBandwidth{{
    {"bit/s", 1.0 / 8}, {"bps", 1.0 / 8},
    {"kbit/s", 1e3 / 8}, {"Kbit/s", 1e3 / 8}, {"kbps", 1e3 / 8},
    {"Mbit/s", 1e6 / 8}, {"Mbps", 1e6 / 8},
    {"Gbit/s", 1e9 / 8}, {"Gbps", 1e9 / 8},
    {"Tbit/s", 1e12 / 8}, {"Tbps", 1e12 / 8},
    {"B/s", 1.0}, {"KB/s", 1e3}, {"kB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
    {"KiB/s", 1024.0}, {"MiB/s", 1024.0 * 1024}, {"GiB/s", 1024.0 * 1024 * 1024},
    {"Kib/s", 1024.0 / 8}, {"Mib/s", 1024.0 * 1024 / 8}, {"Gib/s", 1024.0 * 1024 * 1024 / 8},
}};

constexpr std::array<std::pair<std::string_view, double>, 7> kDuration{{
    {"ns", 1e-9}, {"us", 1e-6}, {"\xC2\xB5s", 1e-6}, {"ms", 1e-3}, {"s", 1.0}, {"sec", 1.0}, {"min", 60.0},
}};

std::string shortest(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

std::optional<double> parse_bandwidth(std::string_view text) {
  const auto v = parse_with(text, kBandwidth);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

// "3h50m", "1h 30min", "2m30s": number-unit pairs added up (h, m or min, s).
std::optional<double> parse_compound_duration(std::string_view text) {
  double total = 0;
  bool any = false;
  while (!text.empty()) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (text.empty()) break;
    double value = 0;
    const auto res = std::from_chars(text.data(), text.data() + text.size(), value);
    if (res.ec != std::errc() || !std::isfinite(value) || value < 0) return std::nullopt;
    text.remove_prefix(static_cast<std::size_t>(res.ptr - text.data()));
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    std::size_t n = 0;
    while (n < text.size() && std::isalpha(static_cast<unsigned char>(text[n]))) ++n;
    const std::string_view unit = text.substr(0, n);
    text.remove_prefix(n);
    const double scale = unit == "h" ? 3600.0 : (unit == "m" || unit == "min") ? 60.0 : unit == "s" ? 1.0 : -1.0;
    if (scale < 0) return std::nullopt;
    total += value * scale;
    any = true;
  }
  if (!any) return std::nullopt;
  return total;
}

std::optional<double> parse_duration(std::string_view text) {
  auto v = parse_with(text, kDuration);
  if (!v) v = parse_compound_duration(text);
  if (!v || *v < 0) return std::nullopt;
  return v;
}

std::string format_bandwidth(double bytes_per_s) {
  const double bits = bytes_per_s * 8;
  static constexpr std::array<std::pair<const char*, double>, 4> steps{
      {{"Tbit/s", 1e12}, {"Gbit/s", 1e9}, {"Mbit/s", 1e6}, {"kbit/s", 1e3}}};
  for (const auto& [unit, scale] : steps)
    if (bits >= scale) return shortest(bits / scale) + " " + unit;
  return shortest(bits) + " bit/s";
}

std::string format_duration(double seconds) {
  if (seconds == 0) return "0 s";
  if (seconds >= 1) return shortest(seconds) + " s";
  if (seconds >= 1e-3) return shortest(seconds * 1e3) + " ms";
  if (seconds >= 1e-6) return shortest(seconds * 1e6) + " us";
  return shortest(seconds * 1e9) + " ns";
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000.0 && u < 5) b /= 1000.0, ++u;
  char buf[48];
  // Whole bytes have no fraction ("16 B", not "16.0 B"); larger units keep three significant digits.
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 ? 0 : b < 10 ? 2 : 1, b, units[u]);
  return buf;
}

}  // namespace laconic
