// The embedded backend: N ranks as threads of one process, exchanging bytes through shared memory.
// It is the default for single-machine runs and the distributed test harness.
//
// ThreadsWorld holds one FIFO mailbox per ordered pair (src, dst). send() copies the bytes into a
// buffer taken from the mailbox's free list and queues it (never blocks, so send-then-recv cannot
// deadlock); recv() waits on the mailbox's condition variable, copies the front message out and
// returns the buffer to the free list. Buffers keep their capacity, so steady-state traffic
// allocates nothing and nobody spins.
//
// "Steady state" must come early and deterministically (no allocation in the step loop), yet how
// many messages a mailbox holds at once depends on scheduling and can reach a new high late in a
// run. So a mailbox grows its pool world_size buffers at a time, which is all a ring collective
// can ever need (a rank's sends lead its successor's receives by at most world_size: each
// sendrecv waits on its predecessor, around the ring), and all of a mailbox's buffers share one
// capacity, grown for all of them at once and with slack (ring chunks differ by an element).
//
// Failure: when a rank throws, the world is marked failed and every rank blocked in recv wakes up
// and throws Error("rank R failed: <what>"); a recv from a rank that has already returned, or one
// that waits longer than timeout_s, throws too. run_threads rethrows the first failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
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
};

class ThreadsWorld {
 public:
  explicit ThreadsWorld(int size, ThreadsOptions opts = {});

  int size() const { return size_; }
  void send(int src, int dst, const void* data, std::size_t bytes);
  void recv(int dst, int src, void* data, std::size_t bytes);

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
    void reserve(std::size_t bytes);  // drops the contents when it grows
    void assign(const void* src, std::size_t bytes);
  };
  // FIFO from one sender to one receiver. Aligned so neighbouring mailboxes share no cache line.
  struct alignas(64) Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Buffer> queue;  // queue[head..] are pending, oldest first
    std::size_t head = 0;
    std::vector<Buffer> free;   // drained buffers, reused by the next sends
    std::size_t pool = 0;       // buffers owned: free, queued or being filled or drained
    std::size_t capacity = 0;   // every owned buffer is grown to this before it is filled
  };

  Mailbox& box(int src, int dst) { return boxes_[static_cast<std::size_t>(src * size_ + dst)]; }
  void wake_all();
  [[noreturn]] void throw_failure() const;

  int size_;
  ThreadsOptions opts_;
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

}  // namespace laconic
