// collbench: collective benchmark in the style of nccl-tests (its output format is the model).
//
//   collbench -b 8 -e 256M -f 2 --op allreduce --backend threads -n 4 --dtype f32
//   mpirun -np 4 collbench --backend mpi --algo native -b 1M -e 64M
//
// One row per size: size (B), count (elements), type, redop, root, time (us), algbw, busbw (GB/s),
// #wrong. Definitions (nccl-tests, doc/PERFORMANCE.md; docs/references.md "Collectives"):
//   time  = max over ranks of the mean time of one collective over --iters back-to-back calls
//           (after --warmup untimed calls and a barrier)
//   algbw = S / time, S = the row's size in bytes (the whole buffer: all-reduce/reduce/broadcast
//           the data, reduce-scatter the send buffer, all-gather the receive buffer, all-to-all
//           one rank's send buffer)
//   busbw = algbw * factor, the bandwidth a link must carry, comparable across ops and N:
//           all-reduce 2(n-1)/n (reduce-scatter + all-gather each move (n-1)/n of S);
//           reduce-scatter, all-gather, all-to-all (n-1)/n (each rank receives all but its own
//           block); broadcast and reduce 1 (the root's S must cross some link once).
// #wrong: after the timed calls the inputs are re-initialized, one more collective runs, and
// every element on every rank is compared with the closed-form expected result (summed over
// ranks). Inputs are small integers, v(r, i) = ((i + s*r) mod P) - K (u8: without -K), distinct
// across ranks at every index (s coprime to P >= n) and K chosen so that every partial sum stays
// exactly representable in bf16 (|sum| <= 8 significant bits) for n <= 22 (f16: n <= 64), so the
// expected value does not depend on the reduction order.
//
// Backends: threads (run_threads, n ranks in this process); mpi (MpiCommunicator, one rank per
// process under mpirun; --algo native = the MPI library's collectives through our wrapper, any
// other = our algorithms over MPI point-to-point); mpi_c (the MPI C API called directly,
// MPI_Allreduce etc. on MPI_COMM_WORLD, no wrapper: the OpenMPI reference the targets are stated
// against; f32/i32/u8 only); gloo (GlooCommunicator, one rank per process, --streams TCP
// connections per pair).
//
// Exit codes: 0 success (also when a row is "not available"), 2 bad flags (one-line message),
// 1 failure.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/dtype.h"
#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/key_store.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/launcher.h"
#ifdef LACONIC_HAVE_MPI
#include <mpi.h>

#include "collectives/mpi/mpi_communicator.h"
#endif

namespace laconic {
namespace {

constexpr int kInputError = 2;

enum class Op { allreduce, reduce, reduce_scatter, allgather, alltoall, broadcast };
enum class Backend { threads, mpi, mpi_c, gloo };

template <class E>
struct Choice {
  const char* name;
  E value;
};
constexpr Choice<Op> kOps[] = {{"allreduce", Op::allreduce},   {"reduce", Op::reduce},
                               {"reduce_scatter", Op::reduce_scatter}, {"allgather", Op::allgather},
                               {"alltoall", Op::alltoall},     {"broadcast", Op::broadcast}};
constexpr Choice<Backend> kBackends[] = {{"threads", Backend::threads}, {"mpi", Backend::mpi}, {"mpi_c", Backend::mpi_c}, {"gloo", Backend::gloo}};
constexpr Choice<Algorithm> kAlgos[] = {{"ring", Algorithm::ring},
                                        {"recursive_doubling", Algorithm::recursive_doubling},
                                        {"rabenseifner", Algorithm::rabenseifner},
                                        {"hierarchical", Algorithm::hierarchical},
                                        {"native", Algorithm::native},
                                        {"auto", Algorithm::auto_}};
constexpr Choice<DType> kDTypes[] = {{"f32", DType::f32}, {"bf16", DType::bf16}, {"f16", DType::f16},
                                     {"i32", DType::i32}, {"u8", DType::u8}};
constexpr Choice<ReduceOp> kRedOps[] = {{"sum", ReduceOp::sum}, {"avg", ReduceOp::avg}, {"max", ReduceOp::max}};

template <class E, std::size_t N>
E pick(const Choice<E> (&choices)[N], const std::string& flag, const std::string& s) {
  std::string names;
  for (const auto& c : choices) {
    if (s == c.name) return c.value;
    names += names.empty() ? c.name : std::string("|") + c.name;
  }
  LC_INPUT_ERROR(flag, ": '", s, "' is not one of ", names);
}

template <class E, std::size_t N>
const char* name_in(const Choice<E> (&choices)[N], E v) {
  for (const auto& c : choices)
    if (c.value == v) return c.name;
  return "?";
}

// "8", "64K", "256M", "1G" (binary multiples) -> bytes.
std::size_t parse_size(const std::string& flag, const std::string& s) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    LC_INPUT_ERROR(flag, ": '", s, "' is not a size (e.g. 8, 64K, 256M, 1G)");
  }
  const std::string unit = s.substr(used);
  int shift = 0;
  if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "m") shift = 20;
  else if (unit == "G" || unit == "g") shift = 30;
  else if (!unit.empty()) LC_INPUT_ERROR(flag, ": '", s, "' is not a size (e.g. 8, 64K, 256M, 1G)");
  if (v > (1ULL << 40) >> shift) LC_INPUT_ERROR(flag, ": '", s, "' is larger than 1 TiB");
  return static_cast<std::size_t>(v << shift);
}

