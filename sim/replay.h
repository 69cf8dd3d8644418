// Replays a run's event trace (collectives/trace.h) on a simulated network with SimGrid
// (https://simgrid.org, Debian libsimgrid-dev 3.32, its s4u API), so that a run recorded on one
// machine answers "how long on that cluster?" with shared links and overlap credited.
//
// Model. Each rank is a SimGrid host with two cores and two actors: the compute actor replays
// lane 0 (compute gaps, blocking messages, issue of async work, waits for it), the communication
// actor lane 1 (each async operation's messages, in issue order, once it has been issued).
// Messages are SimGrid communications between the two ranks' hosts, one mailbox per (sender,
// receiver, lane), eager (a receiver is declared, so a transfer starts when it is sent, as over
// TCP with buffers), so concurrent flows that cross one link share its bandwidth (max-min
// fairness). A native collective (MPI, NCCL) is expanded into its algorithm's messages: ring
// all-reduce / reduce-scatter / all-gather, pairwise all-to-all, binomial broadcast and reduce,
// dissemination barrier.
//
// Compute: the gaps between a lane's events inside the trainer's compute spans (forward/backward,
// optimizer, the strategy's calls) and inside async operations, as measured, times the host's
// slowdown; or modeled: each step's forward/backward gaps scaled to FLOPs / (device_tflops ·
// mfu), everything else free. Time outside spans (evaluation, logging, checkpoints) is not replayed.
//
// Network model: SimGrid's CM02 with no latency or bandwidth factors, no cross traffic and no TCP
// window bound, so a lone message of S bytes on one link takes exactly latency + S / bandwidth
// (the alpha-beta closed form the old clock used) and what differs is sharing and overlap. An MPI
// library's protocol can be described (ReplayNetwork::protocol; ::inter for messages between
// groups): a message above the eager limit first makes that many round trips of its route (request
// to send, clear to send: messages that queue on the route and wait for the receiver's receive),
// then flows; below it, it flows when sent; a buffered send is done once handed to the transport.
// Several TCP streams per pair and a window per stream can be described too (ReplayNetwork::transport).
// docs/simulation.md says why (LV08's factors were fit to wide-area TCP flows; the real-link
// test checks the choice).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/netsim/topology.h"
#include "collectives/trace.h"
#include "collectives/transport.h"

