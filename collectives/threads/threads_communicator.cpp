// ThreadSanitizer does not model std::atomic_thread_fence (GCC's -Wtsan says so for each one).
// The two seq_cst fences here (sleep_until, send_inline) only decide whether a sender must wake a
// sleeping receiver; every byte handed over is published by a release store (a slot's seq, a
// loan's state) or under the mailbox's mutex, which TSan does see. Before the includes: the
// warning points into <atomic>.
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif

#include "collectives/threads/threads_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

#include "core/check.h"

namespace laconic {

namespace {
// A queue is compacted once this many drained entries lead it (and they are at least half).
constexpr std::size_t kCompactAfter = 16;
// Messages up to this size travel eager: copying a few KiB twice costs less than the sender
// waiting for the receiver to show up.
constexpr std::size_t kEagerMax = 8 << 10;
// How long a loan may stay untaken before it is converted to eager: about what the conversion
// would cost (a copy at a pessimistic 1 GB/s), so a late receiver costs at most twice the best
// case (ski rental), plus a floor for a wake-up. Only patterns where the receiver is busy
// elsewhere (or descheduled) reach it.
constexpr auto kLoanPatienceFloor = std::chrono::microseconds(50);
constexpr double kLoanPatienceBytesPerNs = 1.0;

std::chrono::steady_clock::duration loan_patience(std::size_t bytes) {
  return kLoanPatienceFloor + std::chrono::nanoseconds(static_cast<std::int64_t>(
                                  static_cast<double>(bytes) / kLoanPatienceBytesPerNs));
}

std::chrono::steady_clock::time_point deadline_after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// Pure pause-spinning lasts at most this long. A running peer answers within about a cache-line
// transfer (< 1 us); past that, the peer is more likely waiting for a core (ours, even) than busy.
constexpr std::chrono::steady_clock::duration kPauseSpin = std::chrono::microseconds(1);

// Tells the core this is a spin-wait: frees pipeline resources (and the sibling hyperthread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

void ThreadsWorld::Buffer::reserve(std::size_t bytes) {
  if (bytes <= capacity) return;
  data = std::make_unique_for_overwrite<std::byte[]>(bytes);  // no zeroing: always overwritten
  capacity = bytes;
}

void ThreadsWorld::Buffer::assign(const void* src, std::size_t bytes) {
  reserve(bytes);
  size = bytes;
  if (bytes > 0) std::memcpy(data.get(), src, bytes);
}

ThreadsWorld::ThreadsWorld(int size, ThreadsOptions opts)
    : size_(size),
      opts_(opts),
      spin_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(
          opts.spin_s > 0 ? opts.spin_s : 0))),
      oversubscribed_(static_cast<unsigned>(size > 0 ? size : 0) > std::thread::hardware_concurrency()),
      boxes_(static_cast<std::size_t>(size > 0 ? size * size : 0)) {
  LC_CHECK(size >= 1, "a threads world needs at least one rank, got ", size);
  LC_CHECK(opts.timeout_s > 0, "timeout_s must be positive, got ", opts.timeout_s);
  LC_CHECK(opts.spin_s >= 0 && opts.spin_s < 1, "spin_s must be in [0, 1), got ", opts.spin_s);
  finished_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size));
}

template <class Ready>
bool ThreadsWorld::spin(Ready ready) const {
  if (ready()) return true;
  if (spin_.count() <= 0) return false;
  const auto start = std::chrono::steady_clock::now();
  // Pure pause-spinning first (the answer of a running peer is a cache-line transfer away), then
  // yielding: a peer that is not running may be waiting for this very core (more ranks than
  // cores, or other processes on the machine), and sched_yield hands it over without sleeping.
  const auto yield_from = oversubscribed_ ? start : start + std::min(spin_, kPauseSpin);
  const auto until = start + spin_;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      cpu_relax();
      if (ready()) return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return ready();
    if (now >= yield_from) std::this_thread::yield();
  }
}

void ThreadsWorld::wake(Mailbox& m) { m.cv.notify_all(); }

