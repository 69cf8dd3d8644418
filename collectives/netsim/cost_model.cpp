#include "collectives/netsim/cost_model.h"

#include <bit>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace laconic {
namespace {

// ⌈lg p⌉ and p' = 2^⌊lg p⌋ for p >= 1.
int ceil_lg(int p) { return p <= 1 ? 0 : std::bit_width(static_cast<unsigned>(p - 1)); }
int floor_pof2(int p) { return static_cast<int>(std::bit_floor(static_cast<unsigned>(p))); }

}  // namespace

Cost ring_all_reduce_cost(double n, int p, const LinkSpec& l, double gamma) {
  if (p <= 1) return {};
  const double f = static_cast<double>(p - 1) / p;
  return {2.0 * (p - 1) * l.latency_s, 2 * f * n * l.beta(), f * n * gamma};
}

Cost recursive_doubling_all_reduce_cost(double n, int p, const LinkSpec& l, double gamma) {
  if (p <= 1) return {};
  const int q = floor_pof2(p);
  const int fold = q != p ? 1 : 0;
  const double steps = std::countr_zero(static_cast<unsigned>(q)) + 2 * fold;
  const double reductions = std::countr_zero(static_cast<unsigned>(q)) + fold;
  return {steps * l.latency_s, steps * n * l.beta(), reductions * n * gamma};
}

Cost rabenseifner_all_reduce_cost(double n, int p, const LinkSpec& l, double gamma) {
  if (p <= 1) return {};
  const int q = floor_pof2(p);
  const int fold = q != p ? 1 : 0;
  const double lg = std::countr_zero(static_cast<unsigned>(q));
  const double f = static_cast<double>(q - 1) / q;
  return {(2 * lg + 2 * fold) * l.latency_s, (2 * f + 2 * fold) * n * l.beta(), (f + fold) * n * gamma};
}

Cost ring_reduce_scatter_cost(double n, int p, const LinkSpec& l, double gamma) {
  if (p <= 1) return {};
  const double f = static_cast<double>(p - 1) / p;
  return {(p - 1) * l.latency_s, f * n * l.beta(), f * n * gamma};
}

Cost ring_all_gather_cost(double n, int p, const LinkSpec& l) {
  if (p <= 1) return {};
  const double f = static_cast<double>(p - 1) / p;
  return {(p - 1) * l.latency_s, f * n * l.beta(), 0};
}

Cost tree_broadcast_cost(double n, int p, const LinkSpec& l) {
  const int k = ceil_lg(p);
  return {k * l.latency_s, k * n * l.beta(), 0};
}

Cost tree_reduce_cost(double n, int p, const LinkSpec& l, double gamma) {
  const int k = ceil_lg(p);
  return {k * l.latency_s, k * n * l.beta(), k * n * gamma};
}

Cost pairwise_all_to_all_cost(double n, int p, const LinkSpec& l) {
  if (p <= 1) return {};
  return {(p - 1) * l.latency_s, (p - 1) * (n / p) * l.beta(), 0};
}

Cost dissemination_barrier_cost(int p, const LinkSpec& l) { return {ceil_lg(p) * l.latency_s, 0, 0}; }

// ---- CostModel ----

CostModel::CostModel(const Topology& topo, CostOptions opts) : opts_(opts) {
  topo.validate();
  p_ = topo.size();
  groups_ = topo.num_groups();
  group_size_ = topo.max_group_size();
  intra_ = topo.intra;
  inter_ = topo.inter;
  flat_ = topo.bottleneck();
}

Cost CostModel::flat(Algorithm a, double bytes, int p, const LinkSpec& link) const {
  const double g = opts_.gamma_s_per_byte;
  switch (a) {
    case Algorithm::ring: return ring_all_reduce_cost(bytes, p, link, g);
    case Algorithm::recursive_doubling: return recursive_doubling_all_reduce_cost(bytes, p, link, g);
    case Algorithm::rabenseifner: return rabenseifner_all_reduce_cost(bytes, p, link, g);
    default: LC_CHECK(false, "no flat all-reduce cost for '", name_of(a), "'");
  }
  return {};
}

Cost CostModel::all_reduce(Algorithm a, double bytes) const {
  if (a == Algorithm::native || a == Algorithm::auto_) a = choose(bytes);
  if (a != Algorithm::hierarchical) return flat(a, bytes, p_, flat_);
  // Reduce to each group's leader, all-reduce among the leaders, broadcast back.
  const Cost in = tree_reduce_cost(bytes, group_size_, intra_, opts_.gamma_s_per_byte);
  const Cost mid = flat(opts_.hierarchical_inter, bytes, groups_, inter_);
  const Cost out = tree_broadcast_cost(bytes, group_size_, intra_);
  return {in.latency_s + mid.latency_s + out.latency_s, in.bandwidth_s + mid.bandwidth_s + out.bandwidth_s,
          in.reduce_s + mid.reduce_s + out.reduce_s};
}

Cost CostModel::native(Collective c, double bytes) const {
  const double g = opts_.gamma_s_per_byte;
  switch (c) {
    case Collective::all_reduce: return all_reduce(Algorithm::native, bytes);
    case Collective::reduce: return tree_reduce_cost(bytes, p_, flat_, g);
    case Collective::reduce_scatter: return ring_reduce_scatter_cost(bytes, p_, flat_, g);
    case Collective::all_gather: return ring_all_gather_cost(bytes, p_, flat_);
    case Collective::all_to_all: return pairwise_all_to_all_cost(bytes, p_, flat_);
    case Collective::broadcast: return tree_broadcast_cost(bytes, p_, flat_);
    case Collective::barrier: return dissemination_barrier_cost(p_, flat_);
  }
  return {};
}

Algorithm CostModel::choose(double bytes, std::span<const Algorithm> candidates) const {
  Algorithm best = Algorithm::ring;
  double best_t = std::numeric_limits<double>::infinity();
  for (Algorithm a : candidates) {
    LC_CHECK(a != Algorithm::auto_ && a != Algorithm::native, "all-reduce candidate '", name_of(a),
             "': only concrete algorithms can be chosen");
    if (a == Algorithm::hierarchical && (groups_ <= 1 || group_size_ <= 1)) continue;
    const double t = all_reduce(a, bytes).total();
    if (t < best_t) best = a, best_t = t;  // strict: the earlier candidate wins a tie
  }
  return best;
}

// ---- one-shot conveniences ----

Cost hierarchical_all_reduce_cost(double bytes, const Topology& topo, const CostOptions& opts) {
  return CostModel(topo, opts).all_reduce(Algorithm::hierarchical, bytes);
}

Cost all_reduce_cost(Algorithm a, double bytes, const Topology& topo, const CostOptions& opts) {
  return CostModel(topo, opts).all_reduce(a, bytes);
}

Cost native_cost(Collective c, double bytes, const Topology& topo, const CostOptions& opts) {
  return CostModel(topo, opts).native(c, bytes);
}

Algorithm choose_all_reduce(const Topology& topo, std::size_t bytes, const ChooserOptions& opts) {
  return CostModel(topo, opts.cost).choose(static_cast<double>(bytes), opts.candidates);
}

std::function<Algorithm(std::size_t)> make_all_reduce_chooser(const Topology& topo, ChooserOptions opts) {
  CostModel model(topo, opts.cost);
  (void)model.choose(0, opts.candidates);  // rejects auto_/native candidates now, not per call
  return [model, cands = std::move(opts.candidates)](std::size_t bytes) {
    return model.choose(static_cast<double>(bytes), cands);
  };
}

}  // namespace laconic
