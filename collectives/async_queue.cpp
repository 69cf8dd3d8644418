#include "collectives/async_queue.h"

#include <limits>
#include <utility>

#include "collectives/trace.h"

namespace laconic {

namespace {
constexpr std::uint64_t kAll = std::numeric_limits<std::uint64_t>::max();
}  // namespace

// ---- FinishedOps ----

void FinishedOps::push(std::uint64_t seq, HeldBytes&& bytes) {
  std::lock_guard lock(mu_);
  if (ops_.size() == ops_.capacity() && head_ > 0) {  // as AsyncQueue::enqueue: reuse, do not grow
    ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  ops_.push_back({seq, std::move(bytes)});
}

void FinishedOps::settle_through(std::uint64_t seq) {
  std::lock_guard lock(mu_);
  while (head_ < ops_.size() && ops_[head_].seq <= seq) ops_[head_++].bytes.settle();
  if (head_ == ops_.size()) {
    ops_.clear();
    head_ = 0;
  }
}

void FinishedOps::reserve(std::size_t ops) {
  std::lock_guard lock(mu_);
  ops_.reserve(head_ + ops);
}

// ---- Work ----

void Work::issue(std::weak_ptr<FinishedOps> finished, std::uint64_t seq) {
  std::lock_guard lock(mu_);
  finished_ = std::move(finished);
  seq_ = seq;
}

void Work::wait() {
  Tracer* t = tracer_ && tracer_->lane() == 0 ? tracer_ : nullptr;
  const double t0 = t ? t->now() : 0;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  // Ops run in issue order: this one's end means every earlier one's.
  if (const auto f = finished_.lock()) f->settle_through(seq_);
  if (t) t->wait(op_, t0);
  if (error_) std::rethrow_exception(error_);
}

bool Work::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void Work::reset() {
  std::lock_guard lock(mu_);
  done_ = false;
  error_ = nullptr;
}

void Work::finish(std::exception_ptr error) {
  std::lock_guard lock(mu_);
  done_ = true;
  error_ = std::move(error);
  // Under the lock: a waiter that sees done_ may destroy this Work as soon as wait() returns
  // (a strategy's per-bucket Work at the end of a run), so nothing of it may be touched after
  // the unlock; notifying outside it raced with ~Work (ThreadSanitizer, make test-tsan).
  cv_.notify_all();
}

// ---- the queue ----

AsyncQueue::AsyncQueue(std::function<void()> on_thread_start)
    : thread_([this, start = std::move(on_thread_start)] { loop(start); }) {}

AsyncQueue::~AsyncQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  finished_->settle_through(kAll);
}

void AsyncQueue::loop(const std::function<void()>& on_thread_start) {
  try {
    if (on_thread_start) on_thread_start();
  } catch (...) {  // the first queued operation then fails with the same cause, in its Work
  }
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !empty(); });
    if (empty()) return;  // stop requested and nothing left to run
    Item item = std::move(ops_[head_++]);
    if (empty()) {
      ops_.clear();
      head_ = 0;
    }
    running_ = true;
    lock.unlock();
    std::exception_ptr error;
    Tracer* t = tracer_;
    if (t) t->begin();
    HeldBytes held;
    try {
      const HoldBytes hold(held);
      item.op();
    } catch (...) {
      error = std::current_exception();
    }
    if (t) t->end();
    finished_->push(item.seq, std::move(held));  // before finish(): its waiter settles it
    // Moved, so this thread keeps no reference: the exception is then freed by whoever drops
    // the Work's copy, never here while a waiter still reads it (TSan cannot see libstdc++'s
    // uninstrumented reference count, and would report that as a race).
    item.work->finish(std::move(error));
    item = {};  // release the op's captures before reporting idle
    lock.lock();
    running_ = false;
    if (empty()) idle_.notify_all();
  }
}

std::shared_ptr<Work> AsyncQueue::submit(std::function<void()> op) {
  auto work = std::make_shared<Work>();
  enqueue(std::move(op), *work, work);
  return work;
}

void AsyncQueue::run(Work& work, std::function<void()> op, OpLabel label) {
  work.reset();
  enqueue(std::move(op), work, nullptr, label);
}

void AsyncQueue::reserve(std::size_t ops) {
  {
    std::lock_guard lock(mu_);
    ops_.reserve(head_ + ops);
  }
  finished_->reserve(ops);
}

void AsyncQueue::enqueue(std::function<void()> op, Work& work, std::shared_ptr<Work> owned, OpLabel label) {
  if (tracer_) work.trace(tracer_, tracer_->issue(label));
  {
    std::lock_guard lock(mu_);
    // Items before head_ were run (moved out). A queue that never empties (eager DiLoCo's
    // fragments: each one's reduction queued for a whole period, another's queued before it ends)
    // would otherwise grow at every push: drop them first, in place, so reserve() bounds it.
    if (ops_.size() == ops_.capacity() && head_ > 0) {
      ops_.erase(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    work.issue(finished_, ++issued_);
    ops_.push_back({std::move(op), &work, std::move(owned), issued_});
  }
  wake_.notify_one();
}

void AsyncQueue::drain() {
  if (std::this_thread::get_id() == thread_.get_id()) return;
  {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return empty() && !running_; });
  }
  finished_->settle_through(kAll);
}

}  // namespace laconic
