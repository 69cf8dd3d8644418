// The donated state on the wire (framework/elastic/state_transfer.h) between a donor and a joiner,
// two gloo ranks in threads over a file store: it arrives whole with and without a secret; a
// declared size above the bound is refused at once, before anything is allocated; a state altered
// after it was tagged, tagged with another secret, or tagged for another round is refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/signed_store.h"
#include "core/check.h"
#include "framework/elastic/state_transfer.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

struct Dir {
  explicit Dir(const std::string& name)
      : path((fs::temp_directory_path() / ("laconic-state-" + std::to_string(::getpid()) + "-" + name)).string()) {
    fs::remove_all(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};

// The donor (rank 0) and the joiner (rank 1) of a gloo group; what the joiner threw ("" if nothing).
std::string transfer(const std::string& dir, const std::function<void(Communicator&)>& donor,
                     const std::function<void(Communicator&)>& joiner) {
  const StoreSpec spec = StoreSpec::parse("file:" + dir);
  std::string donor_error, joiner_error;
  std::thread d([&] {
    try {
      auto store = KeyStore::open(spec);
      GlooCommunicator comm(*store, "round.1.join", 0, 2, {.timeout_s = 10});
      donor(comm);
    } catch (const std::exception& e) {
      donor_error = e.what();
    }
  });
  try {
    auto store = KeyStore::open(spec);
    GlooCommunicator comm(*store, "round.1.join", 1, 2, {.timeout_s = 10});
    joiner(comm);
  } catch (const Error& e) {
    joiner_error = e.what();
  }
  d.join();
  EXPECT_EQ(donor_error, "");
  return joiner_error;
}

std::string state() {
  std::string s(300000, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31 + 7);
  return s;
}

constexpr std::uint64_t kBound = 1 << 20;
const std::string kName = "run-a.round.1.state";

TEST(ElasticState, ArrivesWholeWithAndWithoutASecret) {
  for (const std::string secret : {"", "s3cret"}) {
    Dir dir("whole" + secret);
    std::string got;
    EXPECT_EQ(transfer(
                  dir.path, [&](Communicator& c) { send_state(c, state(), secret, kName); },
                  [&](Communicator& c) { got = receive_state(c, kBound, secret, kName); }),
              "");
    EXPECT_EQ(got, state()) << "secret '" << secret << "'";
  }
}

TEST(ElasticState, ADeclaredSizeAboveTheBoundIsRefusedBeforeAllocating) {
  Dir dir("huge");
  double seconds = -1;
  const std::string error = transfer(
      dir.path,
      [](Communicator& c) {  // declares 2^62 bytes (an allocation of it would throw bad_alloc), sends nothing more
        std::uint64_t bytes = std::uint64_t{1} << 62;
        c.broadcast(&bytes, sizeof bytes, 0);
      },
      [&](Communicator& c) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
          receive_state(c, kBound, "s3cret", kName);
        } catch (...) {
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          throw;
        }
      });
  EXPECT_EQ(error, "elastic: the donor declared a state of 4611686018427387904 bytes, more than the 1048576 a "
                   "checkpoint of this run's model can hold; refused");
  EXPECT_GE(seconds, 0.0);
  EXPECT_LT(seconds, 1.0);  // at once: it waited for nothing after the count
  // One byte over the bound is refused too; the bound itself passes.
  Dir edge("edge");
  EXPECT_NE(transfer(
                edge.path,
                [](Communicator& c) {
                  std::uint64_t bytes = kBound + 1;
                  c.broadcast(&bytes, sizeof bytes, 0);
                },
                [](Communicator& c) { receive_state(c, kBound, "", kName); }),
            "");
  Dir exact("exact");
  EXPECT_EQ(transfer(
                exact.path, [](Communicator& c) { send_state(c, std::string(kBound, 'x'), "", kName); },
                [](Communicator& c) { EXPECT_EQ(receive_state(c, kBound, "", kName).size(), kBound); }),
            "");
}

TEST(ElasticState, AnAlteredOrForeignStateIsRefused) {
  const std::string refused =
      "elastic: the state received (300000 bytes) failed authentication: its HMAC does not match (altered, or sent "
      "without the secret); refused";
  auto joiner = [](Communicator& c) { receive_state(c, kBound, "s3cret", kName); };
  {  // one byte changed after it was tagged
    Dir dir("altered");
    EXPECT_EQ(transfer(
                  dir.path,
                  [](Communicator& c) {
                    std::string s = state();
                    Digest tag = value_tag("s3cret", kName, s);
                    s[123456] ^= 1;
                    std::uint64_t bytes = s.size();
                    c.broadcast(&bytes, sizeof bytes, 0);
                    c.broadcast(s.data(), s.size(), 0);
                    c.broadcast(tag.data(), tag.size(), 0);
                  },
                  joiner),
              refused);
  }
  {  // tagged with another secret
    Dir dir("other-secret");
    EXPECT_EQ(transfer(dir.path, [](Communicator& c) { send_state(c, state(), "guess", kName); }, joiner), refused);
  }
  {  // a genuine state of another round, replayed
    Dir dir("replayed");
    EXPECT_EQ(transfer(dir.path, [](Communicator& c) { send_state(c, state(), "s3cret", "run-a.round.0.state"); }, joiner),
              refused);
  }
}

}  // namespace
}  // namespace laconic
