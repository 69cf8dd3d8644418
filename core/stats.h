// Summary statistics shared by the reports (framework/report/seeds.h: a variant's seeds) and the models
// that average trials (sim/failures.h).
#pragma once

#include <limits>
#include <span>

namespace laconic {

// Mean and sample standard deviation (n - 1 in the denominator; 0 for one value) of the values
// that are not NaN; n counts them (mean and std NaN when n is 0).
struct Stat {
  double mean = std::numeric_limits<double>::quiet_NaN(), std = std::numeric_limits<double>::quiet_NaN();
  int n = 0;
};
Stat stat_of(std::span<const double> values);

// Student's t distribution with `df` degrees of freedom: P(T <= t), and the two-sided 95% quantile
// t_{0.975, df} (12.706 at df 1, 2.776 at 4, 1.960 as df grows). NaN for df < 1.
double student_t_cdf(double t, int df);
double student_t_975(int df);

// A mean with its 95% confidence interval [lo, hi] over n values (NaN bounds for n < 2).
struct Interval {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double lo = std::numeric_limits<double>::quiet_NaN(), hi = std::numeric_limits<double>::quiet_NaN();
  int n = 0;
  bool contains_zero() const { return !(lo > 0) && !(hi < 0); }  // true for NaN bounds too
};

// The paired differences b[k] - a[k] over the k where both are not NaN (a and b the same length,
// say one seed each): their mean and the t interval mean ± t_{0.975, n-1} · std / sqrt(n), the
// paired comparison that cancels what the seeds share (initialisation, data order).
Interval paired_difference(std::span<const double> a, std::span<const double> b);

}  // namespace laconic