struct Config {
  std::size_t min_bytes = 8, max_bytes = 256 << 20;
  std::size_t factor = 2;
  Op op = Op::allreduce;
  Backend backend = Backend::threads;
  int streams = 1;  // gloo: TCP connections per pair
  std::optional<Algorithm> algo;  // unset: the backend's default (threads ring, MPI native)
  int n = 2;
  bool n_given = false;
  DType dtype = DType::f32;
  ReduceOp redop = ReduceOp::sum;
  int root = 0;
  int iters = 20, warmup = 5;
  double spin_us = ThreadsOptions{}.spin_s * 1e6;
  bool bind = false;
};

double busbw_factor(Op op, int n) {
  const double dn = n;
  switch (op) {
    case Op::allreduce: return 2 * (dn - 1) / dn;
    case Op::reduce_scatter:
    case Op::allgather:
    case Op::alltoall: return (dn - 1) / dn;
    case Op::reduce:
    case Op::broadcast: return 1;
  }
  return 1;
}

bool is_reduction(Op op) { return op == Op::allreduce || op == Op::reduce || op == Op::reduce_scatter; }
bool has_root(Op op) { return op == Op::reduce || op == Op::broadcast; }
bool is_blocked(Op op) { return op == Op::reduce_scatter || op == Op::allgather || op == Op::alltoall; }

// ---- element values (see the header comment) ----

// Encodes/decodes an exact small integer (or an avg result) in dtype T.
template <class T>
struct Elem;
template <>
struct Elem<float> {
  static float from_int(std::int64_t v) { return static_cast<float>(v); }
  static double value(float x) { return x; }
  static float avg(std::int64_t sum, int n) { return static_cast<float>(sum) / static_cast<float>(n); }
};
template <>
struct Elem<bf16> {
  static bf16 from_int(std::int64_t v) { return to_bf16(static_cast<float>(v)); }
  static double value(bf16 x) { return from_bf16(x); }
  static bf16 avg(std::int64_t sum, int n) { return to_bf16(static_cast<float>(sum) / static_cast<float>(n)); }
};
template <>
struct Elem<f16> {
  static f16 from_int(std::int64_t v) { return to_f16(static_cast<float>(v)); }
  static double value(f16 x) { return from_f16(x); }
  static f16 avg(std::int64_t sum, int n) { return to_f16(static_cast<float>(sum) / static_cast<float>(n)); }
};
template <>
struct Elem<std::int32_t> {
  static std::int32_t from_int(std::int64_t v) { return static_cast<std::int32_t>(v); }
  static double value(std::int32_t x) { return x; }
  static std::int32_t avg(std::int64_t sum, int n) { return static_cast<std::int32_t>(sum / n); }  // truncates, as finish_avg
};
template <>
struct Elem<std::uint8_t> {
  // Sums wrap modulo 256 (as reduce_into does), so encode modulo 256.
  static std::uint8_t from_int(std::int64_t v) { return static_cast<std::uint8_t>(v & 0xff); }
  static double value(std::uint8_t x) { return x; }
  static std::uint8_t avg(std::int64_t sum, int n) { return static_cast<std::uint8_t>((sum & 0xff) / n); }
};

