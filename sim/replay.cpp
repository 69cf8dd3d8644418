#include "sim/replay.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>
#include <simgrid/version.h>

#include "collectives/algorithms/broadcast_tree.h"
#include "collectives/algorithms/recursive_doubling.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/tree_reduce.h"
#include "collectives/collectives.h"
#include "core/check.h"

namespace laconic {

namespace sg4 = simgrid::s4u;

std::vector<RankTrace> read_run_trace(const std::string& dir) {
  const std::string first = trace_lane_path(dir, 0, 0);
  if (!std::filesystem::exists(first))
    LC_INPUT_ERROR(dir, ": no event trace here (", first, " is missing; record one with train.trace = true)");
  const TraceLane l0 = read_trace_lane(first);
  std::vector<RankTrace> out(static_cast<std::size_t>(l0.size));
  for (int r = 0; r < l0.size; ++r)
    for (int lane = 0; lane < 2; ++lane) {
      const std::string path = trace_lane_path(dir, r, lane);
      TraceLane t = read_trace_lane(path);
      if (t.size != l0.size || t.rank != r || t.lane != lane)
        LC_INPUT_ERROR(path, ": says rank ", t.rank, " of ", t.size, ", lane ", t.lane, "; expected rank ", r, " of ",
                       l0.size, ", lane ", lane);
      out[static_cast<std::size_t>(r)].lanes[lane] = std::move(t);
    }
  return out;
}

double slow_start_time(std::uint64_t bytes, double& window, double bandwidth, double rtt) {
  const double bdp = bandwidth * rtt;
  double left = static_cast<double>(bytes), t = 0;
  while (left > 0 && window < bdp) {
    if (left <= window) return t + left / bandwidth;  // ends within this round: not a full window, no growth
    left -= window;
    window *= 2;
    t += rtt;
  }
  return t + left / bandwidth;
}

std::string async_op_name(const TraceEvent& issue, const std::string& strategy) {
  const auto kind = static_cast<OpLabel::Kind>(issue.sub);
  if (kind == OpLabel::none) return "async op " + std::to_string(issue.a);
  return (strategy.empty() ? "" : strategy + " ") + op_label_name(kind) + " " + std::to_string(issue.b);
}

namespace {

constexpr double kSpeed = 1e9;  // flop/s of an unslowed host: compute of s seconds is s·1e9 flops
int token = 0;                  // every message's payload (only its simulated size matters)
int* sink = nullptr;            // where a receive puts it (unread)

// "prefix" followed by the numbers, '-' between them (names of hosts, links, mailboxes).
template <class... I>
std::string named(const char* prefix, I... numbers) {
  std::string s = prefix;
  ((s += '-', s += std::to_string(numbers)), ...);
  return s;
}

// The messages of a native collective on rank r of p, as our algorithms send them. Small ones (the
// control plane's agreements and metrics) are latency-bound: an all-reduce as a reduce to rank 0
// and its broadcast (2 lg p rounds: what the 8-byte stop agreement measures across a real link),
// an all-gather on a power-of-two world as recursive doubling (lg p exchanges); not as a ring's
// 2(p - 1) or p - 1 latency-bound steps.
struct Expansion {
  static constexpr std::uint64_t kSmall = 8192;  // bytes: at most this, recursive doubling
  template <class SendRecv, class Send, class Recv>
  static void run(Collective c, std::uint64_t bytes, int root, int p, int r, SendRecv sendrecv, Send send, Recv recv) {
    if (p <= 1) return;
    const std::uint64_t chunk = bytes / static_cast<std::uint64_t>(p);
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    const bool doubling = bytes <= kSmall && (p & (p - 1)) == 0;  // all-gather
    switch (c) {
      case Collective::all_reduce:
        if (bytes <= kSmall) {  // a reduce to rank 0 and its broadcast: 2 lg p latency-bound rounds
          const auto from = [&](int u) { recv(u, bytes); };
          const auto to = [&](int u) { send(u, bytes); };
          TreeReduce::schedule(p, r, from, to);
          BroadcastTree::schedule(p, r, from, to);
          return;
        }
        for (int s = 0; s < 2 * (p - 1); ++s) sendrecv(next, chunk, prev, chunk);
        return;
      case Collective::all_gather:
        if (doubling) {
          for (std::uint64_t k = 1, have = chunk; k < static_cast<std::uint64_t>(p); k <<= 1, have <<= 1)
            sendrecv(r ^ static_cast<int>(k), have, r ^ static_cast<int>(k), have);
          return;
        }
        [[fallthrough]];
      case Collective::reduce_scatter:
        for (int s = 0; s < p - 1; ++s) sendrecv(next, chunk, prev, chunk);
        return;
      case Collective::all_to_all:
        for (int s = 1; s < p; ++s) sendrecv((r + s) % p, chunk, (r - s + p) % p, chunk);
        return;
      case Collective::broadcast:
      case Collective::reduce: {  // the trees of collectives/algorithms, their messages as run() sends them
        const int v = (r - root + p) % p;
        const auto from = [&](int u) { recv((u + root) % p, bytes); };
        const auto to = [&](int u) { send((u + root) % p, bytes); };
        if (c == Collective::broadcast) BroadcastTree::schedule(p, v, from, to);
        else TreeReduce::schedule(p, v, from, to);
        return;
      }
      case Collective::barrier:
        for (int k = 1; k < p; k <<= 1) sendrecv((r + k) % p, 1, (r - k + p) % p, 1);
        return;
    }
  }
};

enum class Channel : std::uint8_t { first, rest, answer };

class Engine {
 public:
  Engine(const std::vector<RankTrace>& trace, const ReplayNetwork& net, const ReplayOptions& opts)
      : trace_(trace), net_(net), opts_(opts),
        n_(static_cast<int>(opts.sources.empty() ? trace.size() : opts.sources.size())) {}

