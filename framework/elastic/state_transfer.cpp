#include "framework/elastic/state_transfer.h"

#include "collectives/gloo/signed_store.h"
#include "core/check.h"

namespace laconic {

void send_state(Communicator& comm, std::string_view state, const std::string& secret, const std::string& name) {
  std::uint64_t bytes = state.size();
  comm.broadcast(&bytes, sizeof bytes, 0);
  comm.broadcast(const_cast<char*>(state.data()), state.size(), 0);  // the root only reads it
  if (secret.empty()) return;
  Digest tag = value_tag(secret, name, state);
  comm.broadcast(tag.data(), tag.size(), 0);
}

std::string receive_state(Communicator& comm, std::uint64_t max_bytes, const std::string& secret,
                          const std::string& name) {
  std::uint64_t bytes = 0;
  comm.broadcast(&bytes, sizeof bytes, 0);
  if (max_bytes > 0 && bytes > max_bytes)
    throw Error(detail::concat("elastic: the donor declared a state of ", bytes, " bytes, more than the ", max_bytes,
                               " a checkpoint of this run's model can hold; refused"));
  std::string state(bytes, '\0');
  comm.broadcast(state.data(), state.size(), 0);
  if (!secret.empty()) {
    Digest tag{};
    comm.broadcast(tag.data(), tag.size(), 0);
    if (!same_digest(tag, value_tag(secret, name, state)))
      throw Error(detail::concat("elastic: the state received (", bytes, " bytes) failed authentication: its HMAC ",
                                 "does not match (altered, or sent without the secret); refused"));
  }
  return state;
}

}  // namespace laconic