// v(r, i) = ((i + s*r) mod P) - K, and the reduction over ranks of index class i mod P.
class Pattern {
 public:
  Pattern(int n, DType t) : n_(n) {
    k_ = std::max<std::int64_t>((n + 1) / 2, 120 / n);
    p_ = 2 * k_ + 1;
    for (std::int64_t s : {7, 11, 13, 17, 19, 23})
      if (p_ % s != 0) {
        s_ = s;
        break;
      }
    if (t == DType::u8) k_ = 0;  // unsigned: values 0 .. P-1 (P <= 241)
  }
  std::int64_t p() const { return p_; }
  // Phase of element i of rank r: v = phase - K; consecutive elements step the phase by one.
  std::int64_t phase(int r, std::size_t i) const {
    return static_cast<std::int64_t>((i + static_cast<std::size_t>(s_ * r)) % static_cast<std::size_t>(p_));
  }
  std::int64_t value_at_phase(std::int64_t ph) const { return ph - k_; }
  // Over all ranks, for an index whose rank-0 phase is ph: the sum, and the max.
  std::int64_t sum(std::int64_t ph) const {
    std::int64_t acc = 0;
    for (int r = 0; r < n_; ++r) acc += (ph + s_ * r) % p_ - k_;
    return acc;
  }
  std::int64_t max(std::int64_t ph) const {
    std::int64_t m = INT64_MIN;
    for (int r = 0; r < n_; ++r) m = std::max(m, (ph + s_ * r) % p_ - k_);
    return m;
  }

 private:
  int n_;
  std::int64_t k_ = 0, p_ = 1, s_ = 1;
};

// Fills out[0..len) with v(rank, first .. first+len).
template <class T>
void fill(T* out, std::size_t len, const Pattern& pat, int rank, std::size_t first) {
  std::int64_t ph = pat.phase(rank, first);
  for (std::size_t e = 0; e < len; ++e) {
    out[e] = Elem<T>::from_int(pat.value_at_phase(ph));
    if (++ph == pat.p()) ph = 0;
  }
}

// Counts elements of got[0..len) that differ from table[phase of (rank, first + e)].
template <class T>
std::int64_t count_wrong(const T* got, std::size_t len, const std::vector<T>& table, const Pattern& pat, int rank,
                         std::size_t first) {
  std::int64_t wrong = 0;
  std::int64_t ph = pat.phase(rank, first);
  for (std::size_t e = 0; e < len; ++e) {
    if (!(Elem<T>::value(got[e]) == Elem<T>::value(table[static_cast<std::size_t>(ph)]))) ++wrong;
    if (++ph == pat.p()) ph = 0;
  }
  return wrong;
}

// ---- one rank's part of one row ----

struct Timing {
  double mean_s = 0;
  std::int64_t wrong = 0;
};

template <class T>
class Case {
 public:
  Case(const Config& cfg, Communicator& comm, std::size_t count)
      : cfg_(cfg), comm_(comm), n_(comm.size()), rank_(comm.rank()), count_(count),
        block_(is_blocked(cfg.op) ? count / static_cast<std::size_t>(n_) : 0), pat_(n_, dtype_of<T>()) {
    std::size_t send = 0, recv = 0;
    switch (cfg.op) {
      case Op::allreduce:
      case Op::reduce:
      case Op::broadcast: recv = count; break;  // in place
      case Op::reduce_scatter: send = count, recv = block_; break;
      case Op::allgather: send = block_, recv = count; break;
      case Op::alltoall: send = recv = count; break;
    }
    send_.resize(send);
    recv_.resize(recv);
    table_.resize(static_cast<std::size_t>(pat_.p()));
    for (std::int64_t ph = 0; ph < pat_.p(); ++ph) table_[static_cast<std::size_t>(ph)] = expected_at(ph);
  }

