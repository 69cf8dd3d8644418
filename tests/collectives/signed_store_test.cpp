// The signed store (collectives/gloo/signed_store.h): HMAC-SHA256 against RFC 4231's test vectors;
// a signed store's keys round-trip, live under the documented names with the documented tags, and
// refuse (one warning each, no throw) values written without the secret: forged, truncated,
// signed with another secret, copied from another key or another run's namespace; stores with
// different secrets do not see each other's keys; gloo's rendezvous over it connects, and a peer's
// value written without the secret counts as absent.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/key_store.h"
#include "collectives/gloo/signed_store.h"
#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

struct Dir {
  explicit Dir(const std::string& name)
      : path((fs::temp_directory_path() / ("laconic-signed-" + std::to_string(::getpid()) + "-" + name)).string()) {
    fs::remove_all(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};

std::string bytes(std::size_t n, unsigned char c) { return std::string(n, static_cast<char>(c)); }

// RFC 4231, section 4: HMAC-SHA-256 of test cases 1-7 (case 5's output truncated to 128 bits).
TEST(Hmac, Rfc4231TestVectors) {
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  struct Case {
    std::string key, data, hex;
  };
  const std::vector<Case> cases = {
      {bytes(20, 0x0b), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {bytes(20, 0xaa), bytes(50, 0xdd), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, bytes(50, 0xcd), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {bytes(20, 0x0c), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
      {bytes(131, 0xaa), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {bytes(131, 0xaa),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(to_hex(hmac_sha256(cases[i].key, {cases[i].data})).substr(0, cases[i].hex.size()), cases[i].hex)
        << "test case " << i + 1;
  // The parts are hashed as their concatenation.
  EXPECT_EQ(to_hex(hmac_sha256(bytes(20, 0x0b), {"Hi", "", " There"})), cases[0].hex);
  EXPECT_TRUE(same_digest(hmac_sha256("k", {"a"}), hmac_sha256("k", {"a"})));
  EXPECT_FALSE(same_digest(hmac_sha256("k", {"a"}), hmac_sha256("k", {"b"})));
  // value_tag = HMAC(secret, q || 0x00 || value).
  EXPECT_EQ(to_hex(value_tag("s", "ns.k", "v")), to_hex(hmac_sha256("s", {std::string("ns.k\0v", 6)})));
}

// Where the signed store keeps key `q` (namespace-qualified), by the header's definition.
std::string stored_name(const std::string& secret, const std::string& key, const std::string& q) {
  return key + "." + to_hex(hmac_sha256(secret, {"name" + q})).substr(0, 32);
}
std::string signed_value(const std::string& secret, const std::string& q, const std::string& value) {
  return value + to_hex(value_tag(secret, q, value));
}

TEST(SignedStore, KeysRoundTripUnderTheDocumentedNamesAndTags) {
  Dir dir("roundtrip");
  const StoreSpec spec = StoreSpec::parse("file:" + dir.path + "#run-a");
  std::ostringstream log;
  auto s = sign_store(KeyStore::open(spec), "s3cret", &log);
  auto raw = KeyStore::open(spec);
  EXPECT_TRUE(s->create("round.0.quorum", "{\"members\": [0, 1]}"));
  EXPECT_FALSE(s->create("round.0.quorum", "{\"members\": [2]}"));  // set-once: the first writer won
  EXPECT_EQ(s->find("round.0.quorum"), "{\"members\": [0, 1]}");
  EXPECT_EQ(s->wait("round.0.quorum", 1), "{\"members\": [0, 1]}");
  s->put("heartbeat.1", "7");
  s->put("heartbeat.1", "8");  // the last writer wins
  EXPECT_EQ(s->find("heartbeat.1"), "8");
  EXPECT_EQ(s->find("round.1.quorum"), std::nullopt);
  // The store underneath holds the value and its tag under the signed name, nothing under the plain one.
  EXPECT_EQ(raw->find("round.0.quorum"), std::nullopt);
  EXPECT_EQ(raw->find(stored_name("s3cret", "round.0.quorum", "run-a.round.0.quorum")),
            signed_value("s3cret", "run-a.round.0.quorum", "{\"members\": [0, 1]}"));
  EXPECT_EQ(raw->find(stored_name("s3cret", "heartbeat.1", "run-a.heartbeat.1")),
            signed_value("s3cret", "run-a.heartbeat.1", "8"));
  s->erase_prefix("heartbeat.");
  EXPECT_EQ(s->find("heartbeat.1"), std::nullopt);
  EXPECT_EQ(raw->find(stored_name("s3cret", "heartbeat.1", "run-a.heartbeat.1")), std::nullopt);
  EXPECT_EQ(s->find("round.0.quorum"), "{\"members\": [0, 1]}");  // not under the prefix
  EXPECT_EQ(log.str(), "");
  EXPECT_THROW(s->find("a/b"), Error);  // names keep the no-'/' rule
}

TEST(SignedStore, AForgedValueIsIgnoredWithOneWarningPerKey) {
  Dir dir("forged");
  const StoreSpec spec = StoreSpec::parse("file:" + dir.path + "#run-a");
  std::ostringstream log;
  auto s = sign_store(KeyStore::open(spec), "s3cret", &log);
  auto raw = KeyStore::open(spec);
  const std::string outcome = stored_name("s3cret", "round.3.outcome", "run-a.round.3.outcome");
  auto warnings = [&] {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = log.str().find('\n', at)) != std::string::npos; ++at) ++n;
    return n;
  };
  // Written without the secret under the very name: a bare value, a truncated one, one signed with
  // another secret, one whose tag is another key's, one whose tag is another namespace's.
  const std::vector<std::string> forgeries = {
      "retry",
      "ab",
      signed_value("guess", "run-a.round.3.outcome", "retry"),
      signed_value("s3cret", "run-a.round.3.ok.0", "retry"),
      signed_value("s3cret", "run-b.round.3.outcome", "retry"),
      signed_value("s3cret", "run-a.round.3.outcome", "commit").substr(0, 69),
      "retry" + signed_value("s3cret", "run-a.round.3.outcome", "commit").substr(6),
  };
  for (const std::string& f : forgeries) {
    raw->put(outcome, f);
    EXPECT_EQ(s->find("round.3.outcome"), std::nullopt) << f;
  }
  EXPECT_EQ(log.str(), "laconic: elastic: store key 'round.3.outcome' failed authentication; ignored\n");
  EXPECT_EQ(warnings(), 1u);
  // The genuine value, once written, is found; another key's forgery warns once for that key.
  raw->put(outcome, signed_value("s3cret", "run-a.round.3.outcome", "commit"));
  EXPECT_EQ(s->find("round.3.outcome"), "commit");
  raw->put(stored_name("s3cret", "finished", "run-a.finished"), "0");
  EXPECT_EQ(s->find("finished"), std::nullopt);
  EXPECT_EQ(warnings(), 2u);
  // A forger writing the plain name pre-empts nothing: the set-once key is still the signer's.
  EXPECT_TRUE(raw->create("round.4.quorum", "{}"));
  EXPECT_TRUE(s->create("round.4.quorum", "{\"members\": [0]}"));
  EXPECT_EQ(s->find("round.4.quorum"), "{\"members\": [0]}");
}

TEST(SignedStore, StoresWithDifferentSecretsDoNotSeeEachOthersKeys) {
  Dir dir("secrets");
  const StoreSpec spec = StoreSpec::parse("file:" + dir.path + "#run-a");
  std::ostringstream log;
  auto a = sign_store(KeyStore::open(spec), "alpha", &log);
  auto b = sign_store(KeyStore::open(spec), "beta", &log);
  EXPECT_TRUE(a->create("round.0.hello.0", "a"));
  EXPECT_TRUE(b->create("round.0.hello.0", "b"));  // another name: b's set-once key is its own
  EXPECT_EQ(a->find("round.0.hello.0"), "a");
  EXPECT_EQ(b->find("round.0.hello.0"), "b");
  a->put("round.0.outcome", "commit");
  EXPECT_EQ(b->find("round.0.outcome"), std::nullopt);
  // A value copied from one namespace to the same key's name in another does not verify there.
  const StoreSpec other = StoreSpec::parse("file:" + dir.path + "#run-b");
  auto raw = KeyStore::open(spec), raw_other = KeyStore::open(other);
  auto a_other = sign_store(KeyStore::open(other), "alpha", &log);
  raw_other->put(stored_name("alpha", "round.0.outcome", "run-b.round.0.outcome"),
                 *raw->find(stored_name("alpha", "round.0.outcome", "run-a.round.0.outcome")));
  EXPECT_EQ(a_other->find("round.0.outcome"), std::nullopt);
  EXPECT_EQ(log.str(), "laconic: elastic: store key 'round.0.outcome' failed authentication; ignored\n");
}

TEST(SignedStore, GlooConnectsOverItAndRefusesAForgedPeerAddress) {
  Dir dir("gloo");
  const StoreSpec spec = StoreSpec::parse("file:" + dir.path + "#run-a");
  // Two ranks connect and reduce through their signed stores.
  std::vector<float> out(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      try {
        auto s = sign_store(KeyStore::open(spec), "s3cret", nullptr);
        GlooCommunicator comm(*s, "round.0.gloo", r, 2, {.timeout_s = 20});
        float x = static_cast<float>(r + 1);
        comm.all_reduce(std::span<float>(&x, 1), ReduceOp::sum);
        out[static_cast<std::size_t>(r)] = x;
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(out, (std::vector<float>{3, 3}));
  // gloo's keys are named and signed like any other; a peer's value written without the secret
  // counts as absent (waiting for it times out), with one warning.
  std::ostringstream log;
  auto s = sign_store(KeyStore::open(spec), "s3cret", &log);
  auto raw = KeyStore::open(spec);
  auto view = s->gloo_store("round.1.gloo");
  view->set("0", {'a', 'd', 'd', 'r'});
  EXPECT_EQ(view->get("0"), (std::vector<char>{'a', 'd', 'd', 'r'}));
  EXPECT_EQ(raw->find(stored_name("s3cret", "round.1.gloo.0", "run-a.round.1.gloo.0")),
            signed_value("s3cret", "run-a.round.1.gloo.0", "addr"));
  raw->put(stored_name("s3cret", "round.1.gloo.1", "run-a.round.1.gloo.1"), "evil");
  EXPECT_THROW(view->wait({"1"}, std::chrono::milliseconds(100)), Error);
  EXPECT_EQ(log.str(), "laconic: elastic: store key 'round.1.gloo.1' failed authentication; ignored\n");
}

}  // namespace
}  // namespace laconic
