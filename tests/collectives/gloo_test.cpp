// The gloo backend (collectives/gloo): every collective at world sizes 1-4 against closed forms
// and bitwise against the threads backend running the same algorithm; a dead peer is an error
// within the timeout, not a hang; the stores' set-once keys (file store here, redis-server in
// GlooRedis when it is installed).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/key_store.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/timer.h"

namespace laconic {
namespace {

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("laconic-gloo-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

// Runs fn on `n` gloo ranks, each a thread with its own store handle and communicator.
void run_gloo(int n, const StoreSpec& spec, const std::string& group, const std::function<void(Communicator&)>& fn,
              GlooOptions opts = {.timeout_s = 20}) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto store = KeyStore::open(spec);
        GlooCommunicator comm(*store, group, r, n, opts);
        fn(comm);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

// Every collective's results on this rank, concatenated, for `algorithm`.
std::vector<float> exercise(Communicator& comm, Algorithm algorithm) {
  comm.set_algorithm(algorithm);
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = 1000 + 7;  // not a multiple of the world size
  std::vector<float> out;
  auto value = [](int rank, std::size_t i) { return 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(i % 97); };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<float> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = value(r, i);
    comm.all_reduce(x, op);
    out.insert(out.end(), x.begin(), x.end());
  }
  {  // reduce-scatter: blocks of 33
    std::vector<float> send(33 * static_cast<std::size_t>(n)), recv(33);
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = value(r, i);
    comm.reduce_scatter(cbuf(std::span<const float>(send)), buf(std::span<float>(recv)), ReduceOp::sum);
    out.insert(out.end(), recv.begin(), recv.end());
  }
  {  // all-gather and broadcast from the last rank
    std::vector<float> send(50, static_cast<float>(r)), recv(50 * static_cast<std::size_t>(n));
    comm.all_gather(cbuf(std::span<const float>(send)), buf(std::span<float>(recv)));
    out.insert(out.end(), recv.begin(), recv.end());
    std::vector<float> b(300, static_cast<float>(r) + 0.5f);
    comm.broadcast(buf(std::span<float>(b)), n - 1);
    out.insert(out.end(), b.begin(), b.end());
  }
  {  // all-to-all: block j of rank i = 100 i + j
    std::vector<float> send(static_cast<std::size_t>(n) * 4), recv(send.size());
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < 4; ++k) send[static_cast<std::size_t>(j * 4 + k)] = static_cast<float>(100 * r + j);
    comm.all_to_all(cbuf(std::span<const float>(send)), buf(std::span<float>(recv)));
    out.insert(out.end(), recv.begin(), recv.end());
  }
  comm.barrier();
  return out;
}

void check_closed_forms(const std::vector<float>& got, int n, int r) {
  const std::size_t count = 1007;
  double rank_sum = n * (n + 1) / 2 * 0.1;
  for (std::size_t i = 0; i < count; ++i) {
    const double extra = 1e-3 * static_cast<double>(i % 97);
    EXPECT_NEAR(got[i], rank_sum + n * extra, 1e-4) << "sum " << i;
    EXPECT_NEAR(got[count + i], rank_sum / n + extra, 1e-5) << "avg " << i;
    EXPECT_NEAR(got[2 * count + i], 0.1 * n + extra, 1e-6) << "max " << i;
  }
  std::size_t at = 3 * count;
  for (std::size_t i = 0; i < 33; ++i) {
    const std::size_t g = static_cast<std::size_t>(r) * 33 + i;
    EXPECT_NEAR(got[at + i], rank_sum + n * 1e-3 * static_cast<double>(g % 97), 1e-4) << "reduce_scatter " << i;
  }
  at += 33;
  for (int j = 0; j < n; ++j)
    for (std::size_t k = 0; k < 50; ++k) EXPECT_EQ(got[at + static_cast<std::size_t>(j) * 50 + k], static_cast<float>(j));
  at += 50 * static_cast<std::size_t>(n);
  for (std::size_t k = 0; k < 300; ++k) EXPECT_EQ(got[at + k], static_cast<float>(n - 1) + 0.5f);
  at += 300;
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(got[at + static_cast<std::size_t>(j * 4 + k)], static_cast<float>(100 * j + r));
}

TEST(Gloo, EveryCollectiveMatchesClosedFormsAndTheThreadsBackendBitForBit) {
  for (int n = 1; n <= 4; ++n)
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner}) {
      SCOPED_TRACE("world " + std::to_string(n) + ", " + name_of(a));
      std::vector<std::vector<float>> gloo(static_cast<std::size_t>(n)), threads(gloo.size());
      const std::string dir = fresh_dir("collectives");
      run_gloo(n, StoreSpec::parse("file:" + dir), "w" + std::to_string(n) + name_of(a), [&](Communicator& comm) {
        EXPECT_EQ(comm.backend(), "gloo");
        gloo[static_cast<std::size_t>(comm.rank())] = exercise(comm, a);
      });
      run_threads(n, [&](Communicator& comm) { threads[static_cast<std::size_t>(comm.rank())] = exercise(comm, a); });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(gloo[static_cast<std::size_t>(r)].size(), threads[static_cast<std::size_t>(r)].size());
        check_closed_forms(gloo[static_cast<std::size_t>(r)], n, r);
        EXPECT_EQ(gloo[static_cast<std::size_t>(r)], threads[static_cast<std::size_t>(r)]) << "rank " << r;
      }
      std::filesystem::remove_all(dir);
    }
}

