// The bottom of the collective layer: one rank's point-to-point link to the `size()` ranks of a
// group, and the one place where bytes and messages are counted, per link tier. Every byte a rank
// puts on the wire or takes off it passes send(), recv(), sendrecv() or count() here: the
// algorithms of collectives/algorithms/ run over a Transport, and native collectives (MPI, NCCL)
// that bypass point-to-point report their traffic through count().
//
// Backends implement do_send/do_recv/do_sendrecv. A Communicator (communicator.h) is a Transport
// with collectives and an async queue on top.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace laconic {

class Tracer;

struct ByteCounters {
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  std::uint64_t messages_sent = 0;
  ByteCounters operator+(const ByteCounters& o) const {
    return {sent + o.sent, recv + o.recv, messages_sent + o.messages_sent};
  }
  ByteCounters operator-(const ByteCounters& o) const {
    return {sent - o.sent, recv - o.recv, messages_sent - o.messages_sent};
  }
};

// One link tier's counters of one ledger (a Transport's, below).
struct TierCounters {
  std::atomic<std::uint64_t> sent{0}, recv{0}, messages{0};
};

// The bytes one queued operation counts on a communication thread, held apart from the counters
// until the issuing thread learns that the operation finished (async_queue.h: its Work's wait(),
// or a drain), then added by settle(). A rank's counters so change only at points of its own
// program order: a metrics record taken while an eager outer sync is in flight reads the same
// totals in every run, not whatever part of the sync had gone out by then.
class HeldBytes {
 public:
  void settle();  // adds what is held to its counters, and holds nothing
  // Holds bytes for `to` (kept alive by `ledger`); false when this operation already touches
  // kSlots other counters (the caller then counts them at once).
  bool hold(const std::shared_ptr<void>& ledger, TierCounters& to, std::uint64_t sent, std::uint64_t recv,
            std::uint64_t messages);

 private:
  static constexpr std::size_t kSlots = 8;  // tiers one operation counts on: two per transport
  struct Slot {
    std::shared_ptr<TierCounters> to;
    std::uint64_t sent = 0, recv = 0, messages = 0;
  };
  std::array<Slot, kSlots> slots_;
  std::size_t used_ = 0;
};

// While alive, what this thread counts goes to `held` (a communication thread, per operation).
class HoldBytes {
 public:
  explicit HoldBytes(HeldBytes& held);
  ~HoldBytes();
  HoldBytes(const HoldBytes&) = delete;
  HoldBytes& operator=(const HoldBytes&) = delete;

 private:
  HeldBytes* previous_;
};

class Transport {
 public:
  virtual ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // Where every buffer handed to this transport must live: host memory for threads and MPI,
  // device memory for NCCL and for the staging wrapper that carries device buffers over a host
  // backend. In a run with device = "cuda" every communicator the strategies see says cuda.
  virtual Device memory() const { return Device::cpu; }
  // The world rank of this transport's rank r (a subset of the world's ranks maps them; a trace
  // records each collective's ranks in the world with it).
  virtual int world_rank(int r) const { return r; }

  // Blocking send of `bytes` bytes to `peer`; messages between a pair are delivered in order.
  void send(const void* data, std::size_t bytes, int peer);
  // Blocking receive of exactly `bytes` bytes from `peer` (a size mismatch is an error).
  void recv(void* data, std::size_t bytes, int peer);
  // Sends to `to` and receives from `from` without deadlock (ring steps use this).
  void sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                std::size_t recv_bytes, int from);

  // Topology: group_of[r] = the group (node, datacenter) of rank r; empty = one group. It decides
  // the link tier of each message, the hierarchical algorithm's levels and the simulated
  // network's links. Must be the same on every rank.
  void set_groups(std::vector<int> group_of) { ledger_->groups = std::move(group_of); }
  const std::vector<int>& groups() const { return ledger_->groups; }

  // Every byte this rank put on the wire or took off it: all of them, and per link tier (0:
  // within this rank's group of groups(), 1: between groups; all tier 0 without groups).
  ByteCounters bytes() const { return tier_bytes(0) + tier_bytes(1); }
  ByteCounters tier_bytes(int tier) const;
  std::array<ByteCounters, 2> tiers() const { return {tier_bytes(0), tier_bytes(1)}; }
  // Records every message of this transport in `tracer` (collectives/trace.h; null: none). A
  // wrapper showing its inner's ledger records no messages: its inner does.
  virtual void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // Its messages are the control plane's (TraceEvent::plane 1): traced, not training traffic.
  void trace_as_control() { trace_plane_ = 1; }
  std::uint8_t trace_plane() const { return trace_plane_; }
  Tracer* tracer() const { return tracer_; }

  // Whether `other` shows this transport's ledger (a wrapper built with ShowInner, or itself).
  bool same_ledger(const Transport& other) const { return ledger_ == other.ledger_; }

 protected:
  Transport();
  // For a wrapper whose bytes all move through `inner` (device staging): it shows inner's ledger
  // (counters and groups) and counts nothing itself, so every byte is counted once, where it moves.
  struct ShowInner {};
  Transport(ShowInner, Transport& inner);

  virtual void do_send(const void* data, std::size_t bytes, int peer) = 0;
  virtual void do_recv(void* data, std::size_t bytes, int peer) = 0;
  virtual void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                           std::size_t recv_bytes, int from) = 0;

  // The tracer of this transport's messages: none for a wrapper showing its inner's ledger, or
  // one whose messages its parent records (forwards_messages()).
  Tracer* message_tracer() const { return counts_ && !forwards_ ? tracer_ : nullptr; }
  // For a view that sends through another transport's send()/recv() (a subset of its ranks):
  // that transport records each message, with world ranks, so this one's tracer traces only its
  // async queue (set_tracer).
  void forwards_messages() { forwards_ = true; }

  // Runs before every blocking call from a caller (a communicator waits for its queue there).
  virtual void before_blocking() {}

  // Native collectives that bypass send()/recv() add their traffic here, attributed like a ring:
  // sent to rank + 1, received from rank - 1 (for the tiers).
  void count(std::uint64_t sent, std::uint64_t recv, std::uint64_t messages);
  void count(const ByteCounters& b) { count(b.sent, b.recv, b.messages_sent); }

 private:
  struct Ledger {
    TierCounters tiers[2];
    std::vector<int> groups;
  };
  int tier_to(int peer) const;  // the link tier between this rank and `peer`
  void count_sent(int peer, std::uint64_t bytes, std::uint64_t messages);
  void count_recv(int peer, std::uint64_t bytes);
  void add(int tier, std::uint64_t sent, std::uint64_t recv, std::uint64_t messages);  // or held (HoldBytes)

  std::shared_ptr<Ledger> ledger_;
  bool counts_ = true;  // false for a wrapper showing its inner's ledger
  bool forwards_ = false;
  std::uint8_t trace_plane_ = 0;
  Tracer* tracer_ = nullptr;
};

// The traffic of several transports of one rank, each ledger counted once (a wrapper showing its
// inner's ledger adds nothing): e.g. a run's host communicator and its NCCL communicator.
ByteCounters total_bytes(std::initializer_list<const Transport*> transports);

}  // namespace laconic
