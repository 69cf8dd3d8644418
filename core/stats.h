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

}  // namespace laconic
