#include "collectives/mpi/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "collectives/nominal_bytes.h"
#include "core/check.h"

namespace laconic {

namespace detail {
void throw_mpi(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    len = std::snprintf(text, sizeof text, "MPI error code %d", code);
  throw Error(concat(file, ":", line, ": ", call, " failed: ", std::string_view(text, static_cast<std::size_t>(len))));
}
}  // namespace detail

// ---- MpiRuntime ----

MpiRuntime::MpiRuntime() { init(nullptr, nullptr); }

MpiRuntime::MpiRuntime(int& argc, char**& argv) { init(&argc, &argv); }

void MpiRuntime::init(int* argc, char*** argv) {
  int initialized = 0;
  LC_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    LC_MPI_CHECK(MPI_Query_thread(&provided));
  } else {
    // SERIALIZED, not MULTIPLE: the communication thread and the caller never call MPI at the
    // same time (public calls drain the queue first), and MULTIPLE costs locks inside MPI.
    LC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    owns_ = true;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (owns_) MPI_Finalize();
    owns_ = false;
    throw Error(detail::concat("MPI provides thread level ", provided,
                               "; Laconic needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
                               ") for its communication thread"));
  }
}

MpiRuntime::~MpiRuntime() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && MPI_Finalize() != MPI_SUCCESS) std::fprintf(stderr, "laconic: MPI_Finalize failed\n");
}

void MpiRuntime::abort(int exit_code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; without MPI there is only this process
}

// ---- helpers ----

namespace {

constexpr int kTag = 0;  // pairs deliver in order on one (communicator, tag): all we need

// bf16/f16 reductions as MPI user functions. MPI's contract is inout[i] = in[i] op inout[i]
// with `in` the left operand, which is exactly reduce_into's (acc = in op acc).
template <DType T, ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, static_cast<std::size_t>(*len), T, Op);
}

MPI_Op make_op(MPI_User_function* fn) {
  MPI_Op op = MPI_OP_NULL;
  LC_MPI_CHECK(MPI_Op_create(fn, /*commute=*/0, &op));  // non-commutative: see the header
  return op;
}

// Polling schedule of every wait: yield for the first 2 ms (a collective usually finishes
// there, and on an oversubscribed node the peer needs our core to progress), then test every
// 100 µs so a long wait costs no CPU and at most 100 µs of latency.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(double seconds)
      : start_(Clock::now()),
        end_(start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool passed() const { return Clock::now() >= end_; }
  void pause() const {
    if (Clock::now() - start_ < std::chrono::milliseconds(2))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

 private:
  Clock::time_point start_, end_;
};

bool fits_int(std::size_t n) { return n <= static_cast<std::size_t>(INT_MAX); }

}  // namespace

// ---- MpiCommunicator: setup ----

MpiCommunicator::MpiCommunicator(MpiOptions opts) : opts_(opts) {
  LC_CHECK(opts.timeout_s > 0, "MPI timeout_s must be positive, got ", opts.timeout_s);
  LC_CHECK(opts.max_message_bytes > 0 && fits_int(opts.max_message_bytes),
           "max_message_bytes must be in [1, INT_MAX], got ", opts.max_message_bytes);
  int initialized = 0;
  LC_MPI_CHECK(MPI_Initialized(&initialized));
  LC_CHECK(initialized, "MpiCommunicator needs MPI initialized: create a laconic::MpiRuntime first");
  try {
    LC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    LC_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    LC_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    LC_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    LC_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_));
    LC_MPI_CHECK(MPI_Type_commit(&half_));
    bf16_sum_ = make_op(&half_op<DType::bf16, ReduceOp::sum>);
    bf16_max_ = make_op(&half_op<DType::bf16, ReduceOp::max>);
    f16_sum_ = make_op(&half_op<DType::f16, ReduceOp::sum>);
    f16_max_ = make_op(&half_op<DType::f16, ReduceOp::max>);
  } catch (...) {
    release();
    throw;
  }
  set_algorithm(Algorithm::native);
}

MpiCommunicator::~MpiCommunicator() {
  stop_async();
  release();
}

void MpiCommunicator::release() noexcept {
  int finalized = 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) {
    // MPI already reclaimed everything; the handles are dead, so there is nothing to free.
    if (comm_ != MPI_COMM_NULL) std::fprintf(stderr, "laconic: MpiCommunicator outlived MPI_Finalize\n");
    return;
  }
  for (MPI_Op* op : {&bf16_sum_, &bf16_max_, &f16_sum_, &f16_max_})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  if (half_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Datatype MpiCommunicator::type_of(DType t) const {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::bf16:
    case DType::f16: return half_;
  }
  LC_CHECK(false, "no MPI type for dtype ", static_cast<int>(t));
}

