// The embedded backend: N ranks as threads of one process, exchanging bytes through shared memory.
// It is the default for single-machine runs and the distributed test harness.
//
// ThreadsWorld holds one FIFO mailbox per ordered pair (src, dst). A message travels one of three
// ways, and the receiver cannot tell which:
//  - inline (up to kInline = 52 bytes: latency-bound traffic, barriers, small all-reduces): a
//    lock-free single-producer single-consumer ring of cache-line slots. The payload shares the
//    line with its sequence number, so a handoff is about one cache-line transfer; a mutex
//    handoff costs several (the lock, the queue, the buffer, the count), each ~0.5 us on a VM.
//  - lent (rendezvous; messages over kEagerMax = 8 KiB): the sender queues a pointer to its own
//    buffer and waits; the receiver copies straight from it into its destination and hands the
//    loan back. One copy, done by the receiver, so in a ring every rank copies in parallel.
//    Waiting for the loan's return is what makes this single-copy, but send() must still never
//    block indefinitely (send-then-recv patterns would deadlock): a loan not taken within about
//    the time an extra copy would cost (ski rental) is taken back and converted to eager.
//  - eager (small messages, and expired loans): the sender copies into a buffer from the
//    mailbox's pool, queues it under the mailbox's mutex and returns at once; the receiver copies
//    out. Two copies, no waiting.
// FIFO across the ways: the sender uses the inline ring only while nothing it queued under the
// mutex is pending, and the receiver takes the ring's next message before the queue's front.
// Waiters (a recv for a message, a sender for its loan) spin for ThreadsOptions::spin_s (1 us of
// pause, then sched_yield) before they sleep on the mailbox's condition variable: a handoff
// between running threads then costs a cache-line transfer, not a futex wake-up (tens of us to
// ms on a loaded machine), yet a peer waiting for this very core gets it within a microsecond and
// nobody burns a core for long. Senders notify only when someone sleeps.
//
// "Steady state" must come early and deterministically (no allocation in the step loop), yet how
// many messages a mailbox holds at once depends on scheduling and can reach a new high late in a
// run. So a mailbox grows its pool world_size buffers at a time, which is all a ring collective
// can ever need (a rank's sends lead its successor's receives by at most world_size: each
// sendrecv waits on its predecessor, around the ring), and all of a mailbox's buffers share one
// capacity, grown for all of them at once and with slack (ring chunks differ by an element). A
// loan reserves that capacity too when it is made, so converting it late allocates nothing.
//
// Failure: when a rank throws, the world is marked failed and every rank blocked in recv wakes up
// and throws Error("rank R failed: <what>") (a sender waiting on a loan drops it and throws too); a recv from a rank that has already returned, or one
// that waits longer than timeout_s, throws too. run_threads rethrows the first failure.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace laconic {

struct ThreadsOptions {
  double timeout_s = 300;  // a recv waiting longer than this throws, naming rank, peer and bytes
  double spin_s = 20e-6;   // a waiter polls (1 us, then yielding) this long before it sleeps
  // Pin rank r's thread to the r-th CPU this process may use, when there are at least as many
  // CPUs as ranks (OpenMPI's default binding for mpirun -np N <= cores). On a loaded machine it
  // keeps two ranks from sharing a core while the other idles, which decides small-message
  // latency (a spinning waiter then never delays its peer). Off by default: the calling thread
  // (rank 0) is pinned only for the duration of run_threads, but each rank's communication
  // thread inherits its rank's CPU, so compute and async communication share one core.
  bool bind_cores = false;
};

class ThreadsWorld {
 public:
  explicit ThreadsWorld(int size, ThreadsOptions opts = {});

  int size() const { return size_; }
  void send(int src, int dst, const void* data, std::size_t bytes);
  void recv(int dst, int src, void* data, std::size_t bytes);
  // send to `to` and receive from `from` as one step: a large outgoing message is lent while
  // this rank receives, so both copies of a ring step run at once, one on each rank.
  void sendrecv(int rank, const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                std::size_t recv_bytes, int from);

  // Records `error` as rank's failure (only the first failure is kept) and wakes every waiter.
  void fail(int rank, std::exception_ptr error);
  // Marks `rank` as returned, so a recv that could only be satisfied by it fails instead of hanging.
  void finish(int rank);
  // Throws the first failure as "rank R failed: <what>" (an InputError stays an InputError).
  void rethrow_if_failed() const;