template <class Ready>
bool ThreadsWorld::sleep_until(Mailbox& m, std::unique_lock<std::mutex>& lock,
                               std::chrono::steady_clock::time_point deadline, Ready ready) {
  m.sleepers.fetch_add(1, std::memory_order_relaxed);
  // Pairs with the fence in send_inline (which publishes without the lock): either that sender
  // sees us counted here and notifies, or ready() below sees its message.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool ok = true;
  if (deadline == std::chrono::steady_clock::time_point::max()) m.cv.wait(lock, ready);  // no overflow
  else ok = m.cv.wait_until(lock, deadline, ready);
  m.sleepers.fetch_sub(1, std::memory_order_relaxed);
  return ok;
}

bool ThreadsWorld::send_inline(Mailbox& m, const void* data, std::size_t bytes) {
  // Anything queued under the mutex and not yet taken must be received first (FIFO).
  if (bytes > kInline || m.pending.load(std::memory_order_acquire) != 0) return false;
  const std::uint64_t k = m.sent + 1;
  if (k - m.consumed_seen > kSlots) {  // the ring looked full: look again
    m.consumed_seen = m.consumed.load(std::memory_order_acquire);
    if (k - m.consumed_seen > kSlots) return false;
  }
  Slot& slot = m.slots[k % kSlots];
  slot.size = static_cast<std::uint32_t>(bytes);
  if (bytes > 0) std::memcpy(slot.payload, data, bytes);
  slot.seq.store(k, std::memory_order_release);
  m.sent = k;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // see sleep_until
  if (m.sleepers.load(std::memory_order_relaxed) > 0) {
    { std::lock_guard lock(m.mu); }  // the sleeper is inside wait() once it released the lock
    wake(m);
  }
  return true;
}

void ThreadsWorld::send_small(Mailbox& m, const void* data, std::size_t bytes) {
  if (!send_inline(m, data, bytes)) send_eager(m, data, bytes);
}

void ThreadsWorld::reserve_pool(Mailbox& m, std::size_t bytes) {
  // Growth (see the header) allocates under the lock, but only while the pool warms up.
  if (m.free.empty()) {
    m.pool += static_cast<std::size_t>(size_);
    // Vector capacity for every state too: free holds at most the pool; the queue holds the
    // pending messages (at most the pool, plus one loan) behind a drained prefix that compaction
    // keeps below max(kCompactAfter, pending).
    m.free.reserve(m.pool);
    m.queue.reserve(kCompactAfter + 2 * (m.pool + 1));
    m.free.resize(static_cast<std::size_t>(size_));
  }
  if (bytes > m.capacity) m.capacity = bytes + bytes / 16 + 64;
  for (Buffer& b : m.free) b.reserve(m.capacity);  // a no-op once grown
}

ThreadsWorld::Buffer ThreadsWorld::take_buffer(Mailbox& m, std::size_t bytes) {
  reserve_pool(m, bytes);
  Buffer b = std::move(m.free.back());
  m.free.pop_back();
  return b;
}

void ThreadsWorld::push(Mailbox& m, Buffer b) {
  m.queue.push_back(std::move(b));
  m.pending.fetch_add(1, std::memory_order_release);
}

ThreadsWorld::Buffer ThreadsWorld::pop(Mailbox& m) {
  Buffer b = std::move(m.queue[m.head]);
  // Pop without shifting; compact once the drained prefix dominates (amortized O(1), and the
  // vector keeps its capacity, so no allocation).
  if (++m.head == m.queue.size()) {
    m.queue.clear();
    m.head = 0;
  } else if (m.head >= kCompactAfter && 2 * m.head >= m.queue.size()) {
    m.queue.erase(m.queue.begin(), m.queue.begin() + static_cast<std::ptrdiff_t>(m.head));
    m.head = 0;
  }
  m.pending.fetch_sub(1, std::memory_order_relaxed);
  return b;
}