MPI_Op MpiCommunicator::op_of(DType t, ReduceOp op) const {
  const bool max = op == ReduceOp::max;  // avg travels as a sum; finish_avg divides afterwards
  switch (t) {
    case DType::bf16: return max ? bf16_max_ : bf16_sum_;
    case DType::f16: return max ? f16_max_ : f16_sum_;
    default: return max ? MPI_MAX : MPI_SUM;
  }
}

// ---- waiting ----

void MpiCommunicator::abort_on_timeout(const char* what, std::size_t bytes, int peer) const {
  std::string line = detail::concat("laconic: rank ", rank_, " timed out after ", opts_.timeout_s,
                                    " s in ", what, " of ", bytes, " bytes");
  if (peer >= 0) line += detail::concat(" (waiting on rank ", peer, ")");
  std::fprintf(stderr, "%s; aborting the job\n", line.c_str());
  MpiRuntime::abort(1);
}

void MpiCommunicator::post_recv(void* data, std::size_t bytes, int from) {
  auto* p = static_cast<std::byte*>(data);
  std::size_t left = bytes;
  do {  // a zero-byte message is still one message: the peer sends one
    const std::size_t n = std::min(left, opts_.max_message_bytes);
    Pending& q = pending_.emplace_back(Pending{MPI_REQUEST_NULL, n, from, true, false});
    LC_MPI_CHECK(MPI_Irecv(p, static_cast<int>(n), MPI_BYTE, from, kTag, comm_, &q.req));
    p += n;
    left -= n;
  } while (left > 0);
}

void MpiCommunicator::post_send(const void* data, std::size_t bytes, int to) {
  const auto* p = static_cast<const std::byte*>(data);
  std::size_t left = bytes;
  do {
    const std::size_t n = std::min(left, opts_.max_message_bytes);
    Pending& q = pending_.emplace_back(Pending{MPI_REQUEST_NULL, n, to, false, false});
    LC_MPI_CHECK(MPI_Isend(p, static_cast<int>(n), MPI_BYTE, to, kTag, comm_, &q.req));
    p += n;
    left -= n;
  } while (left > 0);
}

void MpiCommunicator::abandon() noexcept {
  for (Pending& q : pending_) {
    if (q.done || q.req == MPI_REQUEST_NULL) continue;
    if (q.is_recv) MPI_Cancel(&q.req);  // a receive left posted would swallow a later message
    MPI_Request_free(&q.req);
  }
  pending_.clear();
}

void MpiCommunicator::wait(const char* what, std::size_t bytes) {
  const Deadline deadline(opts_.timeout_s);
  try {
    std::size_t left = pending_.size();
    for (;;) {
      for (Pending& q : pending_) {
        if (q.done) continue;
        int flag = 0;
        MPI_Status status;
        const int rc = MPI_Test(&q.req, &flag, &status);
        if (rc != MPI_SUCCESS) {
          q.done = true;  // an erroneous completion frees the request
          int cls = MPI_SUCCESS;
          MPI_Error_class(rc, &cls);
          if (q.is_recv && cls == MPI_ERR_TRUNCATE)
            throw Error(detail::concat("rank ", rank_, ": expected ", q.bytes, " bytes from rank ", q.peer,
                                       ", got more (message truncated)"));
          LC_MPI_CHECK(rc);
        }
        if (!flag) continue;
        q.done = true;
        --left;
        if (q.is_recv) {
          int got = 0;
          LC_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &got));
          if (static_cast<std::size_t>(got) != q.bytes)
            throw Error(detail::concat("rank ", rank_, ": expected ", q.bytes, " bytes from rank ", q.peer,
                                       ", got ", got));
        }
      }
      if (left == 0) break;
      if (deadline.passed()) {
        const auto open = std::find_if(pending_.begin(), pending_.end(), [](const Pending& q) { return !q.done; });
        abort_on_timeout(what, bytes, open->peer);
      }
      deadline.pause();
    }
  } catch (...) {
    abandon();
    throw;
  }
  pending_.clear();
}

void MpiCommunicator::wait_one(MPI_Request req, const char* what, std::size_t bytes) {
  const Deadline deadline(opts_.timeout_s);
  for (;;) {
    int flag = 0;
    LC_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    if (flag) return;
    if (deadline.passed()) abort_on_timeout(what, bytes, -1);
    deadline.pause();
  }
}

// ---- point-to-point ----

void MpiCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  post_send(data, bytes, peer);
  wait("send", bytes);
}

void MpiCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  post_recv(data, bytes, peer);
  wait("recv", bytes);
}

void MpiCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                  std::size_t recv_bytes, int from) {
  post_recv(recv_data, recv_bytes, from);  // posted first: the incoming message lands in place
  post_send(send_data, send_bytes, to);
  wait("sendrecv", recv_bytes);
}

// ---- native collectives (nominal byte counts: see the header and collectives/nominal_bytes.h) ----

