// One rank's communication thread: operations queued in issue order run on it one at a time, and
// each finishes a Work that the issuer waits on. A Communicator owns one (started on first use)
// for its *_async collectives and run_async(); the queue knows nothing about communication.
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

namespace laconic {

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

 private:
  Tracer* tracer_ = nullptr;
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
  // Waits until every queued operation has run; returns at once on the queue's own thread.
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
  };
  std::mutex mu_;
  std::condition_variable wake_;  // work arrived, or stop
  std::condition_variable idle_;  // the queue ran empty
  // Queued operations: ops_[head_..] wait to run. Reused (cleared, capacity kept) whenever the
  // queue runs empty, so a steady stream of run() calls allocates nothing.
  std::vector<Item> ops_;
  std::size_t head_ = 0;
  bool running_ = false;  // an op is executing
  bool stop_ = false;
  Tracer* tracer_ = nullptr;
  std::thread thread_;

  bool empty() const { return head_ == ops_.size(); }
};

}  // namespace laconic