  ReplayResult run() {
    // SimGrid's own log: only what is critical (a deadlock report names the stuck actors).
    char name[] = "laconic-replay";
    char log[] = "--log=root.thres:critical";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Sanitizers cannot follow SimGrid's own stack switching (raw contexts): actors as threads.
    char contexts[] = "--cfg=contexts/factory:thread";
    char* argv[] = {name, log, contexts, nullptr};
#else
    // Thousands of ranks (a projection) are thousands of actors: stacks of 512 KiB, not 8 MiB.
    char stack[] = "--cfg=contexts/stack-size:512";
    char* argv[] = {name, log, n_ > 256 ? stack : nullptr, nullptr};
#endif
    int argc = 0;
    while (argv[argc]) ++argc;
    sg4::Engine e(&argc, argv);
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    // A stream's window: SimGrid's CM02 holds each flow to TCP-gamma / (2 · its route's latency),
    // the window per round trip. No window: a gamma no link can reach (CM02 reads 0 as no bound
    // but then also drops a flow's own rate, which slow start sets).
    const double gamma = net_.transport.window_bytes > 0 ? static_cast<double>(net_.transport.window_bytes) : 1e30;
    sg4::Engine::set_config("network/TCP-gamma:" + std::to_string(gamma));
    platform(e);
    ranks_.resize(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      Rank& k = ranks_[static_cast<std::size_t>(r)];
      k.mu = sg4::Mutex::create();
      k.cv = sg4::ConditionVariable::create();
      k.factor = modeled_factors(r);
      k.actor[0] = sg4::Actor::create(named("compute", r), hosts_[static_cast<std::size_t>(r)],
                                      [this, r] { guarded([&] { lane0(r); }); });
      k.actor[1] = sg4::Actor::create(named("comm", r), hosts_[static_cast<std::size_t>(r)],
                                      [this, r] { guarded([&] { lane1(r); }); });
    }
    e.run();
    if (!error_.empty()) throw Error(error_);
    ReplayResult out;
    for (int r = 0; r < n_; ++r) {
      const Rank& k = ranks_[static_cast<std::size_t>(r)];
      LC_CHECK(k.done[0] && k.done[1], "replay: rank ", r, " never finished (lane 0 at event ", k.at[0], " of ",
               lane(r, 0).size(), ", lane 1 at ", k.at[1], " of ", lane(r, 1).size(),
               "): the trace's ranks do not match each other");
      out.ranks.push_back(k.out);
      out.time_s = std::max(out.time_s, k.out.end_s);
    }
    for (const TraceEvent& ev : lane(0, 0))
      if (ev.kind == TraceKind::step) out.steps.push_back(ev.a);
    out.timeline = std::move(timeline_);
    out.engine = describe();
    return out;
  }

 private:
  struct Rank {
    sg4::MutexPtr mu;
    sg4::ConditionVariablePtr cv;
    int issued = 0, completed = 0;
    bool done[2] = {false, false};
    std::size_t at[2] = {0, 0};
    std::vector<double> factor;  // modeled: per step segment, forward/backward scale
    std::int64_t step = -1;      // lane 0's current step
    std::vector<std::int64_t> issue_step;  // the step at each async operation's issue
    std::vector<std::string> issue_op;     // and its name (async_op_name)
    sg4::ActorPtr actor[2];                // each lane's actor, the receiver of its mailboxes
    std::vector<sg4::Mailbox*> inbox[2];   // the mailboxes made so far that it receives from
    std::uint64_t sent[2] = {0, 0};        // bytes each lane sent (scaled), counted or not
    RankReplay out;
  };

  // The world ranks of a communicator: rank k of p is first + k · stride; this one is `index`.
  struct Members {
    int first = 0, stride = 1, p = 1, index = 0;
    int world(int k) const { return first + k * stride; }
  };

  // An actor's error ends the replay with its message (SimGrid's own kill exception passes).
  template <class F>
  void guarded(F f) {
    try {
      f();
    } catch (const std::exception& e) {
      if (error_.empty()) error_ = e.what();
    }
  }

  const std::vector<TraceEvent>& lane(int r, int l) const {
    const auto i = static_cast<std::size_t>(r);
    return trace_[opts_.sources.empty() ? i : static_cast<std::size_t>(opts_.sources[i])].lanes[l].events;
  }
  // The mailbox from s to d on lane l and channel ch, made on first use with d's actor as its
  // receiver. Channels (each FIFO, so a message's parts match in order): `first` carries a message
  // or a rendezvous's request, `rest` the rest of a rendezvous message, `answer` a receiver's
  // clear-to-send back to the sender (exchange()).
  sg4::Mailbox* box(int l, int s, int d, Channel ch) {
    const std::uint64_t key = ((static_cast<std::uint64_t>(ch) * 2 + static_cast<std::uint64_t>(l)) * static_cast<std::uint64_t>(n_) +
                               static_cast<std::uint64_t>(s)) * static_cast<std::uint64_t>(n_) + static_cast<std::uint64_t>(d);
    if (const auto it = boxes_.find(key); it != boxes_.end()) return it->second;
    // SimGrid's calls may switch to another actor (simcalls), which may make the same mailbox:
    // the map gets only a mailbox ready for use, and once.
    sg4::Mailbox* m = sg4::Mailbox::by_name(named("m", s, d, l, static_cast<int>(ch)));
    Rank& k = ranks_[static_cast<std::size_t>(d)];
    if (k.actor[l]) m->set_receiver(k.actor[l]);
    if (boxes_.try_emplace(key, m).second) k.inbox[l].push_back(m);
    return m;
  }
  int tier(int a, int b) const {
    const auto& g = net_.topo.group_of;
    if (static_cast<int>(g.size()) != n_) return 0;
    return g[static_cast<std::size_t>(a)] == g[static_cast<std::size_t>(b)] ? 0 : 1;
  }

  std::string describe() const {
    std::string s = "SimGrid " + std::to_string(SIMGRID_VERSION_MAJOR) + "." + std::to_string(SIMGRID_VERSION_MINOR) +
                    ", CM02 without factors, ";
    if (!net_.platform_file.empty()) return s + "platform " + net_.platform_file;
    return s + (net_.inter_link == InterLink::shared ? "one shared uplink per group" : "a private link per rank pair");
  }

  // ---- the platform ----