TEST(Gloo, BytesAreCountedExactlyAsOnTheThreadsBackend) {
  const int n = 3;
  std::vector<ByteCounters> gloo(n), threads(n);
  const std::string dir = fresh_dir("bytes");
  auto body = [](Communicator& comm, std::vector<ByteCounters>& out) {
    std::vector<float> x(4096, 1.0f);
    comm.all_reduce(x, ReduceOp::sum);
    out[static_cast<std::size_t>(comm.rank())] = comm.bytes();
  };
  run_gloo(n, StoreSpec::parse(dir), "bytes", [&](Communicator& c) { body(c, gloo); });
  run_threads(n, [&](Communicator& c) { body(c, threads); });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(gloo[r].sent, threads[r].sent);
    EXPECT_EQ(gloo[r].recv, threads[r].recv);
    EXPECT_EQ(gloo[r].messages_sent, threads[r].messages_sent);
    EXPECT_GT(gloo[r].sent, 2u * 4096 * 4 * (n - 1) / n - 64);
  }
  std::filesystem::remove_all(dir);
}

// Several TCP connections per pair (GlooOptions::streams): every message of 16 bytes or more
// travels in 4 pieces at once, including pieces of uneven length and messages shorter than 4
// pieces' worth; results bitwise those of one stream and of the threads backend, the bytes and
// messages counted exactly as with one.
TEST(Gloo, SeveralStreamsPerPeerCarryTheBytesOfOneAndTheSameResults) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(n));
    std::vector<std::vector<float>> one(static_cast<std::size_t>(n)), four(one.size()), threads(one.size());
    std::vector<ByteCounters> bytes_one(one.size()), bytes_four(one.size());
    auto body = [](std::vector<std::vector<float>>& out, std::vector<ByteCounters>* bytes) {
      return [&out, bytes](Communicator& comm) {
        out[static_cast<std::size_t>(comm.rank())] = exercise(comm, Algorithm::ring);
        std::vector<float> big(100003, 0.5f + static_cast<float>(comm.rank()));  // 400 KB: uneven pieces
        comm.all_reduce(big, ReduceOp::sum);
        out[static_cast<std::size_t>(comm.rank())].insert(out[static_cast<std::size_t>(comm.rank())].end(),
                                                          big.begin(), big.end());
        if (bytes) (*bytes)[static_cast<std::size_t>(comm.rank())] = comm.bytes();
      };
    };
    const std::string dir = fresh_dir("streams");
    run_gloo(n, StoreSpec::parse("file:" + dir), "one", body(one, &bytes_one));
    run_gloo(n, StoreSpec::parse("file:" + dir), "four", [&](Communicator& comm) {
      EXPECT_EQ(dynamic_cast<GlooCommunicator&>(comm).streams(), 4);
      body(four, &bytes_four)(comm);
    }, GlooOptions{.timeout_s = 20, .streams = 4, .split_bytes = 16});
    run_threads(n, body(threads, nullptr));
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      EXPECT_EQ(four[i], one[i]) << "rank " << r;
      EXPECT_EQ(four[i], threads[i]) << "rank " << r;
      EXPECT_EQ(bytes_four[i].sent, bytes_one[i].sent);
      EXPECT_EQ(bytes_four[i].recv, bytes_one[i].recv);
      EXPECT_EQ(bytes_four[i].messages_sent, bytes_one[i].messages_sent);
    }
    std::filesystem::remove_all(dir);
  }
  const std::string dir = fresh_dir("bad_streams");
  auto store = KeyStore::open(StoreSpec::parse("file:" + dir));
  for (int k : {0, kMaxStreams + 1})
    EXPECT_THROW(GlooCommunicator(*store, "bad", 0, 1, GlooOptions{.streams = k}), Error) << k;
  std::filesystem::remove_all(dir);
}

