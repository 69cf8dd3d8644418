// The event trace of one rank: what its compute and its communication did, and when, recorded
// as it happens so that a simulator (sim/replay.h) can replay the run on another network, and a
// person can look at it (sim/timeline.h).
//
// Two lanes per rank: lane 0 is the rank's own thread (compute spans, blocking communication,
// the issue of async work and the waits for it), lane 1 its communication thread (each async
// operation as begin ... messages ... end). Within a lane events are in time order. Async
// operations are numbered in issue order on both lanes (the queue runs them in that order), so
// the k-th issue on lane 0 is the k-th begin on lane 1; a wait names the operation it waited for.
//
// Recorded where it happens: every point-to-point message in Transport::send/recv/sendrecv, a
// native collective (MPI, NCCL) in Communicator::do_collective, begin/end in the AsyncQueue,
// issue and wait in Communicator and Work, compute spans and step marks by the trainer.
//
// On disk (the run directory's trace/): one file per rank and lane, `rank-R.lane-L.bin`, a
// 32-byte header then fixed 48-byte events (little-endian, as in memory). Bytes per step: 48 ×
// (events per step) — per rank and step, 2 step/span marks per micro-batch and per strategy call,
// one event per message of the algorithm (a ring all-reduce of one bucket on p ranks: 2(p−1)),
// two per async operation (issue, wait) plus its begin and end, one per native collective, two
// per collective of ours (its begin and end).
// docs/simulation.md gives the bound per strategy; tests/sim checks it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace laconic {

enum class TraceKind : std::uint8_t {
  step,        // lane 0: step `a` begins (instant)
  span_begin,  // lane 0: a compute span of kind `sub` (SpanKind) begins (instant)
  span_end,    // lane 0: it ends (instant)
  send,        // to peer a, `bytes`
  recv,        // from peer a, `bytes`
  sendrecv,    // to a `bytes`, from b `bytes2`
  native,      // a native collective: sub = Collective, `bytes` (its buffer), a = root, b = ranks
  issue,       // lane 0: async operation `a` queued (instant); sub, b: its OpLabel
  begin,       // lane 1: async operation `a` starts
  end,         // lane 1: it ends
  wait,        // lane 0: waited for operation `a` (from t0 to t1)
  // One of our collectives (not a native one) begins: its messages follow, then collective_end.
  // sub = Collective, `bytes` its buffer (as for native), a = root, b = the communicator's size,
  // bytes2 = its ranks in the world (CollectiveRanks), tier = the all-reduce Algorithm run. A
  // world-size projection (sim/project.h) replaces the bracket with the collective regenerated.
  collective,
  collective_end,  // it ends (instant)
};

// The world ranks of a communicator whose rank k is world rank first + k * stride (stride 0: not
// evenly spaced), packed into TraceEvent::bytes2 of a collective event.
struct CollectiveRanks {
  std::int32_t first = 0, stride = 1;
  std::uint64_t pack() const {
    return static_cast<std::uint32_t>(first) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(stride)) << 32;
  }
  static CollectiveRanks unpack(std::uint64_t v) {
    return {static_cast<std::int32_t>(v & 0xffffffffu), static_cast<std::int32_t>(v >> 32)};
  }
};

// What a compute span is (TraceKind::span_begin's sub).
// sync: the strategy's calls that reduce gradients or wait; outer_sync: an after_update in which it
// averages parameters (an outer step: DiLoCo's, NoLoCo's, ...), so a timeline names those syncs.
enum class SpanKind : std::uint8_t { forward_backward, optimizer, sync, outer_sync };

// What an async operation is for, recorded in its issue event (sub = kind, b = index) so that a
// timeline names it ("allreduce bucket 3", "streaming_diloco fragment 1"); none: unlabelled.
struct OpLabel {
  enum Kind : std::uint8_t { none, bucket, fragment };
  Kind kind = none;
  std::int32_t index = 0;
};
const char* op_label_name(OpLabel::Kind k);  // "", "bucket", "fragment"

