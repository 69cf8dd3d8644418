#include "collectives/gloo/key_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#define HIREDIS_NESTED_INCLUDE 1
#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include "core/check.h"

namespace laconic {

StoreSpec StoreSpec::parse(const std::string& spec) {
  StoreSpec s;
  const auto hash = spec.rfind('#');
  const std::string text = spec.substr(0, hash);
  if (hash != std::string::npos) {
    s.ns = spec.substr(hash + 1);
    LC_CHECK(!s.ns.empty() && std::all_of(s.ns.begin(), s.ns.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
             }), "store '", spec, "': expected a namespace of letters, digits, '-' and '_' after '#'");
  }
  auto rest = [&](const char* scheme) { return text.substr(std::strlen(scheme)); };
  if (text.rfind("redis:", 0) == 0) {
    s.kind = Kind::redis;
    std::string hp = rest("redis:");
    if (hp.rfind("//", 0) == 0) hp = hp.substr(2);
    const auto colon = hp.rfind(':');
    s.host = colon == std::string::npos ? hp : hp.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string p = hp.substr(colon + 1);
      char* end = nullptr;
      const long port = std::strtol(p.c_str(), &end, 10);
      LC_CHECK(!p.empty() && *end == '\0' && port > 0 && port < 65536, "store '", text,
               "': expected redis:HOST[:PORT] with a port in [1, 65535]");
      s.port = static_cast<int>(port);
    }
    LC_CHECK(!s.host.empty(), "store '", text, "': expected redis:HOST[:PORT]");
    return s;
  }
  s.kind = Kind::file;
  s.path = text.rfind("file:", 0) == 0 ? rest("file:") : text;
  LC_CHECK(!s.path.empty(), "store '", text, "': expected file:DIR, redis:HOST[:PORT] or a folder");
  return s;
}

std::string StoreSpec::str() const {
  return (kind == Kind::file ? "file:" + path : "redis:" + host + ":" + std::to_string(port)) +
         (ns.empty() ? "" : "#" + ns);
}

KeyStore::~KeyStore() = default;

std::string KeyStore::stored(const std::string& key) const {
  LC_CHECK(!key.empty() && key.find('/') == std::string::npos, "store key '", key, "': expected a name without '/'");
  return spec_.ns.empty() ? key : spec_.ns + "." + key;
}

