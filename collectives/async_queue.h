// One rank's communication thread: operations queued in issue order run on it one at a time, and
// each finishes a Work that the issuer waits on. A Communicator owns one (started on first use)
// for its *_async collectives and run_async(). Of communication the queue knows one thing: the
// bytes an operation counts are held until its issuer learns that it finished (HeldBytes,
// transport.h), by its Work's wait() or by a drain().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/trace.h"
#include "collectives/transport.h"

namespace laconic {

// Operations that finished, in issue order, with the bytes each counted, until their issuer
// learns it: settle_through(seq) adds the bytes of every one up to `seq` to the counters.
class FinishedOps {
 public:
  void push(std::uint64_t seq, HeldBytes&& bytes);
  void settle_through(std::uint64_t seq);
  void reserve(std::size_t ops);

 private:
  struct Op {
    std::uint64_t seq = 0;
    HeldBytes bytes;
  };
  std::mutex mu_;
  std::vector<Op> ops_;  // ops_[head_..] not settled; reused like AsyncQueue's
  std::size_t head_ = 0;
};

// Completion handle of an async operation.
class Work {
 public:
  // Blocks until the operation finished; rethrows its exception if it failed.
  void wait();
  bool done() const;
  // Makes a finished Work reusable (AsyncQueue::run calls it).
  void reset();

  // Used by the communication thread.
  void finish(std::exception_ptr error);
  // Traced operations: wait() records a wait for operation `op` (collectives/trace.h).
  void trace(Tracer* tracer, std::int32_t op) {
    tracer_ = tracer;
    op_ = op;
  }
  // The queue's operation `seq`, whose bytes wait() settles (with those of all before it).
  void issue(std::weak_ptr<FinishedOps> finished, std::uint64_t seq);

 private:
  Tracer* tracer_ = nullptr;
  std::weak_ptr<FinishedOps> finished_;  // weak: a Work may outlive its queue
  std::uint64_t seq_ = 0;
  std::int32_t op_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class AsyncQueue {
 public:
  // Starts the thread; `on_thread_start` runs first on it (a device backend makes its GPU
  // current there). Throws if no thread can be started.
  explicit AsyncQueue(std::function<void()> on_thread_start = {});
  // Runs what is queued, then joins the thread.
  ~AsyncQueue();
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;

  // Queues `op`; `work` is reset here and finished when op returns or throws, and must outlive
  // that. Allocates nothing once reserve() made room, if op's captures fit std::function's inline
  // storage (two pointers).
  void run(Work& work, std::function<void()> op, OpLabel label = {});
  // The same with a Work of its own, kept alive until finished.
  std::shared_ptr<Work> submit(std::function<void()> op);
  // Room for `ops` queued operations at once.
  void reserve(std::size_t ops);
  // Waits until every queued operation has run, and settles their bytes; returns at once on the
  // queue's own thread.
  void drain();
  // Records each operation's issue, begin, end and waits in `tracer` (null: none).
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }

 private:
  void enqueue(std::function<void()> op, Work& work, std::shared_ptr<Work> owned, OpLabel label = {});
  void loop(const std::function<void()>& on_thread_start);

  struct Item {
    std::function<void()> op;
    Work* work = nullptr;
    std::shared_ptr<Work> owned;  // submit()'s Work, kept alive until finished
    std::uint64_t seq = 0;        // 1, 2, ... in issue order
  };
  std::mutex mu_;
  std::condition_variable wake_;  // work arrived, or stop
  std::condition_variable idle_;  // the queue ran empty
  // Queued operations: ops_[head_..] wait to run. Reused (cleared, capacity kept) whenever the
  // queue runs empty, so a steady stream of run() calls allocates nothing.
  std::vector<Item> ops_;
  std::size_t head_ = 0;
  std::uint64_t issued_ = 0;
  std::shared_ptr<FinishedOps> finished_ = std::make_shared<FinishedOps>();
  bool running_ = false;  // an op is executing
  bool stop_ = false;
  Tracer* tracer_ = nullptr;
  std::thread thread_;

  bool empty() const { return head_ == ops_.size(); }
};

}  // namespace laconic