struct TraceEvent {
  double t0 = 0, t1 = 0;       // seconds since the tracer's origin
  std::uint64_t bytes = 0;
  std::uint64_t bytes2 = 0;
  std::int32_t a = 0, b = 0;
  TraceKind kind = TraceKind::step;
  std::uint8_t sub = 0;
  std::uint8_t tier = 0;       // link tier of a message (of `a` for sendrecv's send, `b` for its receive in tier2)
  std::uint8_t tier2 = 0;
  // Messages: 0 the training's traffic; 1 the control plane's (the stop agreement, metrics,
  // replica checks), which the replay times but does not count as training bytes. Version 2.
  std::uint8_t plane = 0;
};
static_assert(sizeof(TraceEvent) == 48);

inline constexpr char kTraceMagic[8] = {'L', 'C', 'T', 'R', 'A', 'C', 'E', '1'};
struct TraceFileHeader {
  char magic[8];
  std::uint32_t version;  // 3 (2: no collective events; 1: nor TraceEvent::plane, read as the training's)
  std::int32_t rank;
  std::int32_t size;
  std::int32_t lane;
  std::uint64_t events;   // 0 while being written; set when the file is closed
};
static_assert(sizeof(TraceFileHeader) == 32);

// One rank's recorder. Lane 0 is the thread that constructed it (or bind_main()); every other
// thread records on lane 1. Each lane's events are written by one thread only, so recording takes
// no lock: an append to a buffer reserved up front, flushed to its file when full (by the thread
// that owns the lane) and at close().
class Tracer {
 public:
  // Files under `dir` (created). `origin`: time zero of t0/t1, shared by every rank of a process.
  Tracer(std::string dir, int rank, int size, std::chrono::steady_clock::time_point origin);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void bind_main() { main_ = std::this_thread::get_id(); }
  double now() const;
  int lane() const { return std::this_thread::get_id() == main_ ? 0 : 1; }

  void record(const TraceEvent& e);
  void step(std::int64_t step);
  void span_begin(SpanKind k);
  void span_end(SpanKind k);
  // Async operations: issue() returns its number; begin/end on the communication thread.
  std::int32_t issue(OpLabel label = {});
  void begin();
  void end();
  void wait(std::int32_t op, double t0);
  // A message event that began at t0 and ends now: to `to` (send, sendrecv's send; recv: from
  // it), `bytes`, on link tier `tier`; sendrecv's receive from `from`, `bytes2`, `tier2`.
  void message(TraceKind kind, double t0, std::int32_t to, std::uint64_t bytes, int tier, std::int32_t from = 0,
               std::uint64_t bytes2 = 0, int tier2 = 0, std::uint8_t plane = 0);
  // The last operation issued (-1: none), and the last one lane 0 has waited for (so far): a
  // wait on everything queued is needed in the trace only when the first is beyond the second.
  std::int32_t last_issued() const { return issued_.load(std::memory_order_relaxed) - 1; }
  std::int32_t waited() const { return waited_; }

  // Flushes both lanes and completes the files' headers. Call when no async work is in flight.
  void close();
  const std::string& dir() const { return dir_; }

 private:
  struct Lane {
    std::vector<TraceEvent> buf;
    std::uint64_t written = 0;
    int fd = -1;
  };
  void flush(int lane);
  void open(int lane);
  void instant(TraceKind kind, std::int32_t a, std::uint8_t sub = 0);  // t0 = t1 = now

  std::string dir_;
  int rank_, size_;
  std::chrono::steady_clock::time_point origin_;
  std::thread::id main_;
  Lane lanes_[2];
  std::atomic<std::int32_t> issued_{0};
  std::int32_t begun_ = 0;  // lane 1 only
  std::int32_t waited_ = -1;  // lane 0 only
  bool closed_ = false;
};

// A rank's lane read back. Throws laconic::InputError naming the file on a bad or truncated one,
// or one larger than kMaxTraceBytes (some 80 million events).
inline constexpr std::uint64_t kMaxTraceBytes = 4'000'000'000;
struct TraceLane {
  int rank = 0, size = 0, lane = 0;
  int version = 3;
  std::vector<TraceEvent> events;
};
TraceLane read_trace_lane(const std::string& path);

// Names on a timeline: a compute span's ("forward/backward", "optimizer", "sync (host)"), and a
// message event's ("send", "recv", "sendrecv", or a native collective's; nullptr for other kinds).
const char* span_name(SpanKind k);
const char* message_name(const TraceEvent& e);
std::string trace_lane_path(const std::string& dir, int rank, int lane);

}  // namespace laconic
