#include "collectives/gloo/signed_store.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <set>

#include "core/check.h"

namespace laconic {

Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> message) {
  LC_CHECK(!key.empty(), "hmac: an empty key");
  struct Free {
    void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
    void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
  };
  const std::unique_ptr<EVP_MAC, Free> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  const std::unique_ptr<EVP_MAC_CTX, Free> ctx(mac ? EVP_MAC_CTX_new(mac.get()) : nullptr);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  bool ok = ctx && EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) == 1;
  for (std::string_view part : message)
    ok = ok && EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(part.data()), part.size()) == 1;
  Digest d{};
  std::size_t n = 0;
  ok = ok && EVP_MAC_final(ctx.get(), d.data(), &n, d.size()) == 1 && n == d.size();
  LC_CHECK(ok, "hmac: OpenSSL's HMAC-SHA256 failed");
  return d;
}

std::string to_hex(const Digest& d) {
  static const char digits[] = "0123456789abcdef";
  std::string s(2 * d.size(), '0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}

bool same_digest(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

Digest value_tag(std::string_view secret, std::string_view q, std::string_view value) {
  return hmac_sha256(secret, {q, std::string_view("\0", 1), value});
}

namespace {

constexpr std::size_t kTagHex = 64;   // a value's tag: all of the HMAC, in hex
constexpr std::size_t kNameHex = 32;  // a name's: its first 128 bits

std::string tag(const std::string& secret, std::string_view q, std::string_view value) {
  return to_hex(value_tag(secret, q, value));
}

std::string sign(const std::string& secret, std::string_view q, std::string_view value) {
  std::string out;
  out.reserve(value.size() + kTagHex);
  out.append(value).append(tag(secret, q, value));
  return out;
}

// The value of a signed one when its tag verifies.
std::optional<std::string_view> verify(const std::string& secret, std::string_view q, std::string_view stored) {
  if (stored.size() < kTagHex) return std::nullopt;
  const std::string_view value = stored.substr(0, stored.size() - kTagHex);
  const std::string want = tag(secret, q, value);
  if (CRYPTO_memcmp(want.data(), stored.data() + value.size(), kTagHex) != 0) return std::nullopt;
  return value;
}

class SignedStore final : public KeyStore {
 public:
  SignedStore(std::unique_ptr<KeyStore> base, std::string secret, std::ostream* log)
      : KeyStore(base->spec()), base_(std::move(base)), secret_(std::move(secret)), log_(log) {
    LC_CHECK(!secret_.empty(), "signed store: an empty secret");
  }

  bool create(const std::string& key, const std::string& value) override {
    return base_->create(name(key), sign(secret_, stored(key), value));
  }

  std::optional<std::string> find(const std::string& key) override {
    const std::optional<std::string> s = base_->find(name(key));
    if (!s) return std::nullopt;
    if (const auto v = verify(secret_, stored(key), *s)) return std::string(*v);
    if (log_ && warned_.insert(key).second)
      *log_ << "laconic: elastic: store key '" << key << "' failed authentication; ignored" << std::endl;
    return std::nullopt;
  }

  void put(const std::string& key, const std::string& value) override {
    base_->put(name(key), sign(secret_, stored(key), value));
  }

  // A signed name starts with its key: the prefix finds them as it would the plain names.
  void erase_prefix(const std::string& prefix) override { base_->erase_prefix(prefix); }

 private:
  // Where the store underneath keeps `key`.
  std::string name(const std::string& key) const {
    LC_CHECK(key.find('\0') == std::string::npos, "store key '", key, "': expected a name without NUL");
    return key + "." + to_hex(hmac_sha256(secret_, {"name", stored(key)})).substr(0, kNameHex);
  }

  std::unique_ptr<KeyStore> base_;
  std::string secret_;
  std::ostream* log_;
  std::set<std::string> warned_;  // the keys whose failure was said
};

}  // namespace

std::unique_ptr<KeyStore> sign_store(std::unique_ptr<KeyStore> base, std::string secret, std::ostream* log) {
  return std::make_unique<SignedStore>(std::move(base), std::move(secret), log);
}

}  // namespace laconic