bool MpiCommunicator::native(const CollectiveCall& c) {
  if (algorithm() != Algorithm::native || !fits_int(c.elements())) return false;
  run_native(*this, c);
  return true;
}

void MpiCommunicator::all_reduce_native(Buf data, ReduceOp op) {
  const int n = size_;
  if (data.count == 0) return;
  MPI_Request req;
  LC_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data, static_cast<int>(data.count), type_of(data.dtype),
                              op_of(data.dtype, op), comm_, &req));
  wait_one(req, "all_reduce", data.bytes());
  if (op == ReduceOp::avg) finish_avg(data.data, data.count, data.dtype, n);
  count(nominal::all_reduce(data.count, data.dtype, rank_, n));
}

void MpiCommunicator::reduce_native(Buf data, ReduceOp op, int root) {
  const int n = size_;
  if (data.count == 0) return;
  const bool at_root = rank_ == root;
  MPI_Request req;
  LC_MPI_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : data.data, at_root ? data.data : nullptr,
                           static_cast<int>(data.count), type_of(data.dtype), op_of(data.dtype, op), root,
                           comm_, &req));
  wait_one(req, "reduce", data.bytes());
  if (at_root && op == ReduceOp::avg) finish_avg(data.data, data.count, data.dtype, n);
  count(nominal::reduce(data.bytes(), rank_, root, n));
}

void MpiCommunicator::reduce_scatter_native(CBuf send, Buf recv, ReduceOp op) {
  const int n = size_;
  if (recv.count == 0) return;
  MPI_Request req;
  LC_MPI_CHECK(MPI_Ireduce_scatter_block(send.data, recv.data, static_cast<int>(recv.count), type_of(recv.dtype),
                                         op_of(recv.dtype, op), comm_, &req));
  wait_one(req, "reduce_scatter", send.bytes());
  if (op == ReduceOp::avg) finish_avg(recv.data, recv.count, recv.dtype, n);
  count(nominal::reduce_scatter(recv.bytes(), n));
}

void MpiCommunicator::all_gather_native(CBuf send, Buf recv) {
  if (send.count == 0) return;
  // MPI forbids aliased buffers; a caller that gathers from its own block says so with IN_PLACE.
  const bool in_place = send.data == recv.sub(static_cast<std::size_t>(rank_) * send.count, send.count).data;
  MPI_Request req;
  const MPI_Datatype t = type_of(send.dtype);
  const int c = static_cast<int>(send.count);
  LC_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data, c, t, recv.data, c, t, comm_, &req));
  wait_one(req, "all_gather", recv.bytes());
  count(nominal::all_gather(send.bytes(), size_));
}

void MpiCommunicator::all_gather_v_native(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  const int n = size_, r = rank_;
  if (recv.count == 0) return;
  counts_.resize(static_cast<std::size_t>(n));
  displs_.resize(static_cast<std::size_t>(n));
  std::size_t offset = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    counts_[i] = static_cast<int>(counts[i]);  // each <= the total, which fits
    displs_[i] = static_cast<int>(offset);
    offset += counts[i];
  }
  const auto ur = static_cast<std::size_t>(r);
  const bool in_place = send.data == recv.sub(static_cast<std::size_t>(displs_[ur]), counts[ur]).data;
  MPI_Request req;
  const MPI_Datatype t = type_of(send.dtype);
  LC_MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send.data, counts_[ur], t, recv.data, counts_.data(),
                               displs_.data(), t, comm_, &req));
  wait_one(req, "all_gather_v", recv.bytes());
  count(nominal::all_gather_v(counts, recv.dtype, r));
}

void MpiCommunicator::all_to_all_native(CBuf send, Buf recv) {
  const auto n = static_cast<std::size_t>(size_);
  const std::size_t block = send.count / n;
  if (block == 0) return;
  MPI_Request req;
  const MPI_Datatype t = type_of(send.dtype);
  const int c = static_cast<int>(block);
  LC_MPI_CHECK(MPI_Ialltoall(send.data, c, t, recv.data, c, t, comm_, &req));
  wait_one(req, "all_to_all", send.bytes());
  count(nominal::all_to_all(block * dtype_size(send.dtype), size_));
}

void MpiCommunicator::broadcast_native(Buf data, int root) {
  const int n = size_;
  if (data.count == 0) return;
  MPI_Request req;
  LC_MPI_CHECK(MPI_Ibcast(data.data, static_cast<int>(data.count), type_of(data.dtype), root, comm_, &req));
  wait_one(req, "broadcast", data.bytes());
  count(nominal::broadcast(data.bytes(), rank_, root, n));
}

void MpiCommunicator::barrier_native() {
  MPI_Request req;
  LC_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  wait_one(req, "barrier", 0);
  count(nominal::barrier(size_));
}

}  // namespace laconic