  Timing run() {
    init();
    for (int i = 0; i < cfg_.warmup; ++i) once();
    comm_.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < cfg_.iters; ++i) once();
    const auto t1 = std::chrono::steady_clock::now();
    Timing t;
    t.mean_s = std::chrono::duration<double>(t1 - t0).count() / std::max(1, cfg_.iters);
    init();
    once();
    t.wrong = wrong();
    return t;
  }

 private:
  // What an element whose rank-0 phase is ph must hold after a reduction (or a broadcast).
  T expected_at(std::int64_t ph) const {
    if (cfg_.op == Op::broadcast) return Elem<T>::from_int(pat_.value_at_phase((ph + pat_.phase(cfg_.root, 0)) % pat_.p()));
    switch (cfg_.redop) {
      case ReduceOp::sum: return Elem<T>::from_int(pat_.sum(ph));
      case ReduceOp::avg: return Elem<T>::avg(pat_.sum(ph), n_);
      case ReduceOp::max: return Elem<T>::from_int(pat_.max(ph));
    }
    return T{};
  }

  void init() {
    switch (cfg_.op) {
      case Op::allreduce:
      case Op::reduce:
      case Op::broadcast: fill(recv_.data(), count_, pat_, rank_, 0); break;
      case Op::reduce_scatter:
      case Op::alltoall: fill(send_.data(), count_, pat_, rank_, 0); break;
      case Op::allgather: fill(send_.data(), block_, pat_, rank_, static_cast<std::size_t>(rank_) * block_); break;
    }
    if (cfg_.op == Op::allgather || cfg_.op == Op::alltoall || cfg_.op == Op::reduce_scatter)
      std::fill(recv_.begin(), recv_.end(), Elem<T>::from_int(-1));  // stale values must not pass
  }

  std::int64_t wrong() const {
    const T* got = recv_.data();
    const auto n = static_cast<std::size_t>(n_), r = static_cast<std::size_t>(rank_);
    switch (cfg_.op) {
      case Op::allreduce: return count_wrong(got, count_, table_, pat_, 0, 0);
      case Op::broadcast: return count_wrong(got, count_, table_, pat_, 0, 0);
      case Op::reduce: {
        if (rank_ == cfg_.root) return count_wrong(got, count_, table_, pat_, 0, 0);
        std::vector<T> mine(count_);  // non-roots: unchanged
        fill(mine.data(), count_, pat_, rank_, 0);
        std::int64_t w = 0;
        for (std::size_t i = 0; i < count_; ++i) w += !(Elem<T>::value(got[i]) == Elem<T>::value(mine[i]));
        return w;
      }
      case Op::reduce_scatter: return count_wrong(got, block_, table_, pat_, 0, r * block_);
      case Op::allgather:
      case Op::alltoall: {
        // Block j holds rank j's values: allgather of indices j*block.., alltoall of r*block...
        std::vector<T> want(block_);
        std::int64_t w = 0;
        for (std::size_t j = 0; j < n; ++j) {
          fill(want.data(), block_, pat_, static_cast<int>(j), (cfg_.op == Op::allgather ? j : r) * block_);
          for (std::size_t e = 0; e < block_; ++e)
            w += !(Elem<T>::value(got[j * block_ + e]) == Elem<T>::value(want[e]));
        }
        return w;
      }
    }
    return 0;
  }

  void once() {
    if (cfg_.backend == Backend::mpi_c) return once_mpi_c();
    const DType t = dtype_of<T>();
    const Buf data{recv_.data(), recv_.size(), t};
    const CBuf send{send_.data(), send_.size(), t};
    switch (cfg_.op) {
      case Op::allreduce: comm_.all_reduce(data, cfg_.redop); return;
      case Op::reduce: comm_.reduce(data, cfg_.redop, cfg_.root); return;
      case Op::reduce_scatter: comm_.reduce_scatter(send, data, cfg_.redop); return;
      case Op::allgather: comm_.all_gather(send, data); return;
      case Op::alltoall: comm_.all_to_all(send, data); return;
      case Op::broadcast: comm_.broadcast(data, cfg_.root); return;
    }
  }

  // The MPI C API directly, on MPI_COMM_WORLD: the reference (avg = sum, then divided, as the
  // wrapper does it).
  void once_mpi_c() {
#ifdef LACONIC_HAVE_MPI
    MPI_Datatype type = MPI_DATATYPE_NULL;
    if constexpr (std::is_same_v<T, float>) type = MPI_FLOAT;
    else if constexpr (std::is_same_v<T, std::int32_t>) type = MPI_INT32_T;
    else if constexpr (std::is_same_v<T, std::uint8_t>) type = MPI_UINT8_T;
    else LC_CHECK(false, "mpi_c: ", name_of(dtype_of<T>()), " is not available (f32, i32 and u8 only)");
    const MPI_Op op = cfg_.redop == ReduceOp::max ? MPI_MAX : MPI_SUM;
    LC_CHECK(count_ <= static_cast<std::size_t>(INT_MAX), "mpi_c: count ", count_, " is not available (> INT_MAX)");
    const int c = static_cast<int>(count_), b = static_cast<int>(block_);
    int rc = MPI_SUCCESS;
    switch (cfg_.op) {
      case Op::allreduce: rc = MPI_Allreduce(MPI_IN_PLACE, recv_.data(), c, type, op, MPI_COMM_WORLD); break;
      case Op::reduce:
        rc = rank_ == cfg_.root ? MPI_Reduce(MPI_IN_PLACE, recv_.data(), c, type, op, cfg_.root, MPI_COMM_WORLD)
                                : MPI_Reduce(recv_.data(), nullptr, c, type, op, cfg_.root, MPI_COMM_WORLD);
        break;
      case Op::reduce_scatter:
        rc = MPI_Reduce_scatter_block(send_.data(), recv_.data(), b, type, op, MPI_COMM_WORLD);
        break;
      case Op::allgather: rc = MPI_Allgather(send_.data(), b, type, recv_.data(), b, type, MPI_COMM_WORLD); break;
      case Op::alltoall: rc = MPI_Alltoall(send_.data(), b, type, recv_.data(), b, type, MPI_COMM_WORLD); break;
      case Op::broadcast: rc = MPI_Bcast(recv_.data(), c, type, cfg_.root, MPI_COMM_WORLD); break;
    }
    LC_CHECK(rc == MPI_SUCCESS, "mpi_c: MPI error ", rc);
    if (cfg_.redop == ReduceOp::avg && is_reduction(cfg_.op) && (cfg_.op != Op::reduce || rank_ == cfg_.root))
      finish_avg(recv_.data(), recv_.size(), dtype_of<T>(), n_);
#else
    LC_CHECK(false, "mpi_c: this build has no MPI");
#endif
  }

  const Config& cfg_;
  Communicator& comm_;
  int n_, rank_;
  std::size_t count_, block_;
  Pattern pat_;
  std::vector<T> send_, recv_, table_;
};

