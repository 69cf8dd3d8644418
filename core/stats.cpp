#include "core/stats.h"

#include <cmath>
#include <vector>

#include "core/check.h"

namespace laconic {

Stat stat_of(std::span<const double> values) {
  Stat s;
  double sum = 0;
  for (const double v : values)
    if (!std::isnan(v)) {
      sum += v;
      ++s.n;
    }
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  double sq = 0;
  for (const double v : values)
    if (!std::isnan(v)) sq += (v - s.mean) * (v - s.mean);
  s.std = s.n > 1 ? std::sqrt(sq / (s.n - 1)) : 0.0;
  return s;
}

namespace {

// The continued fraction of the regularized incomplete beta function I_x(a, b) (modified Lentz),
// convergent for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double f = d;
  for (int m = 1; m <= 300; ++m) {
    const double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    const double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    for (const double coef : {even, odd}) {
      d = 1 + coef * d;
      d = 1 / (std::fabs(d) < tiny ? tiny : d);
      c = 1 + coef / c;
      if (std::fabs(c) < tiny) c = tiny;
      f *= c * d;
    }
    if (std::fabs(c * d - 1) < 1e-15) break;
  }
  return f;
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

}  // namespace

double student_t_cdf(double t, int df) {
  if (df < 1 || std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
  const double tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

double student_t_975(int df) {
  if (df < 1) return std::numeric_limits<double>::quiet_NaN();
  double lo = 0, hi = 1000;  // t_{0.975, 1} = 12.7; the CDF only grows
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < 0.975 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Interval paired_difference(std::span<const double> a, std::span<const double> b) {
  LC_CHECK(a.size() == b.size(), "paired_difference: ", a.size(), " values against ", b.size());
  std::vector<double> d;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!std::isnan(a[k]) && !std::isnan(b[k])) d.push_back(b[k] - a[k]);
  const Stat s = stat_of(d);
  Interval out;
  out.n = s.n;
  out.mean = s.mean;
  if (s.n < 2) return out;
  const double half = student_t_975(s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
  out.lo = s.mean - half;
  out.hi = s.mean + half;
  return out;
}

}  // namespace laconic
