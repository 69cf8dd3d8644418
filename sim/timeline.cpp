#include "sim/timeline.h"

#include <nlohmann/json.hpp>

namespace laconic {

std::vector<TimelineSpan> measured_timeline(const std::vector<RankTrace>& trace) {
  std::vector<TimelineSpan> out;
  for (std::size_t r = 0; r < trace.size(); ++r) {
    const int rank = static_cast<int>(r);
    double begun = 0;
    for (const TraceEvent& e : trace[r].lanes[0].events) {
      if (e.kind == TraceKind::span_begin) begun = e.t0;
      if (e.kind == TraceKind::span_end) out.push_back({rank, 0, span_name(static_cast<SpanKind>(e.sub)), begun, e.t0});
      if (e.kind == TraceKind::wait && e.t1 > e.t0) out.push_back({rank, 0, "wait", e.t0, e.t1});
      if (const char* m = message_name(e)) out.push_back({rank, 1, m, e.t0, e.t1});
    }
    for (const TraceEvent& e : trace[r].lanes[1].events) {
      if (e.kind == TraceKind::begin) begun = e.t0;
      if (e.kind == TraceKind::end) out.push_back({rank, 1, "async op " + std::to_string(e.a), begun, e.t1});
      if (const char* m = message_name(e)) out.push_back({rank, 1, m, e.t0, e.t1});
    }
  }
  return out;
}

std::string timeline_json(const std::vector<TimelineSpan>& spans, int ranks, const std::string& title) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (int r = 0; r < ranks; ++r) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"args", {{"sort_index", r}}}});
    for (int t = 0; t < 2; ++t)
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", t},
                        {"args", {{"name", t == 0 ? "compute" : "communication"}}}});
  }
  for (const TimelineSpan& s : spans)
    events.push_back({{"name", s.name}, {"ph", "X"}, {"pid", s.rank}, {"tid", s.track}, {"ts", s.t0 * 1e6},
                      {"dur", (s.t1 - s.t0) * 1e6}});
  nlohmann::ordered_json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  doc["otherData"] = {{"title", title}};
  return doc.dump() + "\n";
}

}  // namespace laconic