// Runs one row on this rank and combines over ranks: the max mean time, the total #wrong.
Timing run_row(const Config& cfg, Communicator& comm, std::size_t count) {
  if (cfg.algo) comm.set_algorithm(*cfg.algo);
  Timing t;
  switch (cfg.dtype) {
    case DType::f32: t = Case<float>(cfg, comm, count).run(); break;
    case DType::bf16: t = Case<bf16>(cfg, comm, count).run(); break;
    case DType::f16: t = Case<f16>(cfg, comm, count).run(); break;
    case DType::i32: t = Case<std::int32_t>(cfg, comm, count).run(); break;
    case DType::u8: t = Case<std::uint8_t>(cfg, comm, count).run(); break;
  }
  // The combining calls use the backend's own all-reduce, whatever --algo is being measured.
  comm.set_algorithm(Algorithm::native);
  float time_us = static_cast<float>(t.mean_s * 1e6);
  comm.all_reduce(Buf{&time_us, 1, DType::f32}, ReduceOp::max);
  std::int32_t wrong = static_cast<std::int32_t>(std::min<std::int64_t>(t.wrong, INT32_MAX / 1024));
  comm.all_reduce(Buf{&wrong, 1, DType::i32}, ReduceOp::sum);
  return {time_us * 1e-6, wrong};
}

// ---- output ----

class Table {
 public:
  Table(const Config& cfg, int n) : cfg_(cfg), n_(n) {}

  void header(const std::string& backend_desc) const {
    std::printf("# collbench: %s, %s backend, algorithm %s, %d ranks, %s, redop %s, %d iterations (%d warm-up)\n",
                name_in(kOps, cfg_.op), backend_desc.c_str(),
                cfg_.backend == Backend::mpi_c ? "MPI C API" : cfg_.algo ? name_of(*cfg_.algo) : "default", n_,
                name_of(cfg_.dtype), is_reduction(cfg_.op) ? name_of(cfg_.redop) : "none", cfg_.iters, cfg_.warmup);
    std::printf("# busbw = algbw * %.4f (%s)\n", busbw_factor(cfg_.op, n_),
                cfg_.op == Op::allreduce                    ? "2(n-1)/n"
                : has_root(cfg_.op) ? "1"
                                                            : "(n-1)/n");
  }

  void memcpy_line(std::size_t bytes, double gbps) const {
    std::printf("# memcpy, 1 core, %zu B: %.2f GB/s (the reference for busbw targets)\n", bytes, gbps);
  }