void ThreadsWorld::send_eager(Mailbox& m, const void* data, std::size_t bytes) {
  bool sleeping;
  if (bytes <= kEagerMax) {
    // Small: one critical section, the copy inside it (a few hundred ns at most).
    std::lock_guard lock(m.mu);
    Buffer b = take_buffer(m, bytes);
    b.assign(data, bytes);
    push(m, std::move(b));
    sleeping = m.sleepers.load(std::memory_order_relaxed) > 0;
  } else {
    Buffer b;
    {
      std::lock_guard lock(m.mu);
      b = take_buffer(m, bytes);
    }
    b.assign(data, bytes);  // the copy runs outside the lock: the receiver can drain meanwhile
    std::lock_guard lock(m.mu);
    push(m, std::move(b));
    sleeping = m.sleepers.load(std::memory_order_relaxed) > 0;
  }
  if (sleeping) wake(m);
}

void ThreadsWorld::lend(Mailbox& m, const void* data, std::size_t bytes) {
  bool sleeping;
  {
    std::lock_guard lock(m.mu);
    reserve_pool(m, bytes);  // what settle() needs if it must convert the loan
    Buffer b;
    b.lent = data;
    b.size = bytes;
    m.loan.store(Loan::lent, std::memory_order_relaxed);
    push(m, std::move(b));
    sleeping = m.sleepers.load(std::memory_order_relaxed) > 0;
  }
  if (sleeping) wake(m);
}

bool ThreadsWorld::settle(Mailbox& m, int dst, std::size_t bytes) noexcept {
  const auto returned = [&] { return m.loan.load(std::memory_order_acquire) == Loan::returned; };
  if (!spin(returned)) {
    std::unique_lock lock(m.mu);
    sleep_until(m, lock, std::chrono::steady_clock::now() + loan_patience(bytes), [&] {
      return m.loan.load(std::memory_order_relaxed) != Loan::lent || failed_.load(std::memory_order_acquire) ||
             finished_[static_cast<std::size_t>(dst)].load(std::memory_order_acquire);
    });
    if (m.loan.load(std::memory_order_relaxed) == Loan::lent) {
      // Not taken: take it back. Only this rank pushes here and it is blocked in this call, so
      // the loan is the newest entry.
      m.loan.store(Loan::none, std::memory_order_relaxed);
      if (failed_.load(std::memory_order_acquire)) {  // nobody will receive it: drop it
        m.queue.pop_back();
        m.pending.fetch_sub(1, std::memory_order_relaxed);
        if (m.head == m.queue.size()) {
          m.queue.clear();
          m.head = 0;
        }
        return false;
      }
      // The copy runs under the lock; the receiver would have to wait for it anyway (FIFO).
      // take_buffer allocates nothing: lend() reserved the pool.
      Buffer b = take_buffer(m, bytes);
      b.assign(m.queue.back().lent, bytes);
      m.queue.back() = std::move(b);
      return true;
    }
    // Taken: the receiver is copying out of our buffer, which must stay valid until it is done.
    sleep_until(m, lock, std::chrono::steady_clock::time_point::max(), returned);
  }
  m.loan.store(Loan::none, std::memory_order_relaxed);
  return true;
}

void ThreadsWorld::send(int src, int dst, const void* data, std::size_t bytes) {
  if (failed_.load(std::memory_order_acquire)) throw_failure();
  Mailbox& m = box(src, dst);
  // To itself a rank can only receive after send returns: a loan would just expire.
  if (bytes <= kEagerMax || src == dst) {
    send_small(m, data, bytes);
    return;
  }
  lend(m, data, bytes);
  if (!settle(m, dst, bytes)) throw_failure();
}

void ThreadsWorld::sendrecv(int rank, const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                            std::size_t recv_bytes, int from) {
  if (failed_.load(std::memory_order_acquire)) throw_failure();
  if (send_bytes <= kEagerMax) {
    send_small(box(rank, to), send_data, send_bytes);  // returns at once
    recv(rank, from, recv_data, recv_bytes);
    return;
  }
  Mailbox& out = box(rank, to);
  lend(out, send_data, send_bytes);  // to == from == rank works too: recv takes our own loan
  try {
    recv(rank, from, recv_data, recv_bytes);
  } catch (...) {
    settle(out, to, send_bytes);  // send_data must not stay lent past our return
    throw;
  }
  if (!settle(out, to, send_bytes)) throw_failure();
}

