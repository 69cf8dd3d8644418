// A timeline a person can look at: Chrome / Perfetto trace-event JSON ("traceEvents", complete
// events "ph":"X" in microseconds), one process per rank with two tracks (threads): compute and
// communication. Open it in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load);
// overlapped communication shows as spans on the communication track under compute spans.
#pragma once

#include <string>
#include <vector>

#include "sim/replay.h"

namespace laconic {

// The spans of a recorded run, from its trace's own timestamps: compute spans, waits and lane-0
// messages per rank, each async operation (and its messages) on the communication track.
std::vector<TimelineSpan> measured_timeline(const std::vector<RankTrace>& trace);

// The trace-event JSON of `spans` for `ranks` ranks; `title` names the run in the metadata.
std::string timeline_json(const std::vector<TimelineSpan>& spans, int ranks, const std::string& title);

}  // namespace laconic
