// The gloo backend: one rank per process (or thread), over gloo's TCP transport, its ranks found
// through a rendezvous store (collectives/gloo/key_store.h). It is the transport of elastic
// training (framework/elastic): a group of gloo ranks is cheap to form, so a changed membership
// is a new communicator under a new store prefix, as torchft re-forms its gloo process groups.
//
//   auto store = laconic::KeyStore::open(laconic::StoreSpec::parse("file:/shared/run/store"));
//   laconic::GlooCommunicator comm(*store, "group.0", rank, size, {.timeout_s = 30});
//   comm.all_reduce(grads, laconic::ReduceOp::avg);
//
// Collectives are ours (collectives/algorithms) over gloo's point-to-point exchange, so a result
// is bitwise the same as on the threads or MPI backend with the same algorithm, and every byte is
// counted exactly where it moves. Messages between a pair travel in order (each has its own gloo
// slot, numbered per direction).
//
// Streams: with GlooOptions::streams = k > 1 each pair of ranks holds k TCP connections (k gloo
// contexts on one device), and a message of at least split_bytes travels as k nearly equal
// pieces, one per connection, at once: on a long fat pipe one TCP connection is held to its
// window per round trip, k of them to k windows (as PCCL opens several connections per peer).
// Bytes and message counts are those of one stream (a message is counted once, whole), and a
// result is bitwise the same (the pieces land where one message would).
//
// Failure: connecting, and every send or receive, waits at most timeout_s; a peer that died
// (connection reset) or stalls makes the call throw laconic::Error naming this rank, the peer,
// the operation and the bytes, never a hang. The communicator is unusable afterwards: its owner
// forms a new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/gloo/key_store.h"

namespace gloo::transport {
class UnboundBuffer;
}

namespace laconic {

inline constexpr int kMaxStreams = 64;  // TCP connections per pair of ranks, at most

struct GlooOptions {
  double timeout_s = 60;              // connecting and every send/recv
  std::string address = "127.0.0.1";  // the address this rank listens on (another machine's
                                      // ranks must reach it)
  int streams = 1;                    // TCP connections per pair of ranks (1-64)
  std::size_t split_bytes = 64 * 1024;  // messages of at least this many bytes are split over them
};

class GlooCommunicator final : public Communicator {
 public:
  // Connects rank `rank` of `size` to the others through `store`, keys under "group.": every
  // rank of one group passes the same `group`, a new membership a new one. Throws laconic::Error
  // when the others do not all arrive within timeout_s.
  GlooCommunicator(KeyStore& store, const std::string& group, int rank, int size, GlooOptions opts = {});
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  int streams() const { return opts_.streams; }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data, std::size_t recv_bytes,
                   int from) override;

 private:
  struct Gloo;
  std::uint64_t slot(int from, int to, std::vector<std::uint64_t>& seq, int peer);
  // The connections a message of `bytes` travels on (1, or streams for a large one).
  int pieces(std::size_t bytes) const;
  // Posts the `pieces` pieces of one message (send or receive) on their connections.
  using Pieces = std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>>;
  Pieces post(bool send, void* data, std::size_t bytes, int peer, std::uint64_t slot);
  bool wait(Pieces& pieces, bool send);
  [[noreturn]] void fail(const char* what, int peer, std::size_t bytes, const std::string& why) const;
  template <typename F>
  void guarded(const char*& what, int& peer, std::size_t& bytes, F&& io);

  int rank_, size_;
  GlooOptions opts_;
  std::unique_ptr<Gloo> gloo_;
  std::vector<std::uint64_t> sent_, received_;  // messages so far, per peer
};

}  // namespace laconic
