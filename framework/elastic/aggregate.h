// How an elastic outer sync combines the members' pseudo-gradients (framework/elastic), and the
// checks a contribution passes first: robust aggregation against a faulty replica (one started
// with lr = 50 sends a pseudo-gradient thousands of times the others').
//
//   mean          the examples-weighted mean, through the strategy's own reducer (the default)
//   trimmed_mean  coordinate-wise: per coordinate, the n values sorted, the k = floor(f n) smallest
//                 and k largest dropped, the rest averaged (f = elastic.trim_fraction, in [0, 0.5))
//   median        coordinate-wise median: the middle value (n odd) or the mean of the two middle
//                 ones (n even): a trimmed mean with k = floor((n - 1) / 2)
// (Yin et al. 2018, "Byzantine-robust distributed learning: towards optimal statistical rates":
// coordinate-wise median and trimmed mean.) Both are unweighted: members in step processed the
// same examples.
//
// max_norm_ratio r >= 1: a contribution whose L2 norm exceeds r times the median of the members'
// norms is left out of the sync's aggregate (its member stays in the quorum and adopts the result).
// Left out rather than clipped: a faulty replica's pseudo-gradient (lr = 50) is noise, and clipped
// noise still moves theta_global; at least half the members (the median's side) always remain.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "core/enum_names.h"

namespace laconic {

// The rule ([elastic] aggregate): the recipe (framework/recipe) names it too.
enum class Aggregate { mean, trimmed_mean, median };
inline constexpr std::array kAggregateNames{"mean", "trimmed_mean", "median"};
constexpr std::span<const char* const> names(Aggregate) { return kAggregateNames; }
inline const char* name_of(Aggregate a) { return enum_name(a); }

struct AggregateOptions {
  Aggregate rule = Aggregate::mean;
  double trim_fraction = 0.25;  // trimmed_mean: the share of members dropped at each end, per coordinate
  double max_norm_ratio = 0;    // > 0: leave out contributions above this multiple of the median member's norm
};

// The L2 norm of x, accumulated in double; not finite when x holds a NaN or an infinity.
double l2_norm(std::span<const float> x);

// The median of v (reordered): the middle value, or the mean of the two middle ones.
double median_of(std::span<double> v);

// max_norm_ratio's bound over the contributions listed in `use`: ratio * median(norms[use]);
// `scratch` is reused across calls.
double norm_bound(std::span<const double> norms, std::span<const std::size_t> use, double ratio,
                  std::vector<double>& scratch);

// How many values trimmed_mean drops at each end of n for the rule (0 for mean).
std::size_t trim_count(const AggregateOptions& o, std::size_t n);

// Coordinate-wise trimmed mean of the rows of `rows` (row-major, out.size() values each) listed in
// `use`: per coordinate the k smallest and k largest of them dropped (2k < use.size()), the rest
// averaged in double. `scratch` is reused across calls.
void trimmed_mean(std::span<const float> rows, std::span<const std::size_t> use, std::size_t k, std::span<float> out,
                  std::vector<double>& scratch);

}  // namespace laconic
