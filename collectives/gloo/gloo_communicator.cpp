#include "collectives/gloo/gloo_communicator.h"

#include <chrono>
#include <exception>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "core/check.h"

namespace laconic {

struct GlooCommunicator::Gloo {
  std::shared_ptr<gloo::transport::Device> device;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts;  // one per stream
  std::chrono::milliseconds timeout;
};

GlooCommunicator::GlooCommunicator(KeyStore& store, const std::string& group, int rank, int size, GlooOptions opts)
    : rank_(rank), size_(size), opts_(std::move(opts)), gloo_(std::make_unique<Gloo>()),
      sent_(static_cast<std::size_t>(size), 0), received_(static_cast<std::size_t>(size), 0) {
  LC_CHECK(size >= 1 && rank >= 0 && rank < size, "gloo: rank ", rank, " of a group of ", size);
  LC_CHECK(opts_.timeout_s > 0, "gloo: timeout_s ", opts_.timeout_s);
  LC_CHECK(opts_.streams >= 1 && opts_.streams <= kMaxStreams, "gloo: streams ", opts_.streams, ", expected 1-",
           kMaxStreams);
  LC_CHECK(opts_.split_bytes >= 1, "gloo: split_bytes 0");
  gloo_->timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opts_.timeout_s * 1000));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = opts_.address;
    gloo_->device = gloo::transport::tcp::CreateDevice(attr);
    for (int s = 0; s < opts_.streams; ++s) {  // stream 0 under the group's own keys, as with one
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context->setTimeout(gloo_->timeout);
      auto prefixed = store.gloo_store(s == 0 ? group : group + ".stream" + std::to_string(s));
      context->connectFullMesh(*prefixed, gloo_->device);
      gloo_->contexts.push_back(std::move(context));
    }
    // Every rank has finished connecting before any returns: a rank that returns and exits at once
    // (a run found finished) would otherwise close a pair a slower peer is still setting up.
    // gloo's own barrier, outside this communicator's byte counts.
    gloo::BarrierOptions barrier(gloo_->contexts.front());
    barrier.setTimeout(gloo_->timeout);
    gloo::barrier(barrier);
  } catch (const std::exception& e) {
    throw Error("gloo: rank " + std::to_string(rank) + " of " + std::to_string(size) + " in group '" + group +
                "' (store " + store.spec().str() + ") could not connect within " + std::to_string(opts_.timeout_s) +
                " s: " + e.what());
  }
}

GlooCommunicator::~GlooCommunicator() { stop_async(); }

std::uint64_t GlooCommunicator::slot(int from, int to, std::vector<std::uint64_t>& seq, int peer) {
  // Message k from `from` to `to`: slot 2k, +1 when the sender has the higher rank, so the two
  // directions of a pair never share a slot and both ends count the same k.
  return 2 * seq[static_cast<std::size_t>(peer)]++ + (from > to ? 1 : 0);
}

int GlooCommunicator::pieces(std::size_t bytes) const {
  return bytes >= opts_.split_bytes && bytes >= static_cast<std::size_t>(opts_.streams) ? opts_.streams : 1;
}

// Piece s of k: bytes [s·n/k, (s+1)·n/k), on connection s; every piece of one message in the
// same slot (each connection numbers its own).
GlooCommunicator::Pieces GlooCommunicator::post(bool send, void* data, std::size_t bytes, int peer,
                                                std::uint64_t slot) {
  const int k = pieces(bytes);
  Pieces out;
  out.reserve(static_cast<std::size_t>(k));
  for (int s = 0; s < k; ++s) {
    const std::size_t begin = bytes * static_cast<std::size_t>(s) / static_cast<std::size_t>(k);
    const std::size_t end = bytes * static_cast<std::size_t>(s + 1) / static_cast<std::size_t>(k);
    auto b = gloo_->contexts[static_cast<std::size_t>(s)]->createUnboundBuffer(static_cast<char*>(data) + begin,
                                                                                end - begin);
    if (send)
      b->send(peer, slot);
    else
      b->recv(peer, slot);
    out.push_back(std::move(b));
  }
  return out;
}

bool GlooCommunicator::wait(Pieces& pieces, bool send) {
  for (auto& b : pieces)
    if (!(send ? b->waitSend(gloo_->timeout) : b->waitRecv(gloo_->timeout))) return false;
  return true;
}

void GlooCommunicator::fail(const char* what, int peer, std::size_t bytes, const std::string& why) const {
  throw Error("gloo: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + what + " of " +
              std::to_string(bytes) + " bytes " + (what[0] == 's' ? "to" : "from") + " rank " + std::to_string(peer) +
              " failed: " + why);
}

// Runs `io`, turning gloo's exceptions (a reset connection, a timeout) into laconic::Error
// naming the operation, the peer and the bytes. `what` and `peer` say where `io` is.
template <typename F>
void GlooCommunicator::guarded(const char*& what, int& peer, std::size_t& bytes, F&& io) {
  try {
    io();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, peer, bytes, e.what());
  }
}

void GlooCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  if (bytes == 0) return;
  const char* what = "send";
  guarded(what, peer, bytes, [&] {
    Pieces out = post(true, const_cast<void*>(data), bytes, peer, slot(rank_, peer, sent_, peer));
    if (!wait(out, true)) fail(what, peer, bytes, "aborted");
  });
}

void GlooCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  if (bytes == 0) return;
  const char* what = "recv";
  guarded(what, peer, bytes, [&] {
    Pieces in = post(false, data, bytes, peer, slot(peer, rank_, received_, peer));
    if (!wait(in, false)) fail(what, peer, bytes, "aborted");
  });
}

void GlooCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                   std::size_t recv_bytes, int from) {
  const char* what = "recv";
  int peer = from;
  std::size_t bytes = recv_bytes;
  guarded(what, peer, bytes, [&] {
    Pieces in, out;
    if (recv_bytes > 0)  // posted first, so the peer's send always finds it
      in = post(false, recv_data, recv_bytes, from, slot(from, rank_, received_, from));
    if (send_bytes > 0) {
      what = "send", peer = to, bytes = send_bytes;
      out = post(true, const_cast<void*>(send_data), send_bytes, to, slot(rank_, to, sent_, to));
      if (!wait(out, true)) fail(what, peer, bytes, "aborted");
    }
    if (!in.empty()) {
      what = "recv", peer = from, bytes = recv_bytes;
      if (!wait(in, false)) fail(what, peer, bytes, "aborted");
    }
  });
}

}  // namespace laconic