  void platform(sg4::Engine& e) {
    if (!net_.platform_file.empty()) {
      e.load_platform(net_.platform_file);
      hosts_ = e.get_all_hosts();
      LC_CHECK(static_cast<int>(hosts_.size()) >= n_, net_.platform_file, ": ", hosts_.size(),
               " hosts for a trace of ", n_, " ranks");
      hosts_.resize(static_cast<std::size_t>(n_));
      return;
    }
    const Topology& t = net_.topo;
    LC_CHECK(t.size() == n_, "replay: the network describes ", t.size(), " ranks, the trace has ", n_);
    if (net_.inter_link == InterLink::shared || t.num_groups() == 1) return star_platform();
    auto* zone = sg4::create_full_zone("cluster");
    std::vector<sg4::Link*> nic;
    for (int r = 0; r < n_; ++r) {
      sg4::Host* h = zone->create_host(named("rank", r), kSpeed / t.slowdown_of(r));
      h->set_core_count(2);  // the compute and the communication actor
      hosts_.push_back(h);
      nic.push_back(zone->create_split_duplex_link(named("nic", r), t.intra.bandwidth_Bps)
                        ->set_latency(t.intra.latency_s / 2));
    }
    // Between groups: inter latency in all (the NICs' part included), so one message across takes
    // exactly inter latency + S / inter bandwidth when nothing else competes.
    const double wan_latency = std::max(0.0, t.inter.latency_s - t.intra.latency_s);
    using Dir = sg4::LinkInRoute::Direction;
    for (int a = 0; a < n_; ++a)
      for (int b = a + 1; b < n_; ++b) {
        const auto ga = static_cast<std::size_t>(t.group_of[static_cast<std::size_t>(a)]);
        const auto gb = static_cast<std::size_t>(t.group_of[static_cast<std::size_t>(b)]);
        std::vector<sg4::LinkInRoute> ab{{nic[static_cast<std::size_t>(a)], Dir::UP}};
        std::vector<sg4::LinkInRoute> ba{{nic[static_cast<std::size_t>(b)], Dir::UP}};
        if (ga != gb) {
          sg4::Link* pair = zone->create_split_duplex_link(named("pair", a, b),
                                                           t.inter.bandwidth_Bps)
                                ->set_latency(wan_latency);
          ab.emplace_back(pair, Dir::UP);
          ba.emplace_back(pair, Dir::DOWN);
        }
        ab.emplace_back(nic[static_cast<std::size_t>(b)], Dir::DOWN);
        ba.emplace_back(nic[static_cast<std::size_t>(a)], Dir::DOWN);
        zone->add_route(hosts_[static_cast<std::size_t>(a)]->get_netpoint(),
                        hosts_[static_cast<std::size_t>(b)]->get_netpoint(), nullptr, nullptr, ab, false);
        zone->add_route(hosts_[static_cast<std::size_t>(b)]->get_netpoint(),
                        hosts_[static_cast<std::size_t>(a)]->get_netpoint(), nullptr, nullptr, ba, false);
      }
    zone->seal();
  }

  // Shared uplinks: a star of NICs per group behind its gateway, and a star of the groups' uplinks
  // (routes are made on demand, so 10,000 ranks take memory in N, not N²). Within a group a message
  // crosses the two NICs (intra latency); between groups also both uplinks, whose latency makes up
  // the rest of the inter latency.
  void star_platform() {
    const Topology& t = net_.topo;
    using Dir = sg4::LinkInRoute::Direction;
    auto* world = sg4::create_star_zone("world");
    const double wan_latency = std::max(0.0, t.inter.latency_s - t.intra.latency_s);
    hosts_.assign(static_cast<std::size_t>(n_), nullptr);
    for (int g = 0; g < t.num_groups(); ++g) {
      auto* zone = sg4::create_star_zone(named("group", g));
      zone->set_parent(world);
      auto* gateway = zone->create_router(named("gateway", g));
      zone->add_route(gateway, nullptr, nullptr, nullptr, {}, true);
      for (int r = 0; r < n_; ++r) {
        if (t.group_of[static_cast<std::size_t>(r)] != g) continue;
        sg4::Host* h = zone->create_host(named("rank", r), kSpeed / t.slowdown_of(r));
        h->set_core_count(2);  // the compute and the communication actor
        hosts_[static_cast<std::size_t>(r)] = h;
        sg4::Link* nic = zone->create_split_duplex_link(named("nic", r), t.intra.bandwidth_Bps)
                             ->set_latency(t.intra.latency_s / 2);
        zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {{nic, Dir::UP}}, true);
      }
      zone->seal();
      sg4::Link* uplink = world->create_split_duplex_link(named("uplink", g), t.inter.bandwidth_Bps)
                              ->set_latency(wan_latency / 2);
      world->add_route(zone->get_netpoint(), nullptr, gateway, nullptr, {{uplink, Dir::UP}}, true);
    }
    world->seal();
  }

  // ---- compute ----

  // Modeled compute: per step segment of lane 0 (between step marks; segment 0 before the first),
  // the factor that turns the measured forward/backward gaps into the modeled step time.
  std::vector<double> modeled_factors(int r) const {
    std::vector<double> sums(1, 0.0);
    int span = -1;
    double prev = 0;
    for (const TraceEvent& e : lane(r, 0)) {
      if (span == static_cast<int>(SpanKind::forward_backward)) sums.back() += std::max(0.0, e.t0 - prev);
      if (e.kind == TraceKind::step) sums.push_back(0.0);
      if (e.kind == TraceKind::span_begin) span = e.sub;
      if (e.kind == TraceKind::span_end) span = -1;
      prev = e.t1;
    }
    for (double& s : sums) s = s > 0 ? opts_.modeled_step_s / s : 0.0;
    return sums;
  }

  // The operation a lane-0 message inside the strategy's sync span belongs to: "<strategy> sync"
  // (gradients or waits), "<strategy> outer sync" (an after_update that averages parameters);
  // empty outside them or without a strategy name. Its span is named "<op>: <message>".
  std::string sync_op(int span_kind) const {
    const bool outer = span_kind == static_cast<int>(SpanKind::outer_sync);
    if (opts_.strategy.empty() || (!outer && span_kind != static_cast<int>(SpanKind::sync))) return {};
    return opts_.strategy + (outer ? " outer sync" : " sync");
  }