void ThreadsWorld::recv(int dst, int src, void* data, std::size_t bytes) {
  Mailbox& m = box(src, dst);
  const auto ready = [&] {
    return m.inline_ready() || m.pending.load(std::memory_order_acquire) > 0 ||
           failed_.load(std::memory_order_acquire) ||
           finished_[static_cast<std::size_t>(src)].load(std::memory_order_acquire);
  };
  if (!spin(ready)) {
    std::unique_lock lock(m.mu);
    if (!sleep_until(m, lock, deadline_after(opts_.timeout_s), ready))
      throw Error(detail::concat("rank ", dst, ": timed out after ", opts_.timeout_s, " s waiting for ",
                                 bytes, " bytes from rank ", src));
  }
  if (failed_.load(std::memory_order_acquire)) throw_failure();
  // `pending` first: a queued message was pushed after every inline message sent before it, so
  // having seen it, the ring check below sees those (and they come first).
  const bool queued = m.pending.load(std::memory_order_acquire) > 0;
  if (m.inline_ready()) {
    const std::uint64_t k = m.consumed.load(std::memory_order_relaxed) + 1;
    const Slot& slot = m.slots[k % kSlots];
    const std::size_t got = slot.size;
    if (got == bytes && bytes > 0) std::memcpy(data, slot.payload, bytes);
    m.consumed.store(k, std::memory_order_release);  // the slot may be reused from here on
    if (got != bytes)
      throw Error(detail::concat("rank ", dst, ": expected ", bytes, " bytes from rank ", src, ", got ", got));
    return;
  }
  if (!queued)  // woken by finish(): everything it sent before returning is visible by now
    throw Error(detail::concat("rank ", dst, ": waiting for ", bytes, " bytes from rank ", src,
                               ", which has already returned"));
  std::unique_lock lock(m.mu);
  Buffer buf = pop(m);
  const std::size_t got = buf.size;
  if (buf.lent) {
    // A loan: copy straight from the sender's buffer, then hand it back.
    m.loan.store(Loan::taken, std::memory_order_relaxed);
    lock.unlock();
    if (got == bytes && bytes > 0) std::memcpy(data, buf.lent, bytes);
    lock.lock();
    m.loan.store(Loan::returned, std::memory_order_release);
    const bool sleeping = m.sleepers.load(std::memory_order_relaxed) > 0;
    lock.unlock();
    if (sleeping) wake(m);
  } else {
    if (got > kEagerMax) lock.unlock();  // a large copy runs outside the lock
    if (got == bytes && bytes > 0) std::memcpy(data, buf.data.get(), bytes);
    if (!lock.owns_lock()) lock.lock();
    buf.reserve(m.capacity);  // it was in flight when the mailbox's buffers last grew
    m.free.push_back(std::move(buf));
  }
  if (got != bytes)
    throw Error(detail::concat("rank ", dst, ": expected ", bytes, " bytes from rank ", src, ", got ",
                               got));
}

void ThreadsWorld::fail(int rank, std::exception_ptr error) {
  {
    std::lock_guard lock(fail_mu_);
    if (failed_rank_ >= 0) return;  // keep the first failure; later ones are its echoes
    failed_rank_ = rank;
    try {
      std::rethrow_exception(error);
    } catch (const InputError& e) {
      failed_what_ = e.what();
      failed_input_ = true;
    } catch (const std::exception& e) {
      failed_what_ = e.what();
    } catch (...) {
      failed_what_ = "unknown exception";
    }
    failed_.store(true, std::memory_order_release);
  }
  wake_all();
}