std::optional<std::string> KeyStore::wait(const std::string& key, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (auto v = find(key)) return v;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {

// gloo's Store interface over another with every key prefixed "prefix." (gloo's own PrefixStore
// joins with '/', which a file store would take for a folder).
class Prefixed final : public gloo::rendezvous::Store {
 public:
  Prefixed(std::string prefix, gloo::rendezvous::Store& base) : prefix_(std::move(prefix) + "."), base_(base) {}
  void set(const std::string& key, const std::vector<char>& data) override { base_.set(prefix_ + key, data); }
  std::vector<char> get(const std::string& key) override { return base_.get(prefix_ + key); }
  void wait(const std::vector<std::string>& keys) override { base_.wait(full(keys)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    base_.wait(full(keys), timeout);
  }

 private:
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::string prefix_;
  gloo::rendezvous::Store& base_;
};

// gloo's FileStore, whose key files this class also creates (set-once through link(2), which
// fails when the name exists) and reads.
class FileKeyStore final : public KeyStore {
 public:
  explicit FileKeyStore(StoreSpec spec) : KeyStore(spec), gloo_((make_dir(spec.path), spec.path)) {}

  bool create(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    const std::string tmp = write_temporary(name, value);
    const int rc = ::link(tmp.c_str(), gloo_.path(name).c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) return true;
    LC_CHECK(err == EEXIST, "store ", spec().str(), ": cannot create key '", key, "': ", std::strerror(err));
    return false;
  }

  std::optional<std::string> find(const std::string& key) override {
    std::ifstream in(gloo_.path(stored(key)), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  void put(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    const std::string tmp = write_temporary(name, value);
    const int rc = ::rename(tmp.c_str(), gloo_.path(name).c_str());  // atomic: readers see old or new
    const int err = errno;
    if (rc != 0) {
      ::unlink(tmp.c_str());
      throw Error(detail::concat("store ", spec().str(), ": cannot write key '", key, "': ", std::strerror(err)));
    }
  }

  void erase(const std::string& key) override {
    const std::string path = gloo_.path(stored(key));
    LC_CHECK(::unlink(path.c_str()) == 0 || errno == ENOENT, "store ", spec().str(), ": cannot remove key '", key,
             "': ", std::strerror(errno));
  }

  std::unique_ptr<gloo::rendezvous::Store> gloo_store(const std::string& prefix) override {
    return std::make_unique<Prefixed>(stored(prefix), gloo_);
  }

 private:
  // The value in a file of its own beside the keys, to be linked or renamed into place.
  std::string write_temporary(const std::string& name, const std::string& value) {
    static std::atomic<unsigned> serial{0};
    const std::string tmp = spec().path + "/.create." + std::to_string(::getpid()) + "." +
                            std::to_string(serial.fetch_add(1)) + "." + name;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    out.close();
    if (!out.good()) {
      const int err = errno;
      ::unlink(tmp.c_str());
      throw Error(detail::concat("store ", spec().str(), ": cannot write ", tmp, ": ", std::strerror(err)));
    }
    return tmp;
  }
  static void make_dir(const std::string& path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    LC_CHECK(!ec && std::filesystem::is_directory(path), "store file:", path, ": cannot create the folder: ",
             ec ? ec.message() : "not a folder");
  }
  struct Gloo final : gloo::rendezvous::FileStore {
    explicit Gloo(const std::string& path) : FileStore(path) {}
    std::string path(const std::string& key) { return objectPath(key); }
  } gloo_;
};

// gloo's RedisStore (its keys are redis strings); create() is SETNX on its connection.
class RedisKeyStore final : public KeyStore {
 public:
  explicit RedisKeyStore(StoreSpec spec) : KeyStore(spec), gloo_(connect(spec)) {}

  bool create(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    auto* reply = gloo_.command("SETNX %b %b", name.data(), name.size(), value.data(), value.size());
    const bool created = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return created;
  }

  std::optional<std::string> find(const std::string& key) override {
    const std::string name = stored(key);
    auto* reply = gloo_.command("GET %b", name.data(), name.size());
    std::optional<std::string> out;
    if (reply->type == REDIS_REPLY_STRING) out = std::string(reply->str, reply->len);
    freeReplyObject(reply);
    return out;
  }

  void put(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    freeReplyObject(gloo_.command("SET %b %b", name.data(), name.size(), value.data(), value.size()));
  }

  void erase(const std::string& key) override {
    const std::string name = stored(key);
    freeReplyObject(gloo_.command("DEL %b", name.data(), name.size()));
  }

  std::unique_ptr<gloo::rendezvous::Store> gloo_store(const std::string& prefix) override {
    return std::make_unique<Prefixed>(stored(prefix), gloo_);
  }

 private:
  struct Gloo final : gloo::rendezvous::RedisStore {
    using RedisStore::RedisStore;
    template <typename... A>
    redisReply* command(const char* format, A... args) {
      auto* reply = static_cast<redisReply*>(redisCommand(redis_, format, args...));
      LC_CHECK(reply != nullptr, "store redis: ", redis_->errstr);
      if (reply->type == REDIS_REPLY_ERROR) {
        const std::string why(reply->str, reply->len);
        freeReplyObject(reply);
        throw Error("store redis: " + why);
      }
      return reply;
    }
  };
  static Gloo connect(const StoreSpec& spec) {
    // Probe first: gloo's RedisStore leaks its connection when its constructor throws.
    redisContext* probe = redisConnect(spec.host.c_str(), spec.port);
    const std::string why = probe == nullptr ? "out of memory" : probe->err ? probe->errstr : "";
    if (probe) redisFree(probe);
    if (!why.empty()) throw Error("store " + spec.str() + ": cannot connect: " + why);
    try {
      return Gloo(spec.host, spec.port);
    } catch (const std::exception& e) {  // gloo enforces the connection
      throw Error("store " + spec.str() + ": cannot connect: " + e.what());
    }
  }
  Gloo gloo_;
};

}  // namespace

std::unique_ptr<KeyStore> KeyStore::open(const StoreSpec& spec) {
  if (spec.kind == StoreSpec::Kind::redis) return std::make_unique<RedisKeyStore>(spec);
  return std::make_unique<FileKeyStore>(spec);
}

}  // namespace laconic