  void span(TimelineSpan s) {
    if (!opts_.timeline || s.t1 <= s.t0) return;
    // Consecutive pieces of one activity (compute split by an instant event, a ring's steps) make
    // one span; their bytes add, and a peer that differs becomes -1 (several).
    for (auto it = timeline_.rbegin(); it != timeline_.rend() && it - timeline_.rbegin() < 4; ++it)
      if (it->rank == s.rank && it->track == s.track) {
        if (it->name == s.name && it->step == s.step && std::abs(it->t1 - s.t0) < 1e-12) {
          it->t1 = s.t1;
          it->bytes += s.bytes;
          if (it->peer != s.peer) it->peer = -1;
          if (it->tier != s.tier) it->tier = std::max(it->tier, s.tier);
          return;
        }
        break;
      }
    timeline_.push_back(std::move(s));
  }
  void span(int r, int track, const std::string& name, double t0, double t1) {
    span(TimelineSpan{.rank = r, .track = track, .name = name, .t0 = t0, .t1 = t1, .op = {}});
  }
  // The span of message event e of rank r, which took t0..now, in operation `op` of `step`.
  void message_span(int r, const TraceEvent& e, const std::string& op, std::int64_t step, double t0,
                    std::uint64_t sent) {
    if (!opts_.timeline) return;
    TimelineSpan s{.rank = r, .track = 1, .name = op.empty() ? message_name(e) : op + ": " + message_name(e), .t0 = t0, .t1 = sg4::Engine::get_clock(), .op = {}};
    s.step = step;
    s.op = op.empty() ? message_name(e) : op;
    s.bytes = sent;
    if (e.kind != TraceKind::native) {
      s.peer = e.a;
      s.tier = tier(r, e.a);
    }
    span(std::move(s));
  }

  // `seconds` of compute of the given span kind (-1: inside an async operation) on rank r.
  void compute(int r, double seconds, int span_kind, std::size_t segment) {
    Rank& k = ranks_[static_cast<std::size_t>(r)];
    if (opts_.modeled) {
      if (span_kind != static_cast<int>(SpanKind::forward_backward)) return;
      seconds *= k.factor[std::min(segment, k.factor.size() - 1)];
    }
    seconds *= opts_.scale;
    if (seconds <= 0) return;
    const double t0 = sg4::Engine::get_clock();
    sg4::this_actor::execute(seconds * kSpeed);
    k.out.compute_s += sg4::Engine::get_clock() - t0;
    span(r, span_kind < 0 ? 1 : 0, span_kind < 0 ? "encode/decode" : span_name(static_cast<SpanKind>(span_kind)), t0, sg4::Engine::get_clock());
  }

  // ---- messages ----