 private:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
    std::size_t capacity = 0;
    const void* lent = nullptr;  // a loan: the sender's own bytes (data stays empty)
    void reserve(std::size_t bytes);  // drops the contents when it grows
    void assign(const void* src, std::size_t bytes);
  };
  // The state of a mailbox's one outstanding loan (its sender blocks until it settles).
  enum class Loan : std::uint8_t { none, lent, taken, returned };
  // One inline message: its sequence number (1, 2, ... per mailbox; valid when it equals the
  // number the receiver expects next), size and payload, in one cache line.
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> seq{0};
    std::uint32_t size = 0;
    std::byte payload[52];
  };
  static constexpr std::size_t kInline = sizeof(Slot::payload);
  static constexpr std::uint64_t kSlots = 16;
  // FIFO from one sender to one receiver. Aligned so neighbouring mailboxes share no cache line;
  // sender-written and receiver-written fields sit on separate lines.
  struct alignas(64) Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Buffer> queue;  // queue[head..] are pending, oldest first
    std::size_t head = 0;
    std::vector<Buffer> free;   // drained buffers, reused by the next sends
    std::size_t pool = 0;       // buffers owned: free, queued or being filled or drained
    std::size_t capacity = 0;   // every owned buffer is grown to this before it is filled
    // Threads waiting on cv: only then does a handoff notify. Atomic because the inline path
    // reads it without the lock (after a fence; see send_inline).
    std::atomic<int> sleepers{0};
    // Written under mu, read without it by spinning waiters and by the inline sender.
    std::atomic<std::size_t> pending{0};  // queue.size() - head
    std::atomic<Loan> loan{Loan::none};
    // The inline ring. Sender's line: messages sent, and its last look at `consumed`.
    alignas(64) std::uint64_t sent = 0;
    std::uint64_t consumed_seen = 0;
    // Receiver's line: messages taken (the sender reads it only when the ring looks full).
    alignas(64) std::atomic<std::uint64_t> consumed{0};
    Slot slots[kSlots];

    bool inline_ready() const {
      const std::uint64_t next = consumed.load(std::memory_order_relaxed) + 1;
      return slots[next % kSlots].seq.load(std::memory_order_acquire) == next;
    }
  };

  Mailbox& box(int src, int dst) { return boxes_[static_cast<std::size_t>(src * size_ + dst)]; }
  bool send_inline(Mailbox& m, const void* data, std::size_t bytes);  // false: ring busy or full
  void send_eager(Mailbox& m, const void* data, std::size_t bytes);
  void send_small(Mailbox& m, const void* data, std::size_t bytes);   // inline, else eager
  void lend(Mailbox& m, const void* data, std::size_t bytes);
  // Waits until the loan of `bytes` to `dst` is returned, or takes it back (eager copy, or
  // dropped if the world failed). Returns false when dropped. Never throws.
  bool settle(Mailbox& m, int dst, std::size_t bytes) noexcept;
  void reserve_pool(Mailbox& m, std::size_t bytes);  // mu held: a free buffer of >= bytes exists
  Buffer take_buffer(Mailbox& m, std::size_t bytes);  // mu held
  void push(Mailbox& m, Buffer b);                    // mu held
  Buffer pop(Mailbox& m);                             // mu held, pending > 0
  template <class Ready>
  bool spin(Ready ready) const;  // polls ready() for up to spin_s; returns its last value
  template <class Ready>
  bool sleep_until(Mailbox& m, std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline,
                   Ready ready);  // mu held; false on timeout
  void wake(Mailbox& m);
  void wake_all();
  [[noreturn]] void throw_failure() const;

  int size_;
  ThreadsOptions opts_;
  std::chrono::steady_clock::duration spin_;
  bool oversubscribed_;  // more ranks than hardware threads: spinning also yields
  std::vector<Mailbox> boxes_;
  std::unique_ptr<std::atomic<bool>[]> finished_;
  std::atomic<bool> failed_{false};
  mutable std::mutex fail_mu_;
  int failed_rank_ = -1;
  std::string failed_what_;
  bool failed_input_ = false;  // the first failure was a laconic::InputError
};

class ThreadsCommunicator final : public Communicator {
 public:
  ThreadsCommunicator(ThreadsWorld& world, int rank) : world_(world), rank_(rank) {}
  ~ThreadsCommunicator() override { stop_async(); }

  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  std::string backend() const override { return "threads"; }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

 private:
  ThreadsWorld& world_;
  int rank_;
};

// Runs fn on world_size ranks (rank 0 on the calling thread), joins them all, and rethrows the
// first failure as "rank R failed: <what>".
void run_threads(int world_size, const std::function<void(Communicator&)>& fn, ThreadsOptions opts = {});

// The same with a second communicator per rank over a world of its own (a control plane: its
// messages never mix with the first's, and its bytes are counted apart). A failure in either
// world fails both, so no rank waits on a peer that has stopped.
void run_threads(int world_size, const std::function<void(Communicator& comm, Communicator& control)>& fn,
                 ThreadsOptions opts = {});

}  // namespace laconic
