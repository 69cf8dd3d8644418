#include "sim/project.h"

#include "collectives/collective_kind.h"
#include "core/input.h"

namespace laconic {

namespace {

// Where a recorded communicator sits in the recorded world, and so what plays its part.
struct Shape {
  int W = 1, Gr = 1, L = 1;  // recorded world, groups, ranks per group

  // The scope of a collective of `count` ranks, the first world rank `first`, evenly `stride`
  // apart; `at` names the event in errors.
  NativeScope scope(int count, int first, int stride, const std::string& at) const {
    if (count == W && (stride == 1 || count == 1)) return NativeScope::world;
    if (count == L && stride == 1 && first % L == 0) return NativeScope::group;
    if (count == Gr && stride == L && first == 0) return NativeScope::leaders;
    LC_INPUT_ERROR(at, ": a collective over ", count, " ranks (world rank ", first,
                   stride == 0 ? " and others not evenly spaced" : " every " + std::to_string(stride), ") is neither the world (",
                   W, " ranks), a group (", L, ") nor the groups' leaders (", Gr,
                   "): a world-size projection regenerates only those");
  }
};

class LaneRewriter {
 public:
  LaneRewriter(const Shape& shape, const ProjectionOptions& o, int G) : shape_(shape), o_(o), G_(G) {}

  std::vector<TraceEvent> rewrite(const TraceLane& in, const std::string& name) const {
    std::vector<TraceEvent> out;
    out.reserve(in.events.size());
    const auto& ev = in.events;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      const TraceEvent& e = ev[i];
      const std::string at = name + " event " + std::to_string(i);
      switch (e.kind) {
        case TraceKind::send:
        case TraceKind::recv:
        case TraceKind::sendrecv:
          LC_INPUT_ERROR(at, ": a point-to-point message outside any collective (a strategy that talks to chosen peers, "
                             "as gossip does): a world-size projection cannot place it");
        case TraceKind::native: {
          if (e.b != shape_.W)
            LC_INPUT_ERROR(at, ": a native collective over ", e.b, " ranks of ", shape_.W, ": only the world's project");
          TraceEvent n = e;
          n.bytes = per_rank_bytes(e, shape_.W, o_.world);
          n.b = o_.world;
          n.tier = 0;
          n.tier2 = static_cast<std::uint8_t>(NativeScope::world);
          out.push_back(n);
          break;
        }
        case TraceKind::collective: i = bracket(ev, i, at, out); break;
        case TraceKind::collective_end: LC_INPUT_ERROR(at, ": the end of a collective that did not begin");
        default: out.push_back(e);
      }
    }
    return out;
  }

 private:
  // The bracket that begins at ev[i] as one native event (appended unless the communicator is a
  // single rank); returns the index of its end.
  std::size_t bracket(const std::vector<TraceEvent>& ev, std::size_t i, const std::string& at,
                      std::vector<TraceEvent>& out) const {
    const TraceEvent& mark = ev[i];
    double inside = 0;  // compute between its messages (the reductions)
    double prev = mark.t1;
    std::size_t j = i + 1;
    for (; j < ev.size() && ev[j].kind != TraceKind::collective_end; ++j) {
      const TraceKind k = ev[j].kind;
      if (k != TraceKind::send && k != TraceKind::recv && k != TraceKind::sendrecv)
        LC_INPUT_ERROR(at, ": a collective interrupted by event ", j, " (not a message): the trace is damaged");
      inside += std::max(0.0, ev[j].t0 - prev);
      prev = ev[j].t1;
    }
    if (j == ev.size()) LC_INPUT_ERROR(at, ": a collective that never ends: the trace is damaged");
    inside += std::max(0.0, ev[j].t0 - prev);
    if (mark.b <= 1) return j;
    const CollectiveRanks ranks = CollectiveRanks::unpack(mark.bytes2);
    const NativeScope scope = shape_.scope(mark.b, ranks.first, ranks.stride, at);
    if (mark.a != 0)
      LC_INPUT_ERROR(at, ": a ", name_of(static_cast<Collective>(mark.sub)), " rooted at rank ", mark.a,
                     " of its communicator: a world-size projection places roots at rank 0 only");
    const int p = scope == NativeScope::world ? o_.world
                  : scope == NativeScope::group ? o_.world / G_
                                                : G_;
    TraceEvent n = mark;
    n.kind = TraceKind::native;
    n.t0 = mark.t0 + inside;  // the replay computes the gap to t0 first: its reductions, then its messages
    n.t1 = ev[j].t1;
    n.bytes = per_rank_bytes(mark, mark.b, p);
    n.b = p;
    n.bytes2 = 0;
    n.tier2 = static_cast<std::uint8_t>(scope);
    Algorithm a = Algorithm::ring;
    if (static_cast<Collective>(mark.sub) == Collective::all_reduce) {
      a = static_cast<Algorithm>(mark.tier);
      if (a == Algorithm::native) a = Algorithm::ring;  // ours is the native one (collectives.cpp)
      if (o_.choose && scope == NativeScope::world && mark.plane == 0) a = o_.choose(n.bytes);
    }
    n.tier = expand_as(a);
    out.push_back(n);
    return j;
  }

