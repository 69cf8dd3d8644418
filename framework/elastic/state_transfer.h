// The state a donor sends a joining replica (ElasticGroup::donate, join), over their gloo group:
//   u64 the state's byte count B | B bytes (the checkpoint directory, packed)
//   | with a secret: the 32-byte tag HMAC-SHA256(secret, name || 0x00 || bytes) (signed_store.h)
// where `name` is the state's own (the run's store namespace and the round), so a state sent in
// another run or round does not verify. The joiner refuses a count above what the run's model can
// hold before allocating anything, and a state whose tag does not verify before using it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "collectives/communicator.h"

namespace laconic {

// On rank 0 of comm (the donor).
void send_state(Communicator& comm, std::string_view state, const std::string& secret, const std::string& name);
// On every other rank: the state, after its count is checked against max_bytes (0: no bound) and,
// with a secret, its tag verified. Throws laconic::Error saying which failed.
std::string receive_state(Communicator& comm, std::uint64_t max_bytes, const std::string& secret,
                          const std::string& name);

}  // namespace laconic
