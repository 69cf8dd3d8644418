// A KeyStore whose keys only holders of a shared secret can write or find: elastic training's
// store (framework/elastic) when the replicas share a secret. Anyone who can write the store
// underneath (a shared folder, a redis server) could otherwise forge a quorum, an outcome or a
// peer's address, and pre-empt a set-once key of a round to come.
//
//   auto store = laconic::sign_store(laconic::KeyStore::open(spec), secret, &std::cerr);
//
// With Q the key as the store underneath names it ("ns.K" in namespace ns, else K), the tag of a
// value v is HMAC-SHA256(secret, Q || 0x00 || v) (RFC 2104 over FIPS 180-4) and:
//   - key K is stored as K + "." + the first 32 hex digits of HMAC-SHA256(secret, "name" || Q):
//     without the secret no one can tell where a key of a future round will be, nor pre-empt it;
//     binding Q binds the namespace, so a key copied from another run's namespace does not verify;
//   - its value is v followed by its tag as 64 lowercase hex digits. find() returns nothing for a
//     value that fails to verify (another tag, truncated, written without the secret) and says so
//     once per key in one log line; it never throws for it. create() and put() sign;
//     erase_prefix() removes the signed names (each starts with its key).
//   - gloo_store(prefix) (the peers' addresses of a gloo rendezvous) goes through put and find:
//     its keys are named and signed alike, and a peer's address that fails to verify counts as
//     absent (the connection times out and the round is retried).
// Keys hold no NUL byte, so the name's input ("name" || Q, no 0x00) never equals a value's.
// A value written by the secret's holders can still be replayed under its own key (the same
// bytes again); a writer without the secret can delete keys or make them unreadable, never make
// a forged one count.
#pragma once

#include <array>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "collectives/gloo/key_store.h"

namespace laconic {

using Digest = std::array<unsigned char, 32>;

// HMAC-SHA256 (RFC 2104, FIPS 180-4; OpenSSL's) under `key` (non-empty) of the concatenation of
// `message`'s parts, without copying them together.
Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> message);
std::string to_hex(const Digest& d);
// Whether a == b, in time independent of where they differ.
bool same_digest(const Digest& a, const Digest& b);
// The tag of `value` as key `q`: HMAC-SHA256(secret, q || 0x00 || value).
Digest value_tag(std::string_view secret, std::string_view q, std::string_view value);

// `base` with every key named and every value tagged under `secret` (non-empty), as above;
// `log` (may be null) gets the warnings.
std::unique_ptr<KeyStore> sign_store(std::unique_ptr<KeyStore> base, std::string secret, std::ostream* log);

}  // namespace laconic
