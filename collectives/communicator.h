// The collective layer's one interface. A Communicator is one rank's handle on a group of
// `size()` ranks. Backends implement point-to-point exchange (and may override collectives with
// native ones); the base class implements collectives with the algorithm classes in
// collectives/algorithms/ over that point-to-point exchange, in a fixed reduction order so that
// results are deterministic and identical on every rank.
//
// Every byte a rank puts on the wire or takes off it is counted (bytes(), per rank, cumulative).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace laconic {

enum class ReduceOp { sum, avg, max };

struct ByteCounters {
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  std::uint64_t messages_sent = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // ---- point-to-point (counted) ----
  // Blocking send of `bytes` bytes to `peer`; messages between a pair are delivered in order.
  void send(const void* data, std::size_t bytes, int peer);
  // Blocking receive of exactly `bytes` bytes from `peer` (a size mismatch is an error).
  void recv(void* data, std::size_t bytes, int peer);
  // Sends to `to` and receives from `from` without deadlock (ring steps use this).
  void sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                std::size_t recv_bytes, int from);

  // ---- collectives (f32 for now; more dtypes come with the collective-layer issue) ----
  // In place; every rank ends with the same bits. Default: ring (reduce-scatter + all-gather).
  virtual void all_reduce(std::span<float> data, ReduceOp op);
  // Root's bytes copied to every rank. Default: binomial tree over point-to-point.
  virtual void broadcast(void* data, std::size_t bytes, int root);
  // Returns when every rank has entered. Default: dissemination over point-to-point.
  virtual void barrier();

  ByteCounters bytes() const { return counters_; }

 protected:
  // Backends move bytes; the public wrappers above count them.
  virtual void do_send(const void* data, std::size_t bytes, int peer) = 0;
  virtual void do_recv(void* data, std::size_t bytes, int peer) = 0;
  virtual void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                           std::size_t recv_bytes, int from) = 0;
  // Native collectives that bypass send()/recv() add their traffic here.
  void count(std::uint64_t sent, std::uint64_t recv, std::uint64_t messages) {
    counters_.sent += sent;
    counters_.recv += recv;
    counters_.messages_sent += messages;
  }

 private:
  ByteCounters counters_;
  // The ring all-reduce's receive buffer (one chunk), kept so repeated all-reduces allocate nothing.
  std::vector<float> reduce_scratch_;
};

}  // namespace laconic
