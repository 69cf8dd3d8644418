#include "collectives/netsim/topology.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "core/units.h"

namespace laconic {

double Topology::slowdown_of(int rank) const {
  return slowdown.empty() ? 1.0 : slowdown[static_cast<std::size_t>(rank)];
}

int Topology::num_groups() const {
  std::vector<int> ids = group_of;
  std::sort(ids.begin(), ids.end());
  return static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

int Topology::max_group_size() const {
  std::vector<int> ids = group_of;
  std::sort(ids.begin(), ids.end());
  int best = 0;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    best = std::max(best, static_cast<int>(j - i));
    i = j;
  }
  return best;
}

LinkSpec Topology::bottleneck() const {
  if (num_groups() <= 1) return intra;
  return {std::min(intra.bandwidth_Bps, inter.bandwidth_Bps), std::max(intra.latency_s, inter.latency_s)};
}

void Topology::validate() const {
  LC_CHECK(!group_of.empty(), "topology: no ranks");
  for (const LinkSpec* l : {&intra, &inter})
    LC_CHECK(l->bandwidth_Bps > 0 && std::isfinite(l->bandwidth_Bps) && l->latency_s >= 0 &&
                 std::isfinite(l->latency_s),
             "topology: bad link (bandwidth ", l->bandwidth_Bps, " B/s, latency ", l->latency_s, " s)");
  LC_CHECK(slowdown.empty() || slowdown.size() == group_of.size(), "topology: ", slowdown.size(),
           " slowdown factors for ", group_of.size(), " ranks");
  for (double s : slowdown) LC_CHECK(s > 0 && std::isfinite(s), "topology: slowdown factor ", s);
}

Topology uniform_topology(int groups, int ranks_per_group, LinkSpec intra, LinkSpec inter) {
  LC_CHECK(groups > 0 && ranks_per_group > 0, "topology: ", groups, " groups of ", ranks_per_group, " ranks");
  Topology t{{}, intra, inter, {}};
  t.group_of.resize(static_cast<std::size_t>(groups) * static_cast<std::size_t>(ranks_per_group));
  for (std::size_t r = 0; r < t.group_of.size(); ++r) t.group_of[r] = static_cast<int>(r) / ranks_per_group;
  return t;
}

Topology grouped_topology(int world_size, int groups, LinkSpec intra, LinkSpec inter) {
  LC_CHECK(world_size > 0 && groups > 0 && groups <= world_size, "topology: ", world_size, " ranks in ",
           groups, " groups");
  Topology t{{}, intra, inter, {}};
  t.group_of.resize(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r)
    t.group_of[static_cast<std::size_t>(r)] =
        static_cast<int>(static_cast<long long>(r) * groups / world_size);
  return t;
}

void set_stragglers(Topology& topo, const std::vector<int>& ranks, double factor) {
  topo.slowdown.assign(topo.group_of.size(), 1.0);
  for (int r : ranks) {
    LC_CHECK(r >= 0 && r < topo.size(), "straggler rank ", r, " outside a world of ", topo.size());
    topo.slowdown[static_cast<std::size_t>(r)] = factor;
  }
}

double require_bandwidth(std::string_view text, std::string_view what) {
  if (auto v = parse_bandwidth(text)) return *v;
  LC_INPUT_ERROR(what, ": expected a bandwidth like \"100 Gbit/s\" or \"450 GB/s\" (bit/s, kbit/s, Mbit/s, ",
                 "Gbit/s, Tbit/s, Gbps, B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s), got \"", text, "\"");
}

double require_duration(std::string_view text, std::string_view what) {
  if (auto v = parse_duration(text)) return *v;
  LC_INPUT_ERROR(what, ": expected a duration like \"5 us\" or \"30 ms\" (ns, us, ms, s, min), got \"", text, "\"");
}

}  // namespace laconic