TEST(Gloo, APeerThatDiesOrNeverComesIsAnErrorWithinTheTimeout) {
  const std::string dir = fresh_dir("dead");
  const StoreSpec spec = StoreSpec::parse(dir);
  // Rank 1 is a child process that connects, takes part once, then dies (SIGKILL, no goodbye).
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      auto store = KeyStore::open(spec);
      GlooCommunicator comm(*store, "dead", 1, 2, {.timeout_s = 20});
      std::vector<float> x(1000, 1.0f);
      comm.all_reduce(x, ReduceOp::sum);
    } catch (...) {
    }
    ::raise(SIGKILL);
  }
  auto store = KeyStore::open(spec);
  GlooCommunicator comm(*store, "dead", 0, 2, {.timeout_s = 3});
  std::vector<float> x(1000, 1.0f);
  comm.all_reduce(x, ReduceOp::sum);
  EXPECT_EQ(x[0], 2.0f);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  Stopwatch t;
  std::string error;
  try {
    comm.all_reduce(x, ReduceOp::sum);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("gloo: rank 0 of 2"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
  EXPECT_LT(t.seconds(), 10.0);
  // A group whose second rank never arrives: the constructor gives up after its timeout.
  t = Stopwatch();
  error.clear();
  try {
    GlooCommunicator lonely(*store, "lonely", 0, 2, {.timeout_s = 1});
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("could not connect"), std::string::npos) << error;
  EXPECT_LT(t.seconds(), 10.0);
  std::filesystem::remove_all(dir);
}

// create() is set-once with one winner among racing writers; find() does not wait; put() and erase_prefix().
void check_set_once(const StoreSpec& spec) {
  auto store = KeyStore::open(spec);
  EXPECT_FALSE(store->find("k.absent"));
  EXPECT_TRUE(store->create("k.once", "first"));
  EXPECT_FALSE(store->create("k.once", "second"));
  EXPECT_EQ(store->find("k.once").value_or(""), "first");
  std::atomic<int> winners{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 8; ++i)
    racers.emplace_back([&, i] {
      auto s = KeyStore::open(spec);
      if (s->create("k.race", "racer " + std::to_string(i))) ++winners;
    });
  for (auto& t : racers) t.join();
  EXPECT_EQ(winners.load(), 1);
  EXPECT_EQ(store->find("k.race").value_or("").rfind("racer ", 0), 0u);
  Stopwatch t;
  EXPECT_FALSE(store->wait("k.never", 0.2));
  EXPECT_LT(t.seconds(), 2.0);
  EXPECT_THROW(store->create("a/b", "x"), Error);
  // put() overwrites (also a key create() made); erase_prefix() removes the keys under a prefix
  // and no other (nor "k.onceagain" for "k.once."), and a prefix matching nothing is no error.
  store->put("k.once", "third");
  EXPECT_EQ(store->find("k.once").value_or(""), "third");
  store->put("r.1.a", "v");
  EXPECT_TRUE(store->create("r.1.b", "w"));
  EXPECT_TRUE(store->create("r.10.a", "x"));
  store->erase_prefix("r.1.");
  store->erase_prefix("r.1.");
  EXPECT_FALSE(store->find("r.1.a"));
  EXPECT_FALSE(store->find("r.1.b"));
  EXPECT_EQ(store->find("r.10.a").value_or(""), "x");
  EXPECT_EQ(store->find("k.once").value_or(""), "third");
  EXPECT_TRUE(store->create("r.1.b", "again"));
}

TEST(Gloo, FileStoreKeysAreSetOnce) {
  const std::string dir = fresh_dir("setonce");
  check_set_once(StoreSpec::parse("file:" + dir));
  std::filesystem::remove_all(dir);
}

TEST(Gloo, NamespacesOfOneStoreDoNotSeeEachOthersKeys) {
  const std::string dir = fresh_dir("ns");
  auto a = KeyStore::open(StoreSpec::parse("file:" + dir + "#one"));
  auto b = KeyStore::open(StoreSpec::parse("file:" + dir + "#two"));
  EXPECT_TRUE(a->create("k", "a"));
  EXPECT_FALSE(b->find("k"));
  EXPECT_TRUE(b->create("k", "b"));
  EXPECT_EQ(a->find("k").value_or(""), "a");
  EXPECT_EQ(b->find("k").value_or(""), "b");
  std::filesystem::remove_all(dir);
}

TEST(Gloo, StoreSpecsParseOrSayWhatWasExpected) {
  EXPECT_EQ(StoreSpec::parse("redis:127.0.0.1:7000").port, 7000);
  EXPECT_EQ(StoreSpec::parse("redis:host").port, 6379);
  EXPECT_EQ(StoreSpec::parse("/tmp/x").kind, StoreSpec::Kind::file);
  EXPECT_EQ(StoreSpec::parse("file:/tmp/x").path, "/tmp/x");
  EXPECT_EQ(StoreSpec::parse("redis:h:7000#run-1").ns, "run-1");
  EXPECT_EQ(StoreSpec::parse("file:/tmp/x#a_b").str(), "file:/tmp/x#a_b");
  EXPECT_THROW(StoreSpec::parse("file:/tmp/x#"), Error);
  EXPECT_THROW(StoreSpec::parse("file:/tmp/x#a.b"), Error);
  EXPECT_THROW(StoreSpec::parse("redis:h:99999"), Error);
  EXPECT_THROW(StoreSpec::parse("redis:"), Error);
  EXPECT_THROW(StoreSpec::parse(""), Error);
  // A mistyped scheme is an error, not a folder named after it; such a folder is spelled file:NAME.
  EXPECT_THROW(StoreSpec::parse("bogus:x"), Error);
  EXPECT_THROW(StoreSpec::parse("redi:host:7000"), Error);
  EXPECT_EQ(StoreSpec::parse("file:bogus:x").path, "bogus:x");
  EXPECT_EQ(StoreSpec::parse("./a:b").path, "./a:b");
}

// A redis-server of its own on 127.0.0.1 (a free port, no persistence), for the test's lifetime.
class RedisServer {
 public:
  RedisServer() {
    if (::access("/usr/bin/redis-server", X_OK) != 0) return;
    dir_ = fresh_dir("redis");
    std::filesystem::create_directories(dir_);
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = 20000 + static_cast<int>((::getpid() * 7 + attempt * 131) % 20000);
      pid_ = ::fork();
      if (pid_ == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::dup2(null, 2);
        const std::string port = std::to_string(port_);
        ::execl("/usr/bin/redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", dir_.c_str(), "--loglevel", "warning", static_cast<char*>(nullptr));
        ::_exit(127);
      }
      // Up once it answers a connection.
      for (int i = 0; i < 100; ++i) {
        try {
          KeyStore::open(spec());
          return;
        } catch (const Error&) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) break;  // the port was taken: try another
      }
      stop();
    }
  }
  ~RedisServer() {
    stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool up() const { return pid_ > 0; }
  StoreSpec spec() const { return StoreSpec::parse("redis:127.0.0.1:" + std::to_string(port_)); }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(GlooRedis, KeysAreSetOnceAndRanksMeetThroughIt) {
  RedisServer redis;
  if (!redis.up()) GTEST_SKIP() << "no redis-server (scripts/install-deps installs it)";
  check_set_once(redis.spec());
  const int n = 3;
  std::vector<std::vector<float>> got(n);
  run_gloo(n, redis.spec(), "redis", [&](Communicator& comm) { got[static_cast<std::size_t>(comm.rank())] = exercise(comm, Algorithm::ring); });
  for (int r = 0; r < n; ++r) check_closed_forms(got[static_cast<std::size_t>(r)], n, r);
}

}  // namespace
}  // namespace laconic
