// The rendezvous stores of the gloo backend and of elastic training's quorums (framework/elastic):
// a folder every process can reach (one machine, or a shared file system: a file per key), or a
// redis-server every machine can reach (through gloo's RedisStore's connection). A store is a map
// of string keys to bytes that several processes see at once.
//
//   auto store = laconic::KeyStore::open(laconic::StoreSpec::parse("file:/tmp/run/store"));
//   laconic::GlooCommunicator comm(*store, "round.7", rank, size);  // collectives/gloo
//
// Beyond gloo's set/get/wait, a KeyStore offers what a quorum needs without a coordinator:
// create() is set-once and atomic across processes (the first writer wins and every later writer
// learns it lost), find() looks without waiting, put() overwrites (a heartbeat, the newest round)
// and erase_prefix() removes (old rounds). Keys are plain names ("round.7.quorum"): no
// '/', so a file store keeps them all in one folder.
//
// A KeyStore is used by one thread at a time (RedisStore's connection is not thread-safe): each
// rank or replica opens its own.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace gloo::rendezvous {
class Store;
}

namespace laconic {

struct StoreSpec {
  // external: a store the caller implements (laconic.torch: torch's own, under torchrun); `path`
  // then says what it is, for messages.
  enum class Kind { file, redis, external };
  Kind kind = Kind::file;
  std::string path;  // file: the folder (created if missing)
  std::string host;  // redis
  int port = 6379;
  std::string ns;    // a namespace every key is prefixed with ("ns."): one run's keys in a shared store
  // "file:DIR", "redis:HOST[:PORT]", or a bare DIR (a file store), each optionally followed by
  // "#NS" (letters, digits, '-', '_'). Throws laconic::Error naming what was expected.
  static StoreSpec parse(const std::string& text);
  std::string str() const;
};

class KeyStore {
 public:
  // Opens (a file store: creates its folder; a redis store: connects). Throws laconic::Error.
  static std::unique_ptr<KeyStore> open(const StoreSpec& spec);
  virtual ~KeyStore();

  // Writes key = value unless the key exists; true when this call wrote it. Atomic: of several
  // processes creating one key, exactly one gets true and every reader sees its value whole.
  virtual bool create(const std::string& key, const std::string& value) = 0;
  // The key's value if it exists now (no waiting).
  virtual std::optional<std::string> find(const std::string& key) = 0;
  // Writes key = value whether or not it exists (the last writer wins; readers see one value whole).
  virtual void put(const std::string& key, const std::string& value) = 0;
  // Removes every key whose name starts with `prefix` ("round.7." : all of round 7's keys, gloo's
  // rendezvous keys under it included).
  virtual void erase_prefix(const std::string& prefix) = 0;
  // Waits up to timeout_s for the key (polling every few ms); nullopt when it did not appear.
  std::optional<std::string> wait(const std::string& key, double timeout_s);
  // gloo's view of this store with every key prefixed "prefix." (a context's rendezvous), through
  // put and find: what this store does to keys (a namespace, a signature) applies to gloo's too.
  std::unique_ptr<gloo::rendezvous::Store> gloo_store(const std::string& prefix);
  const StoreSpec& spec() const { return spec_; }

 protected:
  explicit KeyStore(StoreSpec spec) : spec_(std::move(spec)) {}
  // The key as stored: checked (no '/'), in this store's namespace.
  std::string stored(const std::string& key) const;

 private:
  StoreSpec spec_;
};

}  // namespace laconic
