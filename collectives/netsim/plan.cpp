#include "collectives/netsim/plan.h"

#include <cstdio>
#include <string>

#include "core/check.h"
#include "core/units.h"

namespace laconic {
namespace {

// Bytes in decimal units, as the seed table quotes them ("14 GB").
std::string human_bytes(double b) {
  static constexpr struct { const char* unit; double scale; } steps[] = {
      {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}};
  char buf[48];
  for (const auto& s : steps)
    if (b >= s.scale) {
      std::snprintf(buf, sizeof buf, "%.4g %s", b / s.scale, s.unit);
      return buf;
    }
  std::snprintf(buf, sizeof buf, "%.4g B", b);
  return buf;
}

// "450 GB/s, 1 us": bytes per second as the seed table quotes them.
std::string human_link(const LinkSpec& l) { return human_bytes(l.bandwidth_Bps) + "/s, " + format_duration(l.latency_s); }

const char* link_name(const PlanRow& r) { return r.groups > 1 ? "inter" : "intra"; }

void print_table(const std::vector<PlanRow>& rows, std::ostream& os) {
  char line[256];
  std::snprintf(line, sizeof line, "%6s %6s %5s  %-18s %11s %11s %11s %11s %10s\n", "N", "groups", "link",
                "algorithm", "total_s", "bandwidth_s", "latency_s", "reduce_s", "busbw_GB/s");
  os << line;
  for (const PlanRow& r : rows) {
    std::snprintf(line, sizeof line, "%6d %6d %5s  %-18s %11.4g %11.4g %11.4g %11.4g %10.4g\n", r.world_size,
                  r.groups, link_name(r), name_of(r.algorithm), r.cost.total(), r.cost.bandwidth_s,
                  r.cost.latency_s, r.cost.reduce_s, r.busbw_Bps / 1e9);
    os << line;
  }
}

}  // namespace

Topology plan_topology(const PlanOptions& opts, int n) {
  LC_CHECK(n > 0 && opts.ranks_per_group > 0, "plan: world size ", n, ", ranks per group ", opts.ranks_per_group);
  // Consecutive ranks fill a group before the next one starts (the last may be partial).
  Topology t{std::vector<int>(static_cast<std::size_t>(n)), opts.intra, opts.inter, {}};
  for (int r = 0; r < n; ++r) t.group_of[static_cast<std::size_t>(r)] = r / opts.ranks_per_group;
  return t;
}

double plan_bytes(const PlanOptions& opts) { return opts.parameters * static_cast<double>(dtype_size(opts.dtype)); }

std::vector<PlanRow> plan_rows(const PlanOptions& opts, double bytes) {
  std::vector<PlanRow> rows;
  const CostOptions cost_opts{opts.gamma_s_per_byte, Algorithm::ring};
  for (int n : opts.world_sizes) {
    const CostModel model(plan_topology(opts, n), cost_opts);
    for (Algorithm a : opts.algorithms) {
      if (a == Algorithm::hierarchical && (model.groups() <= 1 || model.group_size() <= 1)) continue;
      PlanRow row{n, model.groups(), bytes, a, model.all_reduce(a, bytes), 0};
      const double t = row.cost.total();
      if (n > 1 && t > 0) row.busbw_Bps = bytes / t * 2.0 * (n - 1) / n;
      rows.push_back(row);
    }
  }
  return rows;
}

void print_plan(const PlanOptions& opts, std::ostream& os) {
  const double bytes = plan_bytes(opts);
  char head[160];
  std::snprintf(head, sizeof head, "%.4g", opts.parameters);
  os << "Predicted all-reduce time per step: " << head << " parameters x " << name_of(opts.dtype) << " = "
     << human_bytes(bytes) << "\n"
     << "Model: alpha-beta (Thakur, Rabenseifner & Gropp 2005); nodes of " << opts.ranks_per_group
     << " ranks; intra " << human_link(opts.intra) << "; inter " << human_link(opts.inter);
  if (opts.gamma_s_per_byte > 0) os << "; reduction " << opts.gamma_s_per_byte << " s/B";
  os << "\nFlat algorithms cross the slowest link in use (intra within one node, inter beyond); "
        "hierarchical = reduce in node, all-reduce among node leaders, broadcast in node.\n\n";
  print_table(plan_rows(opts, bytes), os);
  for (double small : opts.small_message_bytes) {
    os << "\nSmall message (" << human_bytes(small)
       << "): the latency term grows as 2(N-1)a for ring, lg N a for recursive doubling\n";
    print_table(plan_rows(opts, small), os);
  }
}

}  // namespace laconic
