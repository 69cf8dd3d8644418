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
  // A bare folder may not start with "scheme:" (letters then ':'): a mistyped scheme ("redi:host",
  // "bogus:x") would otherwise become a folder the store creates. Such a folder is "file:NAME".
  const auto colon = text.find(':');
  const bool schemed = colon != std::string::npos && colon > 0 &&
                       std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(colon),
                                   [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  LC_CHECK(!schemed || text.rfind("file:", 0) == 0, "store '", text, "': unknown scheme '", text.substr(0, colon),
           ":'; expected file:DIR, redis:HOST[:PORT] or a folder");
  s.path = text.rfind("file:", 0) == 0 ? rest("file:") : text;
  LC_CHECK(!s.path.empty(), "store '", text, "': expected file:DIR, redis:HOST[:PORT] or a folder");
  return s;
}

std::string StoreSpec::str() const {
  return (kind == Kind::file       ? "file:" + path
          : kind == Kind::external ? path
                                   : "redis:" + host + ":" + std::to_string(port)) +
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

// gloo's Store interface over a KeyStore, every key prefixed "prefix." (gloo's own PrefixStore
// joins with '/', which a file store would take for a folder; and its FileStore names files by a
// hash of the key, which erase_prefix could not find). gloo sets each key once and waits for it.
class OnKeyStore final : public gloo::rendezvous::Store {
 public:
  OnKeyStore(std::string prefix, KeyStore& base) : prefix_(std::move(prefix) + "."), base_(base) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    base_.put(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, kDefaultTimeout);
    const std::string v = base_.find(prefix_ + key).value_or("");
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const double seconds = std::chrono::duration<double>(timeout).count();
    for (const std::string& k : keys)
      if (!base_.wait(prefix_ + k, seconds))  // gloo's contexts give up on any exception
        throw Error(detail::concat("store ", base_.spec().str(), ": key '", prefix_ + k, "' did not appear within ",
                                   seconds, " s"));
  }

 private:
  std::string prefix_;
  KeyStore& base_;
};

// Each key a file of the folder, named as the key.
class FileKeyStore final : public KeyStore {
 public:
  explicit FileKeyStore(StoreSpec spec) : KeyStore(spec) { make_dir(spec.path); }

  bool create(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    // A store wiped while we create (its files removed, as redis FLUSHALL would empty it) can take
    // the temporary file from under the link: ENOENT, and the next try finds the folder empty.
    for (int attempt = 0;; ++attempt) {
      const std::string tmp = write_temporary(name, value);
      const int rc = ::link(tmp.c_str(), path(name).c_str());  // fails when the name exists: set-once
      const int err = errno;
      ::unlink(tmp.c_str());
      if (rc == 0) return true;
      if (err == ENOENT && attempt < 3) continue;
      LC_CHECK(err == EEXIST, "store ", spec().str(), ": cannot create key '", key, "': ", std::strerror(err));
      return false;
    }
  }

  std::optional<std::string> find(const std::string& key) override {
    std::ifstream in(path(stored(key)), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  void put(const std::string& key, const std::string& value) override {
    const std::string name = stored(key);
    for (int attempt = 0;; ++attempt) {  // a wiped store may take the temporary file: as create()
      const std::string tmp = write_temporary(name, value);
      const int rc = ::rename(tmp.c_str(), path(name).c_str());  // atomic: readers see old or new
      const int err = errno;
      if (rc == 0) return;
      ::unlink(tmp.c_str());
      if (err == ENOENT && attempt < 3) continue;
      throw Error(detail::concat("store ", spec().str(), ": cannot write key '", key, "': ", std::strerror(err)));
    }
  }

  void erase_prefix(const std::string& prefix) override {
    const std::string name = stored(prefix);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(spec().path, ec)) {
      const std::string file = e.path().filename().string();
      if (file.compare(0, name.size(), name) != 0) continue;
      LC_CHECK(::unlink(e.path().c_str()) == 0 || errno == ENOENT, "store ", spec().str(), ": cannot remove key '",
               file, "': ", std::strerror(errno));
    }
    LC_CHECK(!ec, "store ", spec().str(), ": cannot list the folder: ", ec.message());
  }

 private:
  std::string path(const std::string& name) const { return spec().path + "/" + name; }
  // The value in a file of its own beside the keys (hidden: no key starts with '.'), to be linked
  // or renamed into place.
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

  void erase_prefix(const std::string& prefix) override {
    // SCAN with a pattern: the names are letters, digits, '.', '-' and '_' (no glob characters).
    const std::string pattern = stored(prefix) + "*";
    std::string cursor = "0";
    do {
      auto* reply = gloo_.command("SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size());
      LC_CHECK(reply->type == REDIS_REPLY_ARRAY && reply->elements == 2, "store redis: unexpected SCAN reply");
      cursor.assign(reply->element[0]->str, reply->element[0]->len);
      for (std::size_t i = 0; i < reply->element[1]->elements; ++i) {
        const redisReply* k = reply->element[1]->element[i];
        freeReplyObject(gloo_.command("DEL %b", k->str, k->len));
      }
      freeReplyObject(reply);
    } while (cursor != "0");
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

std::unique_ptr<gloo::rendezvous::Store> KeyStore::gloo_store(const std::string& prefix) {
  return std::make_unique<OnKeyStore>(prefix, *this);
}

std::unique_ptr<KeyStore> KeyStore::open(const StoreSpec& spec) {
  LC_CHECK(spec.kind != StoreSpec::Kind::external, "store ", spec.str(), ": an external store is made by its caller");
  if (spec.kind == StoreSpec::Kind::redis) return std::make_unique<RedisKeyStore>(spec);
  return std::make_unique<FileKeyStore>(spec);
}

}  // namespace laconic
