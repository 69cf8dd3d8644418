#include "sim/timeline.h"

#include <nlohmann/json.hpp>

namespace laconic {

namespace {

// A recorded message's span: bytes it sent, its peer and link tier as the trace has them.
TimelineSpan message_span(int rank, const TraceEvent& e, const char* name, std::int64_t step, std::string op) {
  TimelineSpan s{.rank = rank, .track = 1, .name = op.empty() ? name : op + ": " + name, .t0 = e.t0, .t1 = e.t1, .op = {}};
  s.step = step;
  s.op = op.empty() ? name : std::move(op);
  s.bytes = e.bytes;
  if (e.kind != TraceKind::native) {
    s.peer = e.a;
    s.tier = e.tier;
  }
  return s;
}

}  // namespace

std::vector<TimelineSpan> measured_timeline(const std::vector<RankTrace>& trace) {
  std::vector<TimelineSpan> out;
  for (std::size_t r = 0; r < trace.size(); ++r) {
    const int rank = static_cast<int>(r);
    double begun = 0;
    std::int64_t step = -1;
    std::vector<std::int64_t> issue_step;
    std::vector<std::string> issue_op;
    for (const TraceEvent& e : trace[r].lanes[0].events) {
      if (e.kind == TraceKind::step) step = e.a;
      if (e.kind == TraceKind::issue) {
        issue_step.push_back(step);
        issue_op.push_back(async_op_name(e, {}));
      }
      if (e.kind == TraceKind::span_begin) begun = e.t0;
      if (e.kind == TraceKind::span_end) out.push_back({.rank = rank, .track = 0, .name = span_name(static_cast<SpanKind>(e.sub)), .t0 = begun, .t1 = e.t0, .step = step, .op = {}});
      if (e.kind == TraceKind::wait && e.t1 > e.t0) out.push_back({.rank = rank, .track = 0, .name = "wait", .t0 = e.t0, .t1 = e.t1, .step = step, .op = {}});
      if (const char* m = message_name(e)) out.push_back(message_span(rank, e, m, step, e.plane ? "control plane" : ""));
    }
    std::int64_t op_step = -1;
    std::string op;
    for (const TraceEvent& e : trace[r].lanes[1].events) {
      if (e.kind == TraceKind::begin) {
        begun = e.t0;
        const auto o = static_cast<std::size_t>(e.a);
        op = o < issue_op.size() ? issue_op[o] : "async op " + std::to_string(e.a);
        op_step = o < issue_step.size() ? issue_step[o] : -1;
      }
      if (e.kind == TraceKind::end) out.push_back({.rank = rank, .track = 1, .name = op, .t0 = begun, .t1 = e.t1, .step = op_step, .op = {}});
      if (const char* m = message_name(e)) out.push_back(message_span(rank, e, m, op_step, op));
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
  for (const TimelineSpan& s : spans) {
    nlohmann::ordered_json ev = {{"name", s.name}, {"ph", "X"}, {"pid", s.rank}, {"tid", s.track}, {"ts", s.t0 * 1e6},
                                 {"dur", (s.t1 - s.t0) * 1e6}};
    // What Perfetto shows on selecting the span: the step, and for a message what crossed which
    // link for which operation.
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    if (s.step >= 0) args["step"] = s.step;
    if (!s.op.empty()) {
      args["op"] = s.op;
      args["bytes"] = s.bytes;
      if (s.peer >= 0) args["peer"] = s.peer;
      if (s.tier >= 0) args["link"] = s.tier == 0 ? "intra" : "inter";
    }
    if (!args.empty()) ev["args"] = std::move(args);
    events.push_back(std::move(ev));
  }
  nlohmann::ordered_json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  doc["otherData"] = {{"title", title}};
  return doc.dump() + "\n";
}

}  // namespace laconic
