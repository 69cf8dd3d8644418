#include "collectives/communicator.h"

#include <cstdio>

#include "collectives/trace.h"
#include "core/check.h"

namespace laconic {

Communicator::Communicator() = default;

Communicator::Communicator(ShowInner, Communicator& inner)
    : Transport(ShowInner{}, inner), collectives_(inner.collectives_.shared_policy()) {}

Communicator::~Communicator() {
  if (async_) {
    // A backend forgot stop_async(): joining now may call into a destroyed backend.
    std::fprintf(stderr, "laconic: Communicator destroyed with a running communication thread\n");
    stop_async();
  }
}

void Communicator::stop_async() { async_.reset(); }

AsyncQueue& Communicator::async() {
  if (!async_) {
    async_ = std::make_unique<AsyncQueue>([this] { on_async_thread_start(); });
    async_->set_tracer(tracer());
  }
  return *async_;
}

void Communicator::set_tracer(Tracer* t) {
  Transport::set_tracer(t);
  if (async_) async_->set_tracer(t);
}

void Communicator::run_async(Work& work, std::function<void()> op, OpLabel label) {
  async().run(work, std::move(op), label);
}

void Communicator::reserve_async(std::size_t ops) { async().reserve(ops); }

void Communicator::drain() {
  if (!async_) return;
  Tracer* t = tracer();
  // The trace records that this thread waited for everything issued (when it has not already).
  if (!t || t->lane() != 0 || t->last_issued() <= t->waited()) return async_->drain();
  const double t0 = t->now();
  const std::int32_t last = t->last_issued();
  async_->drain();
  t->wait(last, t0);
}

void Communicator::wait_all() { drain(); }

// ---- collectives: argument checks, then the (possibly native) implementation ----

namespace {
void check_call(const Communicator& c, const CollectiveCall& call) {
  const auto n = static_cast<std::size_t>(c.size());
  const CBuf& s = call.send;
  const Buf& d = call.data;
  switch (call.kind) {
    case Collective::reduce:
    case Collective::broadcast:
      LC_CHECK(call.root >= 0 && call.root < c.size(), "root ", call.root, " outside a world of ", c.size(),
               " ranks");
      return;
    case Collective::reduce_scatter:
      LC_CHECK(s.dtype == d.dtype && s.count == d.count * n,
               "reduce_scatter: send must hold size() blocks of recv.count elements; got ", s.count, " and ",
               d.count, " for ", n, " ranks");
      return;
    case Collective::all_gather: {
      if (call.counts.empty()) {
        LC_CHECK(s.dtype == d.dtype && d.count == s.count * n,
                 "all_gather: recv must hold size() blocks of send.count elements; got ", s.count, " and ", d.count,
                 " for ", n, " ranks");
        return;
      }
      LC_CHECK(call.counts.size() == n, "all_gather_v: ", call.counts.size(), " counts for ", n, " ranks");
      std::size_t total = 0;
      for (auto k : call.counts) total += k;
      const std::size_t mine = call.counts[static_cast<std::size_t>(c.rank())];
      LC_CHECK(s.dtype == d.dtype && s.count == mine && d.count == total, "all_gather_v: rank ", c.rank(),
               " sends ", s.count, " elements (counts say ", mine, "), recv holds ", d.count, " (counts sum to ",
               total, ")");
      return;
    }
    case Collective::all_to_all:
      LC_CHECK(s.dtype == d.dtype && s.count == d.count && s.count % n == 0,
               "all_to_all needs equal send/recv buffers of size() blocks; got ", s.count, " and ", d.count,
               " elements for ", n, " ranks");
      return;
    case Collective::all_reduce:
    case Collective::barrier:
      return;
  }
}
}  // namespace

namespace {
CollectiveCall call_of(Collective kind, Buf data, CBuf send = {}, ReduceOp op = ReduceOp::sum, int root = 0,
                       std::span<const std::size_t> counts = {}) {
  CollectiveCall c;
  c.kind = kind;
  c.data = data;
  c.send = send;
  c.op = op;
  c.root = root;
  c.counts = counts;
  return c;
}
}  // namespace

void Communicator::all_reduce(Buf data, ReduceOp op) { collective(call_of(Collective::all_reduce, data, {}, op)); }

void Communicator::reduce(Buf data, ReduceOp op, int root) {
  collective(call_of(Collective::reduce, data, {}, op, root));
}

void Communicator::reduce_scatter(CBuf send, Buf recv, ReduceOp op) {
  collective(call_of(Collective::reduce_scatter, recv, send, op));
}

void Communicator::all_gather(CBuf send, Buf recv) { collective(call_of(Collective::all_gather, recv, send)); }

void Communicator::all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  collective(call_of(Collective::all_gather, recv, send, ReduceOp::sum, 0, counts));
}

