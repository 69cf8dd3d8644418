#include "collectives/transport.h"

#include "collectives/trace.h"
#include "core/check.h"

namespace laconic {

Transport::Transport() : ledger_(std::make_shared<Ledger>()) {}

Transport::Transport(ShowInner, Transport& inner) : ledger_(inner.ledger_), counts_(false) {}

Transport::~Transport() = default;

namespace {
thread_local HeldBytes* t_held = nullptr;  // HoldBytes: this thread's running operation's
}  // namespace

bool HeldBytes::hold(const std::shared_ptr<void>& ledger, TierCounters& to, std::uint64_t sent, std::uint64_t recv,
                     std::uint64_t messages) {
  std::size_t i = 0;
  while (i < used_ && slots_[i].to.get() != &to) ++i;
  if (i == used_) {
    if (used_ == kSlots) return false;
    slots_[used_++] = {std::shared_ptr<TierCounters>(ledger, &to)};  // aliasing: no allocation
  }
  slots_[i].sent += sent;
  slots_[i].recv += recv;
  slots_[i].messages += messages;
  return true;
}

void HeldBytes::settle() {
  for (std::size_t i = 0; i < used_; ++i) {
    Slot& s = slots_[i];
    s.to->sent.fetch_add(s.sent, std::memory_order_relaxed);
    s.to->recv.fetch_add(s.recv, std::memory_order_relaxed);
    s.to->messages.fetch_add(s.messages, std::memory_order_relaxed);
    s = {};
  }
  used_ = 0;
}

HoldBytes::HoldBytes(HeldBytes& held) : previous_(t_held) { t_held = &held; }

HoldBytes::~HoldBytes() { t_held = previous_; }

ByteCounters Transport::tier_bytes(int tier) const {
  const TierCounters& c = ledger_->tiers[static_cast<std::size_t>(tier)];
  return {c.sent.load(std::memory_order_relaxed), c.recv.load(std::memory_order_relaxed),
          c.messages.load(std::memory_order_relaxed)};
}

int Transport::tier_to(int peer) const {
  const std::vector<int>& g = ledger_->groups;
  if (g.empty()) return 0;
  return g[static_cast<std::size_t>(rank())] == g[static_cast<std::size_t>(peer)] ? 0 : 1;
}

void Transport::add(int tier, std::uint64_t sent, std::uint64_t recv, std::uint64_t messages) {
  TierCounters& c = ledger_->tiers[tier];
  if (t_held && t_held->hold(ledger_, c, sent, recv, messages)) return;
  if (sent) c.sent.fetch_add(sent, std::memory_order_relaxed);
  if (recv) c.recv.fetch_add(recv, std::memory_order_relaxed);
  if (messages) c.messages.fetch_add(messages, std::memory_order_relaxed);
}

void Transport::count_sent(int peer, std::uint64_t bytes, std::uint64_t messages) {
  if (counts_) add(tier_to(peer), bytes, 0, messages);
}

void Transport::count_recv(int peer, std::uint64_t bytes) {
  if (counts_) add(tier_to(peer), 0, bytes, 0);
}

void Transport::count(std::uint64_t sent, std::uint64_t recv, std::uint64_t messages) {
  const int p = size(), r = rank();
  count_sent((r + 1) % p, sent, messages);
  count_recv((r + p - 1) % p, recv);
}

namespace {
void check_peer(const Transport& t, int peer) {
  LC_CHECK(peer >= 0 && peer < t.size(), "rank ", t.rank(), ": peer ", peer, " outside a world of ", t.size(),
           " ranks");
}
}  // namespace

void Transport::send(const void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  before_blocking();
  Tracer* t = message_tracer();
  const double t0 = t ? t->now() : 0;
  do_send(data, bytes, peer);
  count_sent(peer, bytes, 1);
  if (t) t->message(TraceKind::send, t0, peer, bytes, tier_to(peer), 0, 0, 0, trace_plane_);
}

void Transport::recv(void* data, std::size_t bytes, int peer) {
  check_peer(*this, peer);
  before_blocking();
  Tracer* t = message_tracer();
  const double t0 = t ? t->now() : 0;
  do_recv(data, bytes, peer);
  count_recv(peer, bytes);
  if (t) t->message(TraceKind::recv, t0, peer, bytes, tier_to(peer), 0, 0, 0, trace_plane_);
}

void Transport::sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                         std::size_t recv_bytes, int from) {
  check_peer(*this, to);
  check_peer(*this, from);
  before_blocking();
  Tracer* t = message_tracer();
  const double t0 = t ? t->now() : 0;
  do_sendrecv(send_data, send_bytes, to, recv_data, recv_bytes, from);
  count_sent(to, send_bytes, 1);
  count_recv(from, recv_bytes);
  if (t) t->message(TraceKind::sendrecv, t0, to, send_bytes, tier_to(to), from, recv_bytes, tier_to(from), trace_plane_);
}

ByteCounters total_bytes(std::initializer_list<const Transport*> transports) {
  ByteCounters sum;
  for (auto t = transports.begin(); t != transports.end(); ++t) {
    if (*t == nullptr) continue;
    bool seen = false;
    for (auto u = transports.begin(); u != t; ++u) seen = seen || (*u && (*u)->same_ledger(**t));
    if (!seen) sum = sum + (*t)->bytes();
  }
  return sum;
}

}  // namespace laconic