  void columns() const {
    std::printf("#\n# %12s %12s %6s %6s %5s %11s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "time",
                "algbw", "busbw", "#wrong");
    std::printf("# %12s %12s %6s %6s %5s %11s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  }

  void row(std::size_t bytes, std::size_t count, const Timing& t) {
    const double algbw = t.mean_s > 0 ? static_cast<double>(bytes) / t.mean_s * 1e-9 : 0;
    const double busbw = algbw * busbw_factor(cfg_.op, n_);
    std::printf("  %12zu %12zu %6s %6s %5s %11.2f %8.3f %8.3f %7lld\n", bytes, count, name_of(cfg_.dtype), redop(),
                root(), t.mean_s * 1e6, algbw, busbw, static_cast<long long>(t.wrong));
    std::fflush(stdout);
    busbw_sum_ += busbw;
    ++rows_;
    wrong_ += t.wrong;
  }

  void failed_row(std::size_t bytes, std::size_t count, const std::string& what) {
    std::printf("  %12zu %12zu %6s %6s %5s  not available: %s\n", bytes, count, name_of(cfg_.dtype), redop(), root(),
                what.c_str());
    std::fflush(stdout);
    ++failed_;
  }

  void footer() const {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_), wrong_ ? "ERROR" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f GB/s (%d rows, %d not available)\n#\n",
                rows_ ? busbw_sum_ / rows_ : 0.0, rows_, failed_);
  }
  std::int64_t wrong() const { return wrong_; }

 private:
  const char* redop() const { return is_reduction(cfg_.op) ? name_of(cfg_.redop) : "none"; }
  const char* root() const {
    if (!has_root(cfg_.op)) return "-1";
    root_text_ = std::to_string(cfg_.root);
    return root_text_.c_str();
  }

  const Config& cfg_;
  int n_;
  double busbw_sum_ = 0;
  int rows_ = 0, failed_ = 0;
  std::int64_t wrong_ = 0;
  mutable std::string root_text_;
};

// Elements for a row of `bytes`: whole elements, and a multiple of n for the blocked ops.
std::size_t count_for(const Config& cfg, std::size_t bytes, int n) {
  std::size_t count = bytes / dtype_size(cfg.dtype);
  if (is_blocked(cfg.op)) count -= count % static_cast<std::size_t>(n);
  return count;
}

// Single-core memcpy bandwidth for `bytes` (bytes copied per second): best of a few repetitions.
double memcpy_gbps(std::size_t bytes) {
  if (bytes == 0) return 0;
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{2});
  std::memcpy(dst.data(), src.data(), bytes);  // fault in and warm up
  const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 30) / bytes, 3, 50));
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  if (dst[bytes / 2] != std::byte{1}) std::abort();  // keeps the copies observable
  return static_cast<double>(bytes) / best * 1e-9;
}

std::vector<std::size_t> sizes(const Config& cfg) {
  std::vector<std::size_t> out;
  for (std::size_t b = cfg.min_bytes; b <= cfg.max_bytes; b *= cfg.factor) {
    out.push_back(b);
    if (b > cfg.max_bytes / cfg.factor) break;
  }
  return out;
}

int run_threads_backend(const Config& cfg) {
  Table table(cfg, cfg.n);
  table.header(cfg.bind ? "threads (ranks bound to CPUs)" : "threads");
  table.memcpy_line(cfg.max_bytes, memcpy_gbps(cfg.max_bytes));
  table.columns();
  ThreadsOptions opts;
  opts.spin_s = cfg.spin_us * 1e-6;
  opts.bind_cores = cfg.bind;
  for (std::size_t bytes : sizes(cfg)) {
    const std::size_t count = count_for(cfg, bytes, cfg.n);
    Timing result;
    try {
      // One world per row: a row that fails (an algorithm not available) stops its ranks cleanly.
      run_threads(cfg.n, [&](Communicator& comm) {
        const Timing t = run_row(cfg, comm, count);
        if (comm.rank() == 0) result = t;
      }, opts);
    } catch (const std::exception& e) {
      table.failed_row(count * dtype_size(cfg.dtype), count, e.what());
      continue;
    }
    table.row(count * dtype_size(cfg.dtype), count, result);
  }
  table.footer();
  return table.wrong() ? 1 : 0;
}

