#include "collectives/threads/threads_communicator.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "framework/core/check.h"

namespace laconic {

namespace {
// A queue is compacted once this many drained entries lead it (and they are at least half).
constexpr std::size_t kCompactAfter = 16;
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
    : size_(size), opts_(opts), boxes_(static_cast<std::size_t>(size > 0 ? size * size : 0)) {
  LC_CHECK(size >= 1, "a threads world needs at least one rank, got ", size);
  LC_CHECK(opts.timeout_s > 0, "timeout_s must be positive, got ", opts.timeout_s);
  finished_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size));
}

void ThreadsWorld::send(int src, int dst, const void* data, std::size_t bytes) {
  if (failed_.load(std::memory_order_acquire)) throw_failure();
  Mailbox& m = box(src, dst);
  Buffer buf;
  {
    // Growth (see the header) allocates under the lock, but only while the pool warms up.
    std::lock_guard lock(m.mu);
    if (m.free.empty()) {
      m.pool += static_cast<std::size_t>(size_);
      // Vector capacity for every state too: free holds at most the pool; the queue holds the
      // pending messages (at most the pool) behind a drained prefix that compaction keeps below
      // max(kCompactAfter, pending).
      m.free.reserve(m.pool);
      m.queue.reserve(kCompactAfter + 2 * m.pool);
      m.free.resize(static_cast<std::size_t>(size_));
    }
    if (bytes > m.capacity) m.capacity = bytes + bytes / 16 + 64;
    for (Buffer& b : m.free) b.reserve(m.capacity);  // a no-op once grown
    buf = std::move(m.free.back());
    m.free.pop_back();
  }
  buf.assign(data, bytes);  // the copy runs outside the lock: the receiver can drain meanwhile
  {
    std::lock_guard lock(m.mu);
    m.queue.push_back(std::move(buf));
  }
  m.cv.notify_one();  // one receiver per mailbox
}

void ThreadsWorld::recv(int dst, int src, void* data, std::size_t bytes) {
  Mailbox& m = box(src, dst);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(opts_.timeout_s));
  Buffer buf;
  {
    std::unique_lock lock(m.mu);
    const auto ready = [&] {
      return m.head < m.queue.size() || failed_.load(std::memory_order_acquire) ||
             finished_[static_cast<std::size_t>(src)].load(std::memory_order_acquire);
    };
    if (!m.cv.wait_until(lock, deadline, ready))
      throw Error(detail::concat("rank ", dst, ": timed out after ", opts_.timeout_s, " s waiting for ",
                                 bytes, " bytes from rank ", src));
    if (failed_.load(std::memory_order_acquire)) throw_failure();
    if (m.head == m.queue.size())
      throw Error(detail::concat("rank ", dst, ": waiting for ", bytes, " bytes from rank ", src,
                                 ", which has already returned"));
    buf = std::move(m.queue[m.head]);
    // Pop without shifting; compact once the drained prefix dominates (amortized O(1), and the
    // vector keeps its capacity, so no allocation).
    if (++m.head == m.queue.size()) {
      m.queue.clear();
      m.head = 0;
    } else if (m.head >= kCompactAfter && 2 * m.head >= m.queue.size()) {
      m.queue.erase(m.queue.begin(), m.queue.begin() + static_cast<std::ptrdiff_t>(m.head));
      m.head = 0;
    }
  }
  const std::size_t got = buf.size;
  if (got == bytes && bytes > 0) std::memcpy(data, buf.data.get(), bytes);
  {
    std::lock_guard lock(m.mu);
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
  for (int dst = 0; dst < size_; ++dst) {
    Mailbox& m = box(rank, dst);
    { std::lock_guard lock(m.mu); }  // a waiter is either before its check or inside wait()
    m.cv.notify_all();
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
  world_.send(rank_, to, send_data, send_bytes);  // buffered: returns at once
  world_.recv(rank_, from, recv_data, recv_bytes);
}

void run_threads(int world_size, const std::function<void(Communicator&)>& fn, ThreadsOptions opts) {
  ThreadsWorld world(world_size, opts);
  const auto rank_main = [&](int rank) {
    // The communicator outlives the catch: a failure must be recorded (waking every waiter)
    // before its destructor joins a communication thread that may be blocked on a peer.
    std::optional<ThreadsCommunicator> comm;
    try {
      comm.emplace(world, rank);
      fn(*comm);
    } catch (...) {
      world.fail(rank, std::current_exception());
    }
    comm.reset();
    world.finish(rank);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world_size - 1));
  for (int r = 1; r < world_size; ++r) {
    try {
      threads.emplace_back(rank_main, r);
    } catch (...) {  // no thread for rank r: fail the world so the started ranks stop, then join
      world.fail(r, std::current_exception());
      break;
    }
  }
  rank_main(0);
  for (std::thread& t : threads) t.join();
  world.rethrow_if_failed();
}

}  // namespace laconic