  std::uint64_t scaled(std::uint64_t bytes) const {
    return opts_.scale == 1 ? bytes : static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) * opts_.scale));
  }
  // The control plane's messages (TraceEvent::plane 1) take time but are not training bytes.
  void count_send(int r, int l, int to, std::uint64_t bytes, bool counted, std::uint64_t messages = 1) {
    ranks_[static_cast<std::size_t>(r)].sent[l] += bytes;
    if (!counted) return;
    ByteCounters& c = ranks_[static_cast<std::size_t>(r)].out.tiers[tier(r, to)];
    c.sent += bytes;
    c.messages_sent += messages;
  }
  void count_recv(int r, int from, std::uint64_t bytes, bool counted) {
    if (!counted) return;
    ranks_[static_cast<std::size_t>(r)].out.tiers[tier(from, r)].recv += bytes;
  }
  // The streams a message of `bytes` travels on (both ends count the same).
  int pieces(std::uint64_t bytes) const {
    const TransportModel& t = net_.transport;
    return t.streams > 1 && bytes >= t.split_bytes && bytes >= static_cast<std::uint64_t>(t.streams) ? t.streams : 1;
  }
  // The protocol of link tier t (Topology's: 0 inside a group, 1 between), and of a message a -> b.
  const MessageProtocol& tier_protocol(int t) const { return t == 1 && net_.inter ? net_.inter->protocol : net_.protocol; }
  const MessageProtocol& protocol(int a, int b) const { return net_.inter ? tier_protocol(tier(a, b)) : net_.protocol; }
  static bool rendezvous(const MessageProtocol& m, std::uint64_t bytes) {
    return m.rendezvous_round_trips > 0 && bytes > m.eager_limit_bytes;
  }
  // Sends `bytes` from r to `to` on channel ch as k pieces (piece s: bytes·s/k to bytes·(s+1)/k;
  // each a flow of its own, held to the window per round trip by the engine's TCP-gamma). Detached:
  // r does not wait for them; else their comms join `comms`.
  void put(int l, int r, int to, Channel ch, std::uint64_t bytes, int k, bool detached, std::vector<sg4::CommPtr>& comms) {
    for (int s = 0; s < k; ++s) {
      const std::uint64_t piece = bytes * static_cast<std::uint64_t>(s + 1) / static_cast<std::uint64_t>(k) -
                                  bytes * static_cast<std::uint64_t>(s) / static_cast<std::uint64_t>(k);
      sg4::CommPtr c = box(l, r, to, ch)->put_init(&token, piece);
      if (const double cap = slow_start_rate(r, to, s, piece); cap > 0) c->set_rate(cap);
      if (detached) {
        c->detach();
      } else {
        c->start();
        comms.push_back(std::move(c));
      }
    }
  }
  // The route from a to b: its one-way latency and its slowest link's bandwidth (made once).
  struct Route {
    double latency = 0, bandwidth = std::numeric_limits<double>::infinity();
  };
  const Route& route(int a, int b) {
    const std::uint64_t pair = static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(n_) + static_cast<std::uint64_t>(b);
    auto [it, fresh] = routes_.try_emplace(pair);
    if (fresh) {
      std::vector<sg4::Link*> links;
      hosts_[static_cast<std::size_t>(a)]->route_to(hosts_[static_cast<std::size_t>(b)], links, &it->second.latency);
      for (const sg4::Link* link : links) it->second.bandwidth = std::min(it->second.bandwidth, link->get_bandwidth());
    }
    return it->second;
  }
  // The rate a piece of `bytes` on stream s from r to `to` is held to while its connection's window
  // grows (TransportModel's slow start), updating the window; 0: no bound.
  double slow_start_rate(int r, int to, int s, std::uint64_t bytes) {
    const std::uint64_t initial = net_.inter && tier(r, to) == 1 ? net_.inter->initial_window_bytes
                                                                 : net_.transport.initial_window_bytes;
    if (initial == 0 || bytes == 0) return 0;
    const Route& rt = route(r, to);
    if (!(rt.bandwidth < std::numeric_limits<double>::infinity()) || rt.latency <= 0) return 0;
    const std::uint64_t pair = static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(n_) + static_cast<std::uint64_t>(to);
    double& window = windows_.try_emplace(pair * 64 + static_cast<std::uint64_t>(s), static_cast<double>(initial)).first->second;
    const double b = static_cast<double>(bytes);
    const double t = slow_start_time(bytes, window, rt.bandwidth, 2 * rt.latency);
    return t > b / rt.bandwidth * (1 + 1e-9) ? b / t : 0;
  }
  void get(int l, int r, int from, Channel ch, int k, std::vector<sg4::CommPtr>& comms) {
    for (int s = k; s > 0; --s) comms.push_back(box(l, from, r, ch)->get_async<int>(&sink));
  }
  static void wait_all(std::vector<sg4::CommPtr>& comms) {
    for (auto& c : comms) c->wait();
    comms.clear();
  }

  // One send (to >= 0) and one receive (from >= 0) in flight together, as an MPI_Isend, an
  // MPI_Irecv and an MPI_Waitall, under the described protocol (MessageProtocol):
  //   eager (at most eager_limit bytes, or no rendezvous): the message flows when sent;
  //   rendezvous: a request carrying the first eager_limit bytes flows; the receiver, once its
  //   receive is posted and the request has arrived, answers with an empty clear-to-send (each
  //   further round trip: another empty request and answer); then the rest flows.
  // A buffered send is done once handed to the transport (after its clear-to-send), as a send into a
  // socket buffer is; an unbuffered one when its bytes have arrived. A receive, when they have.
  // Requests and answers are never waited for by their sender: the answer or the rest says they
  // arrived. Every part is a flow on the route, so it queues behind the traffic there. The send
  // follows its link tier's protocol (`so`), the receive its own (`ri`).
  void exchange(int r, int l, int to, std::uint64_t out, int from, std::uint64_t in) {
    const MessageProtocol& so = to >= 0 ? protocol(r, to) : net_.protocol;
    const MessageProtocol& ri = from >= 0 ? protocol(from, r) : net_.protocol;
    // A rendezvous message's request carries its first eager_limit bytes; the rest follows.
    const auto head = [](const MessageProtocol& m, std::uint64_t bytes) { return std::min<std::uint64_t>(m.eager_limit_bytes, bytes); };
    enum What { part, answer, request };  // what a pending comm's arrival means to this exchange
    std::vector<sg4::CommPtr> comms, ours;
    std::vector<What> what;
    const auto track = [&](What w) {
      for (auto& c : ours) {
        comms.push_back(std::move(c));
        what.push_back(w);
      }
      ours.clear();
    };
    const auto send_data = [&](Channel ch, std::uint64_t bytes) {
      put(l, r, to, ch, bytes, pieces(bytes), so.buffered, ours);
      track(part);
    };
    if (to >= 0 && !rendezvous(so, out)) send_data(Channel::first, out);
    if (to >= 0 && rendezvous(so, out)) {
      put(l, r, to, Channel::first, head(so, out), 1, true, ours);
      get(l, r, to, Channel::answer, 1, ours);
      track(answer);
    }
    if (from >= 0) {
      get(l, r, from, Channel::first, rendezvous(ri, in) ? 1 : pieces(in), ours);
      track(rendezvous(ri, in) ? request : part);
    }
    int answers = 0, requests = 0;
    while (!comms.empty()) {
      const auto i = static_cast<std::size_t>(sg4::Comm::wait_any(comms));
      const What w = what[i];
      comms.erase(comms.begin() + static_cast<std::ptrdiff_t>(i));
      what.erase(what.begin() + static_cast<std::ptrdiff_t>(i));
      if (w == answer && ++answers < so.rendezvous_round_trips) {
        put(l, r, to, Channel::first, 0, 1, true, ours);
        get(l, r, to, Channel::answer, 1, ours);
        track(answer);
      } else if (w == answer) {
        send_data(Channel::rest, out - head(so, out));
      } else if (w == request) {
        put(l, r, from, Channel::answer, 0, 1, true, ours);
        const bool more = ++requests < ri.rendezvous_round_trips;
        get(l, r, from, more ? Channel::first : Channel::rest, more ? 1 : pieces(in - head(ri, in)), ours);
        track(more ? request : part);
      }
    }
  }
  void send(int r, int l, int to, std::uint64_t bytes, bool counted) {
    bytes = scaled(bytes);
    exchange(r, l, to, bytes, -1, 0);
    count_send(r, l, to, bytes, counted);
  }
  void recv(int r, int l, int from, std::uint64_t bytes, bool counted) {
    bytes = scaled(bytes);
    exchange(r, l, -1, 0, from, bytes);
    count_recv(r, from, bytes, counted);
  }
  void sendrecv(int r, int l, int to, std::uint64_t out, int from, std::uint64_t in, bool counted) {
    out = scaled(out);
    in = scaled(in);
    exchange(r, l, to, out, from, in);
    count_send(r, l, to, out, counted);
    count_recv(r, from, in, counted);
  }

  // A message event of lane l (send, recv, sendrecv or native); returns false for other kinds.
  bool message(int r, int l, const TraceEvent& e) {
    const bool counted = e.plane == 0;
    switch (e.kind) {
      case TraceKind::send: send(r, l, e.a, e.bytes, counted); return true;
      case TraceKind::recv: recv(r, l, e.a, e.bytes, counted); return true;
      case TraceKind::sendrecv: sendrecv(r, l, e.a, e.bytes, e.b, e.bytes2, counted); return true;
      case TraceKind::native:
        if (e.tier != 0) {
          projected(r, l, e, counted);
          return true;
        }
        Expansion::run(
            static_cast<Collective>(e.sub), e.bytes, e.a, n_, r,
            [&](int to, std::uint64_t o, int from, std::uint64_t i) { sendrecv(r, l, to, o, from, i, counted); },
            [&](int to, std::uint64_t b) { send(r, l, to, b, counted); },
            [&](int from, std::uint64_t b) { recv(r, l, from, b, counted); });
        return true;
      default: return false;
    }
  }

  // ---- a projection's collectives (NativeScope, expand_as) ----

  Members members(int r, NativeScope scope) {
    if (scope == NativeScope::world) return {0, 1, n_, r};
    if (group_first_.empty()) {  // contiguous groups of equal size, as a projection lays them out
      const auto& g = net_.topo.group_of;
      LC_CHECK(static_cast<int>(g.size()) == n_, "replay: a group's collective needs the network's groups");
      for (int q = 0; q < n_; ++q) {
        const int gq = g[static_cast<std::size_t>(q)];
        if (gq == static_cast<int>(group_first_.size())) group_first_.push_back(q);
        LC_CHECK(gq == static_cast<int>(group_first_.size()) - 1, "replay: groups that are not contiguous");
      }
      group_size_ = n_ / static_cast<int>(group_first_.size());
      LC_CHECK(group_size_ * static_cast<int>(group_first_.size()) == n_, "replay: groups of unequal size");
    }
    const int g = net_.topo.group_of[static_cast<std::size_t>(r)];
    const int first = group_first_[static_cast<std::size_t>(g)];
    if (scope == NativeScope::group) return {first, 1, group_size_, r - first};
    LC_CHECK(r == first, "replay: rank ", r, " is not its group's leader but runs the leaders' collective");
    return {0, group_size_, static_cast<int>(group_first_.size()), g};
  }

  // A ring over m's ranks: its slowest link latency and the link tiers it crosses (once per communicator).
  struct Ring {
    double latency = 0;
    bool tier[2] = {false, false};
  };
  const Ring& ring_of(const Members& m) {
    auto [it, fresh] = rings_.try_emplace(std::make_tuple(m.first, m.stride, m.p));
    if (fresh)
      for (int k = 0; k < m.p; ++k) {
        const int a = m.world(k), b = m.world((k + 1) % m.p);
        it->second.latency = std::max(it->second.latency, route(a, b).latency);
        it->second.tier[tier(a, b)] = true;
      }
    return it->second;
  }
  // The request / clear-to-send round trips a ring's step makes before a chunk flows: the most any
  // of its tiers' protocols asks, as a ring in lock step waits for its slowest link.
  int round_trips(const Ring& ring, std::uint64_t chunk) const {
    int rounds = 0;
    for (int t = 0; t < 2; ++t)
      if (ring.tier[t] && rendezvous(tier_protocol(t), chunk)) rounds = std::max(rounds, tier_protocol(t).rendezvous_round_trips);
    return rounds;
  }

  // The ring algorithms' messages (collectives/algorithms/ring_allreduce): a reduce-scatter's p - 1
  // steps then, for an all-reduce, an all-gather's, over `bytes` in the algorithm's RingChunks (of
  // 4-byte elements). `phases`: 1 all-gather, 2 reduce-scatter and all-gather (-1: reduce-scatter alone).
  void ring(int r, int l, const Members& m, int phases, std::uint64_t bytes, bool counted) {
    if (m.p <= 1) return;
    const int p = m.p, i = m.index;
    const std::uint64_t unit = bytes % 4 == 0 ? 4 : 1;
    const RingChunks chunks{bytes / unit, p};
    const auto chunk = [&](int c) { return unit * chunks.size(((c % p) + p) % p); };
    const int next = m.world((i + 1) % p), prev = m.world((i + p - 1) % p);
    const int steps = (phases == 2 ? 2 : 1) * (p - 1);
    if (p > opts_.message_level_ranks) return ring_flows(r, l, m, next, prev, steps, bytes / static_cast<std::uint64_t>(p), counted);
    if (phases != 1)
      for (int s = 0; s < p - 1; ++s) sendrecv(r, l, next, chunk(i - s - 1), prev, chunk(i - s - 2), counted);
    if (phases != -1)
      for (int s = 0; s < p - 1; ++s) sendrecv(r, l, next, chunk(i - s), prev, chunk(i - s - 1), counted);
  }

  // A ring of `steps` steps of `chunk` bytes as flows (see NativeScope in replay.h).
  void ring_flows(int r, int l, const Members& m, int next, int prev, int steps, std::uint64_t chunk, bool counted) {
    const Ring& ring = ring_of(m);
    const double ring_latency = ring.latency;
    chunk = scaled(chunk);
    const std::uint64_t total = chunk * static_cast<std::uint64_t>(steps);
    const int k = pieces(chunk);
    std::vector<sg4::CommPtr> g, s;
    get(l, r, prev, Channel::first, k, g);
    put(l, r, next, Channel::first, total, k, false, s);
    wait_all(g);
    wait_all(s);
    double latency = (steps - 1) * ring_latency;
    if (const int rounds = round_trips(ring, chunk); rounds > 0) latency += steps * rounds * 2 * ring_latency;
    sg4::this_actor::sleep_for(latency);
    count_send(r, l, next, total, counted, static_cast<std::uint64_t>(steps));
    count_recv(r, prev, total, counted);
  }

  void projected(int r, int l, const TraceEvent& e, bool counted) {
    const Members m = members(r, static_cast<NativeScope>(e.tier2));
    if (m.p <= 1) return;
    const auto c = static_cast<Collective>(e.sub);
    const auto a = static_cast<Algorithm>(e.tier - 1);
    const std::uint64_t bytes = e.bytes;
    const auto sr = [&](int to, std::uint64_t o, int from, std::uint64_t i) {
      sendrecv(r, l, m.world(to), o, m.world(from), i, counted);
    };
    const auto sd = [&](int to, std::uint64_t b) { send(r, l, m.world(to), b, counted); };
    const auto rv = [&](int from, std::uint64_t b) { recv(r, l, m.world(from), b, counted); };
    if (c == Collective::all_gather || c == Collective::reduce_scatter)
      return ring(r, l, m, c == Collective::all_gather ? 1 : -1, bytes, counted);
    if (c != Collective::all_reduce) return Expansion::run(c, bytes, 0, m.p, m.index, sr, sd, rv);
    switch (a) {
      case Algorithm::recursive_doubling:
      case Algorithm::rabenseifner: {  // collectives/algorithms: fold to a power of two, exchange, unfold
        const PowerOfTwoFold f(m.index, m.p);
        if (m.index < 2 * f.rem) (f.newrank < 0 ? sd(m.index + 1, bytes) : rv(m.index - 1, bytes));
        if (f.newrank >= 0) {
          const auto block = [&](int n) { return bytes * static_cast<std::uint64_t>(n) / static_cast<std::uint64_t>(f.pof2); };
          if (a == Algorithm::recursive_doubling)
            for (int mask = 1; mask < f.pof2; mask <<= 1) sr(f.to_rank(f.newrank ^ mask), bytes, f.to_rank(f.newrank ^ mask), bytes);
          else {
            for (int w = f.pof2 / 2; w >= 1; w /= 2) sr(f.to_rank(f.newrank ^ w), block(w), f.to_rank(f.newrank ^ w), block(w));
            for (int w = 1; w < f.pof2; w *= 2) sr(f.to_rank(f.newrank ^ w), block(w), f.to_rank(f.newrank ^ w), block(w));
          }
        }
        if (m.index < 2 * f.rem) (f.newrank < 0 ? rv(m.index + 1, bytes) : sd(m.index - 1, bytes));
        return;
      }
      case Algorithm::hierarchical: {  // tree reduce in the group, ring among leaders, tree broadcast
        LC_CHECK(static_cast<NativeScope>(e.tier2) == NativeScope::world, "replay: a hierarchical all-reduce on a subset");
        const Members grp = members(r, NativeScope::group);
        const auto from = [&](int u) { recv(r, l, grp.world(u), bytes, counted); };
        const auto to = [&](int u) { send(r, l, grp.world(u), bytes, counted); };
        TreeReduce::schedule(grp.p, grp.index, from, to);
        if (grp.index == 0) {
          const Members top = members(r, NativeScope::leaders);
          ring(r, l, top, 2, bytes, counted);
        }
        BroadcastTree::schedule(grp.p, grp.index, from, to);
        return;
      }
      default: return ring(r, l, m, 2, bytes, counted);
    }
  }

  // ---- the two actors of a rank ----

  // Lane l of rank r has finished: its mailboxes have no receiver any more.
  void retire(int r, int l) {
    Rank& k = ranks_[static_cast<std::size_t>(r)];
    for (sg4::Mailbox* b : k.inbox[l]) b->set_receiver(nullptr);
    k.actor[l] = nullptr;
  }

  void lane0(int r) {
    Rank& k = ranks_[static_cast<std::size_t>(r)];
    const std::vector<TraceEvent>& ev = lane(r, 0);
    int span_kind = -1;
    std::size_t segment = 0;
    double prev = ev.empty() ? 0 : ev.front().t0;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      k.at[0] = i;
      const TraceEvent& e = ev[i];
      if (span_kind >= 0) compute(r, e.t0 - prev, span_kind, segment);
      prev = e.t1;
      const double t0 = sg4::Engine::get_clock();
      const std::uint64_t sent = k.sent[0];
      if (message(r, 0, e)) {
        k.out.exposed_s += sg4::Engine::get_clock() - t0;
        message_span(r, e, e.plane ? "control plane" : sync_op(span_kind), k.step, t0, k.sent[0] - sent);
        continue;
      }
      switch (e.kind) {
        case TraceKind::step:
          k.step = e.a;
          k.out.step_begin.push_back(t0);
          k.out.step_exposed.push_back(k.out.exposed_s);
          k.out.step_inter_sent.push_back(k.out.tiers[1].sent);
          ++segment;
          break;
        case TraceKind::span_begin: span_kind = e.sub; break;
        case TraceKind::span_end: span_kind = -1; break;
        case TraceKind::issue: {
          std::unique_lock lock(*k.mu);
          k.issue_step.push_back(k.step);
          k.issue_op.push_back(async_op_name(e, opts_.strategy));
          ++k.issued;
          k.cv->notify_all();
          break;
        }
        case TraceKind::wait: {
          std::unique_lock lock(*k.mu);
          k.cv->wait(lock, [&] { return k.completed > e.a; });
          lock.unlock();
          k.out.exposed_s += sg4::Engine::get_clock() - t0;
          span(r, 0, "wait", t0, sg4::Engine::get_clock());
          break;
        }
        default: break;
      }
    }
    k.at[0] = ev.size();
    k.out.end_s = sg4::Engine::get_clock();
    k.done[0] = true;
    retire(r, 0);
  }

  void lane1(int r) {
    Rank& k = ranks_[static_cast<std::size_t>(r)];
    const std::vector<TraceEvent>& ev = lane(r, 1);
    std::size_t i = 0;
    for (int op = 0; i < ev.size(); ++op) {
      LC_CHECK(ev[i].kind == TraceKind::begin && ev[i].a == op, "replay: rank ", r, " lane 1 event ", i,
               " is not the begin of async operation ", op);
      {
        std::unique_lock lock(*k.mu);
        k.cv->wait(lock, [&] { return k.issued > op; });
      }
      const double start = sg4::Engine::get_clock();
      double prev = ev[i].t1;
      for (++i; i < ev.size() && ev[i].kind != TraceKind::end; ++i) {
        k.at[1] = i;
        const TraceEvent& e = ev[i];
        compute(r, e.t0 - prev, -1, 0);
        prev = e.t1;
        const double t0 = sg4::Engine::get_clock();
        const auto o = static_cast<std::size_t>(op);
        const std::uint64_t sent = k.sent[1];
        if (message(r, 1, e)) message_span(r, e, k.issue_op[o], k.issue_step[o], t0, k.sent[1] - sent);
      }
      LC_CHECK(i < ev.size(), "replay: rank ", r, " lane 1 ends inside async operation ", op);
      compute(r, ev[i].t0 - prev, -1, 0);
      ++i;
      (void)start;
      std::unique_lock lock(*k.mu);
      k.completed = op + 1;
      k.cv->notify_all();
    }
    k.at[1] = ev.size();
    k.done[1] = true;
    retire(r, 1);
  }

  const std::vector<RankTrace>& trace_;
  const ReplayNetwork& net_;
  const ReplayOptions& opts_;
  int n_;
  std::vector<sg4::Host*> hosts_;
  std::unordered_map<std::uint64_t, sg4::Mailbox*> boxes_;
  std::unordered_map<std::uint64_t, Route> routes_;     // by sender · n + receiver
  std::unordered_map<std::uint64_t, double> windows_;   // a connection's window: (sender · n + receiver) · 64 + stream
  std::map<std::tuple<int, int, int>, Ring> rings_;  // by Members (first, stride, p)
  std::vector<int> group_first_;  // a projection's groups: each one's first rank
  int group_size_ = 0;
  std::vector<Rank> ranks_;
  std::vector<TimelineSpan> timeline_;
  std::string error_;
};