void ThreadsWorld::finish(int rank) {
  finished_[static_cast<std::size_t>(rank)].store(true, std::memory_order_release);
  // Wakes receivers waiting for this rank, and senders whose loans only this rank could take.
  for (int peer = 0; peer < size_; ++peer) {
    for (Mailbox* m : {&box(rank, peer), &box(peer, rank)}) {
      { std::lock_guard lock(m->mu); }  // a waiter is either before its check or inside wait()
      m->cv.notify_all();
    }
  }
}

void ThreadsWorld::wake_all() {
  for (Mailbox& m : boxes_) {
    { std::lock_guard lock(m.mu); }
    m.cv.notify_all();
  }
}

void ThreadsWorld::rethrow_if_failed() const {
  if (failed_.load(std::memory_order_acquire)) throw_failure();
}

void ThreadsWorld::throw_failure() const {
  std::lock_guard lock(fail_mu_);
  std::string msg = detail::concat("rank ", failed_rank_, " failed: ", failed_what_);
  if (failed_input_) throw InputError(msg);
  throw Error(msg);
}

void ThreadsCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  world_.send(rank_, peer, data, bytes);
}

void ThreadsCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  world_.recv(rank_, peer, data, bytes);
}

void ThreadsCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to,
                                      void* recv_data, std::size_t recv_bytes, int from) {
  world_.sendrecv(rank_, send_data, send_bytes, to, recv_data, recv_bytes, from);
}

namespace {
// Pins the calling thread to one CPU for its lifetime in scope and restores its affinity after
// (rank 0 runs on the caller's thread). Does nothing where affinity is not available.
class CpuBinding {
 public:
  explicit CpuBinding(int cpu) {
#ifdef __linux__
    if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    bound_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
#endif
  }
  ~CpuBinding() {
#ifdef __linux__
    if (bound_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
#endif
  }
  CpuBinding(const CpuBinding&) = delete;
  CpuBinding& operator=(const CpuBinding&) = delete;

 private:
#ifdef __linux__
  cpu_set_t saved_{};
#endif
  bool bound_ = false;
};

// The CPUs rank threads are pinned to (rank r -> cpus[r]), or empty: binding is off, or there are
// fewer usable CPUs than ranks (then the scheduler had better move threads around).
std::vector<int> binding_cpus(int world_size, bool bind) {
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t allowed;
  if (!bind || pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < world_size; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (static_cast<int>(cpus.size()) < world_size) cpus.clear();
#endif
  return cpus;
}
}  // namespace

void run_threads(int world_size, const std::function<void(Communicator&)>& fn, ThreadsOptions opts) {
  run_threads(world_size, [&](Communicator& comm, Communicator&) { fn(comm); }, opts);
}

void run_threads(int world_size, const std::function<void(Communicator&, Communicator&)>& fn, ThreadsOptions opts) {
  ThreadsWorld world(world_size, opts), control(world_size, opts);
  const auto fail = [&](int rank, std::exception_ptr e) {
    world.fail(rank, e);
    control.fail(rank, e);
  };
  const std::vector<int> cpus = binding_cpus(world_size, opts.bind_cores);
  const auto rank_main = [&](int rank) {
    const CpuBinding binding(cpus.empty() ? -1 : cpus[static_cast<std::size_t>(rank)]);
    // The communicators outlive the catch: a failure must be recorded (waking every waiter)
    // before their destructors join a communication thread that may be blocked on a peer.
    std::optional<ThreadsCommunicator> comm, ctl;
    try {
      comm.emplace(world, rank);
      ctl.emplace(control, rank);
      fn(*comm, *ctl);
    } catch (...) {
      fail(rank, std::current_exception());
    }
    comm.reset();
    ctl.reset();
    world.finish(rank);
    control.finish(rank);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world_size - 1));
  for (int r = 1; r < world_size; ++r) {
    try {
      threads.emplace_back(rank_main, r);
    } catch (...) {  // no thread for rank r: fail the world so the started ranks stop, then join
      fail(r, std::current_exception());
      break;
    }
  }
  rank_main(0);
  for (std::thread& t : threads) t.join();
  world.rethrow_if_failed();
  control.rethrow_if_failed();
}

}  // namespace laconic