  // An all-gather's or all-to-all's buffer: a block per rank, so `p` of them; others as recorded.
  static std::uint64_t per_rank_bytes(const TraceEvent& e, int recorded, int p) {
    const auto c = static_cast<Collective>(e.sub);
    if (c != Collective::all_gather && c != Collective::all_to_all) return e.bytes;
    return e.bytes / static_cast<std::uint64_t>(recorded) * static_cast<std::uint64_t>(p);
  }

  const Shape& shape_;
  const ProjectionOptions& o_;
  int G_;
};

}  // namespace

ProjectedTrace project_trace(const std::vector<RankTrace>& recorded, const ProjectionOptions& o) {
  const int W = static_cast<int>(recorded.size());
  const int Gr = o.recorded_groups;
  const int G = o.groups > 0 ? o.groups : Gr;
  if (W < 1) LC_INPUT_ERROR("--world: an empty trace");
  if (Gr < 1 || W % Gr != 0)
    LC_INPUT_ERROR("--world: the recorded run's ", W, " ranks are not ", Gr, " equal groups; a projection needs them");
  if (o.world < 1 || o.world > kMaxProjectedWorld)
    LC_INPUT_ERROR("--world: expected 1 to ", kMaxProjectedWorld, " ranks, got ", o.world);
  if (G < 1 || o.world % G != 0)
    LC_INPUT_ERROR("--groups: ", G, " groups do not divide --world ", o.world, " (expected a divisor)");
  const int L = W / Gr, Lp = o.world / G;
  if (L == 1 && Lp > 1 && Gr > 1)
    LC_INPUT_ERROR("--world: the run was recorded with one rank per group, so its groups' collectives cannot be told "
                   "from the world's; record at least two ranks per group to project to ", Lp);
  for (const RankTrace& t : recorded)
    for (const TraceLane& l : t.lanes)
      if (l.version < 3)
        LC_INPUT_ERROR("--world: rank ", l.rank, "'s trace is version ", l.version,
                       " (recorded before collectives were marked): record the run again to project it");

  ProjectedTrace p;
  p.groups = G;
  const Shape shape{W, Gr, L};
  const LaneRewriter rw(shape, o, G);
  p.lanes.resize(recorded.size());
  for (std::size_t r = 0; r < recorded.size(); ++r)
    for (int l = 0; l < 2; ++l) {
      TraceLane& out = p.lanes[r].lanes[l];
      const TraceLane& in = recorded[r].lanes[l];
      out.rank = in.rank;
      out.size = o.world;
      out.lane = in.lane;
      out.version = in.version;
      out.events = rw.rewrite(in, "rank " + std::to_string(r) + " lane " + std::to_string(l));
    }
  p.source.resize(static_cast<std::size_t>(o.world));
  for (int n = 0; n < o.world; ++n) {
    const int g = n / Lp, i = n % Lp;
    const int local = (i == 0 || L == 1) ? 0 : 1 + static_cast<int>(static_cast<long long>(i - 1) * (L - 1) / (Lp - 1));
    p.source[static_cast<std::size_t>(n)] = (g % Gr) * L + local;
  }
  return p;
}

}  // namespace laconic