// One rank per process (MPI, gloo): rank 0 prints the table.
int run_process_backend(const Config& cfg, Communicator& comm, const std::string& desc) {
  const int n = comm.size(), rank = comm.rank();
  Table table(cfg, n);
  if (rank == 0) {
    table.header(desc);
    table.memcpy_line(cfg.max_bytes, memcpy_gbps(cfg.max_bytes));  // the others wait in the barrier
    table.columns();
  }
  comm.barrier();
  for (std::size_t bytes : sizes(cfg)) {
    const std::size_t count = count_for(cfg, bytes, n);
    try {
      const Timing t = run_row(cfg, comm, count);
      if (rank == 0) table.row(count * dtype_size(cfg.dtype), count, t);
    } catch (const std::exception& e) {
      // A deterministic refusal (algorithm or dtype not available) happens on every rank alike.
      if (rank == 0) table.failed_row(count * dtype_size(cfg.dtype), count, e.what());
    }
  }
  if (rank == 0) table.footer();
  return rank == 0 && table.wrong() ? 1 : 0;
}

#ifdef LACONIC_HAVE_MPI
int run_mpi_backend(const Config& cfg, int& argc, char**& argv) {
  MpiRuntime runtime(argc, argv);
  MpiCommunicator comm;
  if (cfg.n_given && cfg.n != comm.size()) {
    if (comm.rank() == 0) std::fprintf(stderr, "collbench: error: -n %d but mpirun started %d ranks\n", cfg.n, comm.size());
    return kInputError;
  }
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  v = v.substr(0, v.find_first_of("\n,"));
  return run_process_backend(cfg, comm, cfg.backend == Backend::mpi_c ? "mpi_c (" + v + ")" : "mpi (" + v + ")");
}
#endif

// gloo: one rank per process, started as the trainer's gloo ranks are (LACONIC_RANK,
// LACONIC_WORLD_SIZE, LACONIC_STORE, LACONIC_ADDRESS), with --streams TCP connections per pair.
int run_gloo_backend(const Config& cfg) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    if (!v || !*v) LC_INPUT_ERROR("--backend gloo: ", name, " is not set (every process needs LACONIC_RANK, "
                                  "LACONIC_WORLD_SIZE and LACONIC_STORE)");
    return v;
  };
  const auto number = [&](const char* name) {
    const std::string v = env(name);
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || x < 0 || x > 1 << 20) LC_INPUT_ERROR(name, ": expected a number, got '", v, "'");
    return static_cast<int>(x);
  };
  const int size = number("LACONIC_WORLD_SIZE"), rank = number("LACONIC_RANK");
  if (size < 1 || rank >= size) LC_INPUT_ERROR("LACONIC_RANK ", rank, " is not a rank of LACONIC_WORLD_SIZE ", size);
  if (cfg.n_given && cfg.n != size) LC_INPUT_ERROR("-n ", cfg.n, " but LACONIC_WORLD_SIZE is ", size);
  StoreSpec spec;
  try {
    spec = StoreSpec::parse(env("LACONIC_STORE"));
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    LC_INPUT_ERROR("LACONIC_STORE: ", e.what());
  }
  auto store = KeyStore::open(spec);
  GlooOptions opts{.timeout_s = 120, .streams = cfg.streams};
  if (const char* a = std::getenv("LACONIC_ADDRESS"); a && *a) opts.address = a;
  GlooCommunicator comm(*store, "collbench", rank, size, opts);
  return run_process_backend(cfg, comm, "gloo (" + std::to_string(cfg.streams) + " TCP streams per pair)");
}

// The flags given as text, before resolve() checks them into a Config.
struct Flags {
  std::string b = "8", e = "256M", op = "allreduce", backend = "threads", algo, dtype = "f32", redop = "sum";
  CLI::Option* ranks = nullptr;
};

