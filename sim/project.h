// A run recorded at a few ranks, replayed as a world of any size (`trainer simulate RUN --world N
// [--groups G]`): each projected rank replays the trace of the recorded rank in its place (the
// same group, the same role), with its compute as recorded, and every collective the run issued
// regenerated for the projected world.
//
// Places. The recorded world is G_r groups of L ranks (contiguous, as make_topology lays them
// out), the projected one G groups of L'. Projected rank n, local index i of group g, replays the
// recorded rank of group g mod G_r whose local index is 0 when i is 0 (a group's leader stays its
// leader) and otherwise one of 1 .. L-1, spread evenly over i = 1 .. L'-1.
//
// Collectives. Each of our collectives is traced as a bracket (TraceKind::collective ... its
// messages ... collective_end) saying its kind, bytes, root, algorithm and ranks; a native one
// (MPI, NCCL) as one event. A projection replaces each by one native event for the replay to
// expand (sim/replay.h), over the projected communicator that plays the recorded one's part:
//   the world (all N ranks), the rank's group (L' ranks), or the groups' leaders (G ranks).
// A communicator of any other shape (not evenly spaced, a column other than the leaders') is an
// error naming it, as are point-to-point messages outside collectives (gossip): those do not
// project. An all-reduce keeps the algorithm it ran, except on the world's training plane with
// distributed.algorithm = "auto", where the cost model of the projected network chooses again
// (as the run would have, at that size). The collective's own compute (the reductions between
// its messages) is replayed before it, as recorded. An all-gather's and an all-to-all's buffer
// holds one block per rank: its bytes scale with the projected communicator's size; every other
// collective keeps its bytes.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "collectives/collectives.h"
#include "sim/replay.h"

namespace laconic {

struct ProjectionOptions {
  int recorded_groups = 1;  // the recorded run's network.groups (>= 1)
  int world = 0;            // N: the projected world's ranks
  int groups = 0;           // G: its groups (0: the recorded number)
  // The all-reduce algorithm for the world's training plane at the projected size (null: keep the
  // recorded one): the projected network's cost model, for a run with distributed.algorithm = "auto".
  std::function<Algorithm(std::size_t bytes)> choose;
};

struct ProjectedTrace {
  std::vector<RankTrace> lanes;  // per recorded rank: its lanes with the collectives regenerated
  std::vector<int> source;       // per projected rank: the entry of `lanes` it replays
  int groups = 1;                // G
};

// Throws InputError naming what does not project (the trace, a collective's ranks, a world or
// group count that does not divide).
ProjectedTrace project_trace(const std::vector<RankTrace>& recorded, const ProjectionOptions& opts);

}  // namespace laconic