void Communicator::all_to_all(CBuf send, Buf recv) { collective(call_of(Collective::all_to_all, recv, send)); }

void Communicator::broadcast(Buf data, int root) {
  collective(call_of(Collective::broadcast, data, {}, ReduceOp::sum, root));
}

void Communicator::barrier() { collective(call_of(Collective::barrier, {})); }

void Communicator::collective(const CollectiveCall& call) {
  check_call(*this, call);
  drain();
  do_collective(call);
}

void Communicator::do_collective(const CollectiveCall& call) {
  // A native collective is traced as one event (the replay expands it into its algorithm's
  // messages). Ours are traced message by message, by the transport, between a collective event that says
  // what the call was (for a projection to another world size) and its end.
  Tracer* t = message_tracer();
  const double t0 = t ? t->now() : 0;
  TraceEvent e;
  e.sub = static_cast<std::uint8_t>(call.kind);
  e.bytes = call.kind == Collective::reduce_scatter || call.kind == Collective::all_to_all ? call.send.bytes()
                                                                                          : call.data.bytes();
  e.a = call.root;
  e.b = size();
  e.plane = trace_plane();
  if (!native(call)) {
    Tracer* mark = tracer();
    if (!mark) return run_algorithm(call);
    e.kind = TraceKind::collective;
    e.t0 = e.t1 = mark->now();
    e.bytes2 = collective_ranks().pack();
    if (call.kind == Collective::all_reduce) e.tier = static_cast<std::uint8_t>(collectives_.all_reduce_algorithm(e.bytes));
    mark->record(e);
    run_algorithm(call);
    TraceEvent end;
    end.kind = TraceKind::collective_end;
    end.t0 = end.t1 = mark->now();
    end.plane = e.plane;
    mark->record(end);
    return;
  }
  if (!t) return;
  e.t0 = t0;
  e.t1 = t->now();
  e.kind = TraceKind::native;
  t->record(e);
}

CollectiveRanks Communicator::collective_ranks() const {
  const int n = size();
  CollectiveRanks c{world_rank(0), n > 1 ? world_rank(1) - world_rank(0) : 1};
  for (int r = 2; r < n && c.stride != 0; ++r)
    if (world_rank(r) != c.first + r * c.stride) c.stride = 0;
  return c;
}

// ---- async forms: the same calls, run on the communication thread ----

std::shared_ptr<Work> Communicator::all_reduce_async(Buf data, ReduceOp op) {
  return async().submit([this, data, op] { all_reduce(data, op); });
}

std::shared_ptr<Work> Communicator::reduce_scatter_async(CBuf send, Buf recv, ReduceOp op) {
  return async().submit([this, send, recv, op] { reduce_scatter(send, recv, op); });
}

std::shared_ptr<Work> Communicator::all_gather_async(CBuf send, Buf recv) {
  return async().submit([this, send, recv] { all_gather(send, recv); });
}

std::shared_ptr<Work> Communicator::broadcast_async(Buf data, int root) {
  return async().submit([this, data, root] { broadcast(data, root); });
}

}  // namespace laconic