void add_options(CLI::App& app, Config& cfg, Flags& f) {
  app.add_option("-b,--minbytes", f.b, "smallest size (bytes; K, M, G suffixes)");
  app.add_option("-e,--maxbytes", f.e, "largest size");
  app.add_option("-f,--stepfactor", cfg.factor, "size multiplier between rows (>= 2)");
  app.add_option("--op", f.op, "allreduce|reduce|reduce_scatter|allgather|alltoall|broadcast");
  app.add_option("--backend", f.backend, "threads|mpi|mpi_c|gloo (mpi, mpi_c: under mpirun; gloo: LACONIC_RANK, LACONIC_WORLD_SIZE, LACONIC_STORE)");
  app.add_option("--streams", cfg.streams, "gloo: TCP connections per pair of ranks (1-64)");
  app.add_option("--algo", f.algo, "ring|recursive_doubling|rabenseifner|hierarchical|native|auto");
  f.ranks = app.add_option("-n,--ranks", cfg.n, "ranks (threads; under mpirun must match -np)");
  app.add_option("--dtype", f.dtype, "f32|bf16|f16|i32|u8");
  app.add_option("--redop", f.redop, "sum|avg|max");
  app.add_option("--root", cfg.root, "root of reduce and broadcast");
  app.add_option("--iters", cfg.iters, "timed iterations per size");
  app.add_option("--warmup", cfg.warmup, "untimed iterations per size");
  app.add_option("--spin-us", cfg.spin_us, "threads: microseconds a waiter spins before it sleeps");
  app.add_flag("--bind", cfg.bind, "threads: pin rank r to CPU r (as mpirun -np N <= cores does)");
}

// The text flags into cfg, and every flag checked (InputError for the first that is wrong).
void resolve(Config& cfg, const Flags& f) {
  cfg.min_bytes = parse_size("-b", f.b);
  cfg.max_bytes = parse_size("-e", f.e);
  cfg.op = pick(kOps, "--op", f.op);
  cfg.backend = pick(kBackends, "--backend", f.backend);
  if (!f.algo.empty()) cfg.algo = pick(kAlgos, "--algo", f.algo);
  cfg.dtype = pick(kDTypes, "--dtype", f.dtype);
  cfg.redop = pick(kRedOps, "--redop", f.redop);
  cfg.n_given = f.ranks->count() > 0;
  if (cfg.min_bytes > cfg.max_bytes) LC_INPUT_ERROR("-b ", f.b, " is larger than -e ", f.e);
  if (cfg.factor < 2) LC_INPUT_ERROR("-f must be at least 2, got ", cfg.factor);
  if (cfg.n < 1) LC_INPUT_ERROR("-n must be at least 1, got ", cfg.n);
  if (cfg.iters < 1 || cfg.warmup < 0) LC_INPUT_ERROR("--iters must be >= 1 and --warmup >= 0");
  if (cfg.spin_us < 0 || cfg.spin_us >= 1e6) LC_INPUT_ERROR("--spin-us must be in [0, 1e6)");
  if (cfg.root < 0 || (cfg.backend == Backend::threads && cfg.root >= cfg.n))
    LC_INPUT_ERROR("--root ", cfg.root, " is not a rank");
  if (cfg.backend == Backend::mpi_c && cfg.algo && *cfg.algo != Algorithm::native)
    LC_INPUT_ERROR("--backend mpi_c runs the MPI library's own collectives: --algo must be native or absent");
  if (cfg.streams < 1 || cfg.streams > kMaxStreams) LC_INPUT_ERROR("--streams must be in [1, ", kMaxStreams, "]");
}

// `backend`: the --backend flag as given, for the messages.
int run_backend(const Config& cfg, const std::string& backend, [[maybe_unused]] int& argc,
                [[maybe_unused]] char**& argv) {
  if (cfg.backend == Backend::threads) return run_threads_backend(cfg);
  if (cfg.backend == Backend::gloo) return run_gloo_backend(cfg);
#ifdef LACONIC_HAVE_MPI
  if (!launched_by_mpi_launcher())
    std::fprintf(stderr, "collbench: note: --backend %s outside mpirun runs a single rank\n", backend.c_str());
  return run_mpi_backend(cfg, argc, argv);
#else
  LC_INPUT_ERROR("--backend ", backend, ": this build has no MPI (configure with -DLACONIC_MPI=ON)");
#endif
}

int run(int argc, char** argv) {
  CLI::App app{"collbench: collective benchmark (nccl-tests style rows)"};
  Config cfg;
  Flags flags;
  add_options(app, cfg, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& ex) {
    return app.exit(ex);
  } catch (const CLI::ParseError& ex) {
    std::fprintf(stderr, "collbench: error: %s (see collbench --help)\n", ex.what());
    return kInputError;
  }
  try {
    resolve(cfg, flags);
    return run_backend(cfg, flags.backend, argc, argv);
  } catch (const InputError& ex) {
    std::fprintf(stderr, "collbench: error: %s\n", ex.what());
    return kInputError;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "collbench: %s\n", ex.what());
    return 1;
  }
}

}  // namespace
}  // namespace laconic

int main(int argc, char** argv) { return laconic::run(argc, argv); }
