#include "framework/elastic/aggregate.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace laconic {

double l2_norm(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

double median_of(std::span<double> v) {
  LC_CHECK(!v.empty(), "median of nothing");
  const std::size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  if (v.size() % 2 == 1) return v[m];
  const double below = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return (below + v[m]) / 2;
}

double norm_bound(std::span<const double> norms, std::span<const std::size_t> use, double ratio,
                  std::vector<double>& scratch) {
  scratch.clear();
  for (std::size_t j : use) scratch.push_back(norms[j]);
  return ratio * median_of(scratch);
}

std::size_t trim_count(const AggregateOptions& o, std::size_t n) {
  switch (o.rule) {
    case Aggregate::mean: return 0;
    case Aggregate::trimmed_mean: return static_cast<std::size_t>(std::floor(o.trim_fraction * static_cast<double>(n)));
    case Aggregate::median: return n == 0 ? 0 : (n - 1) / 2;
  }
  return 0;
}

void trimmed_mean(std::span<const float> rows, std::span<const std::size_t> use, std::size_t k, std::span<float> out,
                  std::vector<double>& scratch) {
  const std::size_t d = out.size(), n = use.size();
  LC_CHECK(n > 2 * k, "trimmed_mean: dropping ", k, " at each end of ", n, " values");
  scratch.resize(n);
  const auto lo = scratch.begin() + static_cast<std::ptrdiff_t>(k), hi = scratch.end() - static_cast<std::ptrdiff_t>(k);
  for (std::size_t i = 0; i < d; ++i) {
    for (std::size_t j = 0; j < n; ++j) scratch[j] = rows[use[j] * d + i];
    if (k > 0) std::sort(scratch.begin(), scratch.end());
    double s = 0;
    for (auto it = lo; it != hi; ++it) s += *it;
    out[i] = static_cast<float>(s / static_cast<double>(n - 2 * k));
  }
}

}  // namespace laconic