// ---- the result across the pipe ----

nlohmann::json to_json(const ByteCounters& c) { return {c.sent, c.recv, c.messages_sent}; }
ByteCounters counters_from(const nlohmann::json& j) { return {j[0], j[1], j[2]}; }

std::string serialise(const ReplayResult& r) {
  nlohmann::json j;
  j["time_s"] = r.time_s;
  j["engine"] = r.engine;
  j["steps"] = r.steps;
  for (const RankReplay& k : r.ranks)
    j["ranks"].push_back({{"end_s", k.end_s}, {"exposed_s", k.exposed_s}, {"compute_s", k.compute_s},
                          {"tiers", {to_json(k.tiers[0]), to_json(k.tiers[1])}}, {"step_begin", k.step_begin}, {"step_exposed", k.step_exposed},
                          {"step_inter_sent", k.step_inter_sent}});
  j["timeline"] = nlohmann::json::array();
  for (const TimelineSpan& s : r.timeline)
    j["timeline"].push_back({s.rank, s.track, s.name, s.t0, s.t1, s.step, s.bytes, s.peer, s.tier, s.op});
  return j.dump();
}

ReplayResult deserialise(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  if (j.contains("error")) throw Error(j["error"].get<std::string>());
  ReplayResult r;
  r.time_s = j["time_s"];
  r.engine = j["engine"];
  r.steps = j["steps"].get<std::vector<std::int64_t>>();
  for (const auto& k : j["ranks"]) {
    RankReplay x;
    x.end_s = k["end_s"];
    x.exposed_s = k["exposed_s"];
    x.compute_s = k["compute_s"];
    x.tiers[0] = counters_from(k["tiers"][0]);
    x.tiers[1] = counters_from(k["tiers"][1]);
    x.step_begin = k["step_begin"].get<std::vector<double>>();
    x.step_exposed = k["step_exposed"].get<std::vector<double>>();
    x.step_inter_sent = k["step_inter_sent"].get<std::vector<std::uint64_t>>();
    r.ranks.push_back(std::move(x));
  }
  for (const auto& s : j["timeline"]) r.timeline.push_back({s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]});
  return r;
}

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// What would make the replay wait forever, found before it starts (SimGrid would report a deadlock,
// but not every context factory can end one): a wait for an operation never issued, lane 1's
// operations out of order or not the ones issued, and messages between two ranks that do not pair
// up (checked when the trace has no native collectives, whose messages are implied).
void validate(const std::vector<RankTrace>& trace) {
  const auto n = trace.size();
  bool natives = false;
  std::vector<std::int64_t> sent(2 * n * n, 0), received(2 * n * n, 0);
  const auto at = [&](int lane, std::size_t s, std::size_t d) { return (static_cast<std::size_t>(lane) * n + s) * n + d; };
  for (std::size_t r = 0; r < n; ++r) {
    std::int32_t issued = 0;
    for (int lane = 0; lane < 2; ++lane) {
      std::int32_t begun = 0;
      bool open = false;
      for (const TraceEvent& e : trace[r].lanes[lane].events) {
        const auto peer_ok = [&](std::int32_t p) {
          LC_CHECK(p >= 0 && static_cast<std::size_t>(p) < n, "replay: rank ", r, " lane ", lane, ": peer ", p,
                   " outside a trace of ", n, " ranks");
          return static_cast<std::size_t>(p);
        };
        switch (e.kind) {
          case TraceKind::issue: ++issued; break;
          case TraceKind::wait:
            LC_CHECK(e.a < issued, "replay: rank ", r, " waits for async operation ", e.a, ", of which only ", issued,
                     " were issued by then");
            break;
          case TraceKind::begin:
            LC_CHECK(!open && e.a == begun, "replay: rank ", r, " lane 1 begins operation ", e.a, " where ", begun,
                     " was expected");
            open = true;
            break;
          case TraceKind::end:
            LC_CHECK(open, "replay: rank ", r, " lane 1 ends an operation it did not begin");
            open = false;
            ++begun;
            break;
          case TraceKind::send: ++sent[at(lane, r, peer_ok(e.a))]; break;
          case TraceKind::recv: ++received[at(lane, peer_ok(e.a), r)]; break;
          case TraceKind::sendrecv:
            ++sent[at(lane, r, peer_ok(e.a))];
            ++received[at(lane, peer_ok(e.b), r)];
            break;
          case TraceKind::native: natives = true; break;
          default: break;
        }
      }
      if (lane == 1)
        LC_CHECK(!open && begun == issued, "replay: rank ", r, " issued ", issued, " async operations, its lane 1 ran ",
                 begun, open ? " (the last one unfinished)" : "");
    }
  }
  if (natives) return;
  for (int lane = 0; lane < 2; ++lane)
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t d = 0; d < n; ++d)
        LC_CHECK(sent[at(lane, s, d)] == received[at(lane, s, d)], "replay: rank ", s, " sent ", sent[at(lane, s, d)],
                 " messages to rank ", d, " on lane ", lane, ", which received ", received[at(lane, s, d)]);
}

}  // namespace

ReplayResult replay(const std::vector<RankTrace>& trace, const ReplayNetwork& net, const ReplayOptions& opts) {
  LC_CHECK(!trace.empty(), "replay: an empty trace");
  validate(trace);
  for (int src : opts.sources)
    LC_CHECK(src >= 0 && static_cast<std::size_t>(src) < trace.size(), "replay: source ", src, " outside a trace of ",
             trace.size(), " ranks");
  int fds[2];
  LC_CHECK(::pipe(fds) == 0, "replay: pipe: ", std::strerror(errno));
  const pid_t pid = ::fork();
  LC_CHECK(pid >= 0, "replay: fork: ", std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = serialise(Engine(trace, net, opts).run());
    } catch (const std::exception& e) {
      text = nlohmann::json{{"error", e.what()}}.dump();
    }
    write_all(fds[1], text);
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  LC_CHECK(!text.empty(), "replay: the simulator process ended without a result (status ", status, ")");
  return deserialise(text);
}

}  // namespace laconic
