// The simulated cluster: which group (node, datacenter) each rank sits in, the two link tiers
// (inside a group, between groups) and per-rank compute slowdowns (stragglers). Plain data shared
// by the cost model (cost_model.h), the planner (plan.h) and the simulator (sim_communicator.h).
#pragma once

#include <array>
#include <span>
#include <string_view>
#include <vector>

namespace laconic {

// One link tier: a message of n bytes takes latency_s + n / bandwidth_Bps (alpha + n·beta).
struct LinkSpec {
  double bandwidth_Bps = 0;  // bytes per second, > 0
  double latency_s = 0;      // alpha, >= 0
  double beta() const { return 1.0 / bandwidth_Bps; }
  bool operator==(const LinkSpec&) const = default;
};

// How groups reach each other in the replay (sim/replay.h): through one uplink per group shared by
// all its ranks (the real case), or one private link per rank pair (the old clock's model).
enum class InterLink { shared, per_pair };
inline constexpr std::array kInterLinkNames{"shared", "per_pair"};
constexpr std::span<const char* const> names(InterLink) { return kInterLinkNames; }

struct Topology {
  std::vector<int> group_of;   // group_of[r]: group of rank r; the world size is group_of.size()
  LinkSpec intra;              // tier 0: between ranks of one group
  LinkSpec inter;              // tier 1: between groups
  std::vector<double> slowdown;  // per-rank compute slowdown factor (1 = none); empty = all 1

  int size() const { return static_cast<int>(group_of.size()); }
  // 0 when a and b share a group (a == b included), 1 otherwise.
  int tier(int a, int b) const { return group_of[static_cast<std::size_t>(a)] == group_of[static_cast<std::size_t>(b)] ? 0 : 1; }
  const LinkSpec& link(int tier_index) const { return tier_index == 0 ? intra : inter; }
  double slowdown_of(int rank) const;
  // Number of distinct groups, and the size of the largest one.
  int num_groups() const;
  int max_group_size() const;
  // The slowest link any message may cross: intra with one group, else the worse of the two
  // tiers in each term (min bandwidth, max latency). Flat algorithms are charged on it.
  LinkSpec bottleneck() const;
  // Throws laconic::Error on an empty world, a bad link or a slowdown list of the wrong size.
  void validate() const;
};

// `groups` groups of `ranks_per_group` consecutive ranks: group_of[r] = r / ranks_per_group.
Topology uniform_topology(int groups, int ranks_per_group, LinkSpec intra, LinkSpec inter);
// `world_size` ranks in `groups` groups of consecutive ranks whose sizes differ by at most one:
// group_of[r] = floor(r·groups / world_size) (the recipe's [network] groups key).
Topology grouped_topology(int world_size, int groups, LinkSpec intra, LinkSpec inter);
// Sets slowdown[r] = factor for every r in `ranks` (others 1).
void set_stragglers(Topology& topo, const std::vector<int>& ranks, double factor);

// Human units through core/units.h, throwing laconic::InputError on bad text:
//   "<what>: expected a bandwidth like \"100 Gbit/s\" or \"450 GB/s\", got \"...\"".
// `what` names the source (e.g. "recipe.toml:12: network.inter_bandwidth", or "--inter").
double require_bandwidth(std::string_view text, std::string_view what);
double require_duration(std::string_view text, std::string_view what);

}  // namespace laconic