namespace laconic {

// How a message library moves a message (the replay's exchange()): eagerly, or after a rendezvous
// handshake, and whether a send is done when handed to the transport or when it has arrived.
// OpenMPI's TCP transport: eager_limit 64 KiB, 1 round trip (a request carrying the first 64 KiB,
// then the receiver's clear-to-send once it has posted the receive), buffered.
struct MessageProtocol {
  std::uint64_t eager_limit_bytes = 0;  // messages of more bytes use the rendezvous
  int rendezvous_round_trips = 0;       // request / clear-to-send exchanges before the rest flows (0: eager)
  bool buffered = false;                // a send is done once handed to the transport (a socket buffer)
};

// How the transport carries a message: over `streams` TCP connections per pair (a message of at
// least split_bytes in that many equal pieces at once, as GlooCommunicator does), each held to
// window_bytes per round trip of its route (0: no bound). One stream through a long fat pipe then
// moves at most window / RTT; k streams k times that, until they fill the link:
//   time = latency + bytes / min(bandwidth, k · window / RTT).
//
// Slow start (initial_window_bytes > 0): each connection (a sender, a receiver, a stream; each
// direction its own) starts with that window and doubles it every round trip in which it sent a
// full window, until the window holds the route's bandwidth-delay product; from then on it is
// open. A message sent while the window is smaller takes its rounds: a window's bytes per round trip
// of the route, then the rest at the route's bandwidth, so a lone message of B bytes takes
//   latency + k · RTT + (B - bytes of the k rounds) / bandwidth
// (or, ending within a round, that round's start plus its bytes / bandwidth), and the connection
// keeps the grown window for its next message. The replay caps the message's flow at B over that
// time, so it still shares links max-min. Linux starts at 10 segments of 1448 bytes.
struct TransportModel {
  int streams = 1;
  std::uint64_t split_bytes = 64 * 1024;
  std::uint64_t window_bytes = 0;
  std::uint64_t initial_window_bytes = 0;  // 0: no slow start
};

// The time a message of `bytes` takes beyond the route's one-way latency on a connection whose
// window is `window` (updated to the grown window; at least bdp: open), through a route of
// `bandwidth` bytes/s and round trip `rtt` (TransportModel's slow start).
double slow_start_time(std::uint64_t bytes, double& window, double bandwidth, double rtt);

// The protocol of messages between groups (their ranks' Topology groups differ), where it differs
// from the one inside: TCP between datacenters (a rendezvous, slow start), NCCL or shared memory
// inside (eager, no slow start). A platform file's ranks are tiered by the Topology's groups too.
struct InterTier {
  MessageProtocol protocol;
  std::uint64_t initial_window_bytes = 0;  // TransportModel's slow start, between groups
};

// A native event's expansion (TraceEvent::tier), and the ranks it runs over (tier2). A recorded
// native collective (MPI, NCCL) is the library's: rule 0, on the world; a projection
// (sim/project.h) writes one of ours instead: 1 + its Algorithm (ring, recursive_doubling,
// rabenseifner, hierarchical; ring for collectives other than all-reduce), over the world, the
// rank's group (contiguous, as topology.group_of says) or the groups' leaders (each group's first).
// Their rings (ring all-reduce, reduce-scatter and all-gather) replay message by message up to
// ReplayOptions::message_level_ranks ranks, and beyond as flows: each rank sends its ring's whole
// traffic (steps × chunk) to the next rank as one flow while the previous one's arrives, and pays
// the ring's slowest link latency (and any rendezvous) once per step: one flow per rank per
// collective instead of 2(p - 1) messages, so 10,000 ranks replay in minutes. A ring in lock step
// takes that long; what flows do not credit is the pipelining of a latency-bound ring entered at
// different times (docs/simulation.md measures the difference).
enum class NativeScope : std::uint8_t { world, group, leaders };
inline std::uint8_t expand_as(Algorithm a) { return static_cast<std::uint8_t>(1 + static_cast<int>(a)); }
inline constexpr int kMaxProjectedWorld = 100'000;

struct ReplayNetwork {
  MessageProtocol protocol;            // every message; with `inter`, those inside a group
  TransportModel transport;
  std::optional<InterTier> inter;      // none: `protocol` and `transport` on every link
  Topology topo;                       // groups, links, slowdowns (ignored with a platform file)
  InterLink inter_link = InterLink::shared;
  std::string platform_file;           // a SimGrid platform (XML); its first N hosts are the ranks
};

struct ReplayOptions {
  bool modeled = false;        // modeled compute (see the header comment) instead of measured
  double modeled_step_s = 0;   // modeled forward/backward time of one step
  double scale = 1;            // --as-params: message bytes and compute times this factor
  bool timeline = false;       // keep the spans for a timeline (sim/timeline.h)
  // The run's sync.strategy: a timeline names the messages of its syncs after it ("diloco outer
  // sync: sendrecv"); empty: the messages' own names.
  std::string strategy;
  // Rank r of the replay replays trace[sources[r]] (a projection's ranks share the recorded
  // ranks' lanes); empty: rank r replays trace[r].
  std::vector<int> sources;
  // A projection's rings over at most this many ranks replay message by message, larger ones as
  // flows (NativeScope).
  int message_level_ranks = 256;
};

// One span of the replay's timeline: track 0 compute, track 1 communication. A message span also
// says what crossed which link and why (Perfetto shows them as the event's arguments).
struct TimelineSpan {
  int rank = 0;
  int track = 0;
  std::string name;
  double t0 = 0, t1 = 0;
  std::int64_t step = -1;       // the step it belongs to (an async operation: the step that issued it)
  std::uint64_t bytes = 0;      // message spans: bytes sent (scaled by --as-params)
  int peer = -1;                // the peer sent to (-1: several, as in a native collective)
  int tier = -1;                // link tier of that send: 0 inside a group, 1 between groups
  std::string op;               // the operation: "diloco outer sync", "async op 3", "all_reduce" ...
};

struct RankReplay {
  double end_s = 0;        // when its lane 0 finished
  double exposed_s = 0;    // lane 0 blocked in communication or waiting for async work
  double compute_s = 0;    // compute replayed on either lane
  ByteCounters tiers[2];   // bytes sent / received per link tier (topology tiers; 0 with a file)
  std::vector<double> step_begin;  // time of each step mark, in trace order
  std::vector<double> step_exposed;  // exposed_s at each step mark
  std::vector<std::uint64_t> step_inter_sent;  // tiers[1].sent at each step mark (messages done by then, both lanes)
};

struct ReplayResult {
  double time_s = 0;                // the last rank's end
  std::vector<RankReplay> ranks;
  std::vector<std::int64_t> steps;  // step numbers of the marks (rank 0's)
  std::vector<TimelineSpan> timeline;
  std::string engine;               // e.g. "SimGrid 3.32, CM02, shared uplinks"
};

// The name of the async operation an issue event queued: "<strategy> bucket 3" or "<strategy>
// fragment 1" by its label (strategy empty: "bucket 3"), else "async op <number>".
std::string async_op_name(const TraceEvent& issue, const std::string& strategy);

// One rank's two lanes.
struct RankTrace {
  TraceLane lanes[2];
};
// trace/ of a run: every rank's lanes. Throws InputError naming the file on a missing or bad one.
std::vector<RankTrace> read_run_trace(const std::string& trace_dir);

// Runs the replay in a child process (SimGrid allows one engine per process), so it may be called
// any number of times. Throws Error with SimGrid's reason if the replay fails (a deadlock in the
// trace, a platform file without enough hosts or routes).
ReplayResult replay(const std::vector<RankTrace>& trace, const ReplayNetwork& net, const ReplayOptions& opts);

}  // namespace laconic
