#include "collectives/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <thread>

#include "collectives/cuda/device_select.h"
#include "collectives/cuda/finish_avg_cuda.h"
#include "collectives/nominal_bytes.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/device.h"

namespace laconic {

using detail::concat;

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kNoBytes = std::numeric_limits<std::size_t>::max();  // init, barrier, finalize

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
  }
  throw Error(concat("NCCL backend: no NCCL type for dtype ", static_cast<int>(t)));
}

// avg travels as a sum; finish_avg divides afterwards (see the header).
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return ncclSum;
    case ReduceOp::max: return ncclMax;
  }
  throw Error(concat("NCCL backend: reduce op ", static_cast<int>(op), " is not supported (sum, avg, max are)"));
}

std::string cuda_text(cudaError_t e) { return concat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)); }

// Collects the first failure of several NCCL calls inside a group.
struct FirstError {
  ncclResult_t first = ncclSuccess;
  void operator()(ncclResult_t r) {
    if (first == ncclSuccess && r != ncclSuccess) first = r;
  }
};

}  // namespace

// ---- the handles, and the one way every operation waits ----

struct NcclCommunicator::Impl {
  int rank = 0;
  double timeout_s = 300;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the legacy stream: the work the operation waits for
  cudaEvent_t done = nullptr;   // recorded on `stream` after the operation
  std::int32_t* scratch = nullptr;  // barrier's all-reduced word (stays 0)
  std::atomic<bool> aborted{false};
  std::string abort_reason;  // written before `aborted` is set

  // The operation in progress, for messages (no allocation on the success path).
  const char* op = "init";
  std::size_t op_bytes = kNoBytes;
  Clock::time_point start, deadline;

  ~Impl() {
    // Normal close (finalize) happens in ~NcclCommunicator; here only what is left after a failed
    // constructor, and the CUDA objects. Errors are ignored: nothing could be done about them.
    if (comm) (void)ncclCommAbort(comm);
    if (done) (void)cudaEventDestroy(done);
    if (ready) (void)cudaEventDestroy(ready);
    if (stream) (void)cudaStreamDestroy(stream);
    if (scratch) (void)cudaFree(scratch);
  }

  std::string what() const { return op_bytes == kNoBytes ? std::string(op) : concat(op, " of ", op_bytes, " bytes"); }

  // NCCL's words for a result, with its last error message when there is one.
  std::string nccl_text(ncclResult_t r) const {
    const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
    std::string s = ncclGetErrorString(r);
    if (last && *last) s += concat(" (", last, ")");
    return s;
  }

  void abort(const std::string& reason) noexcept {
    if (comm) (void)ncclCommAbort(comm);  // kernels still waiting on a peer see the flag and quit
    comm = nullptr;
    abort_reason = reason;
    aborted.store(true, std::memory_order_release);
  }

  [[noreturn]] void fail(const std::string& why) {
    const std::string message = concat("rank ", rank, ": NCCL ", what(), " failed: ", why, "; communicator aborted");
    abort(message);
    throw Error(message);
  }

  [[noreturn]] void time_out() {
    const std::string message =
        concat("rank ", rank, ": NCCL ", what(), " timed out after ", timeout_s, " s; communicator aborted");
    abort(message);
    throw Error(message);
  }

  void check_cuda(cudaError_t e) {
    if (e != cudaSuccess) [[unlikely]]
      fail(cuda_text(e));
  }
  // Issuing calls of a non-blocking communicator return ncclInProgress while NCCL still works
  // on them in the background; settle() waits for that.
  void check_nccl(ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress) [[unlikely]]
      fail(nccl_text(r));
  }

  void guard(const char* what) const {
    if (aborted.load(std::memory_order_acquire)) [[unlikely]]
      throw Error(concat("rank ", rank, ": NCCL ", what, " refused: communicator aborted earlier (", abort_reason, ")"));
  }

  void start_clock(const char* what, std::size_t bytes) {
    op = what;
    op_bytes = bytes;
    start = Clock::now();
    deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  }

  // Before an operation: the clock, this rank's GPU on this thread, and the stream waits for
  // the work queued so far on the legacy default stream (the kernels that made the inputs).
  void begin(const char* what, std::size_t bytes, int device) {
    guard(what);
    start_clock(what, bytes);
    check_cuda(cudaSetDevice(device));
    check_cuda(cudaEventRecord(ready, cudaStreamLegacy));
    check_cuda(cudaStreamWaitEvent(stream, ready, 0));
  }

  // Yield for the first 2 ms (a small operation finishes there), then poll every 50 us.
  void pause() const {
    if (Clock::now() - start < std::chrono::milliseconds(2))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  // Until NCCL has finished issuing (the communicator's state leaves ncclInProgress). NCCL
  // forbids any other call, and any CUDA work on its stream, before that.
  void settle() {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
      if (r != ncclSuccess) fail(nccl_text(r));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(nccl_text(state));
      if (Clock::now() >= deadline) time_out();
      pause();
    }
  }

  // Until everything issued on the stream has run; an asynchronous NCCL error (a peer failed, a
  // network error) or the deadline aborts.
  void wait() {
    settle();
    check_cuda(cudaEventRecord(done, stream));
    for (;;) {
      const cudaError_t e = cudaEventQuery(done);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail(cuda_text(e));
      (void)cudaGetLastError();  // "not ready" is no error: leave nothing for the next check
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
      if (r != ncclSuccess) fail(nccl_text(r));
      if (state != ncclSuccess && state != ncclInProgress) fail(nccl_text(state));
      if (Clock::now() >= deadline) time_out();
      pause();
    }
  }

  // ncclGroupStart, the calls `issue` makes (returning the first failure), ncclGroupEnd. The
  // group is always ended, so a failure leaves no open group behind on this thread.
  template <class Issue>
  void group(Issue issue) {
    check_nccl(ncclGroupStart());
    const ncclResult_t first = issue();
    const ncclResult_t end = ncclGroupEnd();
    check_nccl(first);
    check_nccl(end);
  }

  // finish_avg on the device, on the stream after NCCL's sum (only once NCCL settled).
  void finish_avg(void* data, std::size_t count, DType t, int n) {
    settle();
    try {
      cuda::finish_avg(data, count, t, n, stream);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
};

// ---- setup ----

bool NcclCommunicator::available() { return cuda_available(); }

bool NcclCommunicator::aborted() const { return impl_->aborted.load(std::memory_order_acquire); }

NcclCommunicator::NcclCommunicator(Communicator& boot, NcclOptions opts)
    : rank_(boot.rank()), size_(boot.size()), impl_(std::make_unique<Impl>()) {
  LC_CHECK(opts.timeout_s > 0, "NCCL timeout_s must be positive, got ", opts.timeout_s);
  LC_CHECK(boot.memory() == Device::cpu, "NCCL is bootstrapped through a host communicator; ", boot.backend(),
           " takes ", name_of(boot.memory()), " buffers");
  Impl& m = *impl_;
  m.rank = rank_;
  m.timeout_s = opts.timeout_s;

  // The unique id, broadcast with rank 0's success: when rank 0 cannot make one, every rank
  // still takes part in the broadcast and fails here, instead of waiting for an id.
  struct Hello {
    std::int32_t ok;
    ncclUniqueId id;
  } hello{};
  std::string id_error;
  if (rank_ == 0) {
    const ncclResult_t r = ncclGetUniqueId(&hello.id);
    hello.ok = r == ncclSuccess ? 1 : 0;
    if (!hello.ok) id_error = m.nccl_text(r);
  }
  boot.broadcast(&hello, sizeof hello, 0);
  if (!hello.ok)
    throw Error(concat("rank ", rank_, ": NCCL init failed: ncclGetUniqueId failed on rank 0",
                       id_error.empty() ? std::string() : concat(": ", id_error)));

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    throw Error(concat("rank ", rank_, ": NCCL needs a CUDA device: ", e != cudaSuccess ? cuda_text(e) : "none visible"));
  }
  device_ = opts.device >= 0 ? opts.device : default_cuda_device(boot);
  LC_CHECK(device_ < devices, "rank ", rank_, ": CUDA device ", device_, " requested, ", devices, " visible");

  m.start_clock("init", kNoBytes);
  m.check_cuda(cudaSetDevice(device_));
  m.check_cuda(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  m.check_cuda(cudaEventCreateWithFlags(&m.ready, cudaEventDisableTiming));
  m.check_cuda(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
  m.check_cuda(cudaMalloc(reinterpret_cast<void**>(&m.scratch), sizeof(std::int32_t)));
  // On the legacy stream: every operation's stream waits for that before it runs.
  m.check_cuda(cudaMemsetAsync(m.scratch, 0, sizeof(std::int32_t), cudaStreamLegacy));

  // Non-blocking: the join runs in the background, so a peer that never arrives times out here.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  m.check_nccl(ncclCommInitRankConfig(&m.comm, size_, hello.id, rank_, &config));
  m.settle();
  // What runs is always NCCL's own collective: say so to whoever asks (set_algorithm is ignored).
  set_algorithm(Algorithm::native);
}

void NcclCommunicator::on_async_thread_start() { LC_CUDA_CHECK(cudaSetDevice(device_)); }

NcclCommunicator::~NcclCommunicator() {
  stop_async();
  Impl& m = *impl_;
  (void)cudaSetDevice(device_);
  if (!m.comm || m.aborted.load(std::memory_order_acquire)) return;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding: peers may be gone or stuck, and finalize would wait for them.
    m.abort("destroyed during stack unwinding");
    return;
  }
  try {
    m.start_clock("finalize", kNoBytes);
    m.check_nccl(ncclCommFinalize(m.comm));
    m.settle();
    const ncclResult_t r = ncclCommDestroy(m.comm);  // local once finalized (may finish in the background)
    m.comm = nullptr;
    if (r != ncclSuccess && r != ncclInProgress) std::fprintf(stderr, "laconic: rank %d: ncclCommDestroy failed: %s\n", rank_, ncclGetErrorString(r));
  } catch (const std::exception& e) {  // fail() aborted the communicator; a destructor must not throw
    std::fprintf(stderr, "laconic: %s\n", e.what());
  }
}

// ---- point-to-point (bytes counted by the base class) ----

void NcclCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  Impl& m = *impl_;
  m.begin("send", bytes, device_);
  m.check_nccl(ncclSend(data, bytes, ncclUint8, peer, m.comm, m.stream));
  m.wait();
}

void NcclCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  Impl& m = *impl_;
  m.begin("recv", bytes, device_);
  m.check_nccl(ncclRecv(data, bytes, ncclUint8, peer, m.comm, m.stream));
  m.wait();
}

void NcclCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                   std::size_t recv_bytes, int from) {
  Impl& m = *impl_;
  m.begin("sendrecv", recv_bytes, device_);
  m.group([&] {
    FirstError err;
    err(ncclSend(send_data, send_bytes, ncclUint8, to, m.comm, m.stream));
    err(ncclRecv(recv_data, recv_bytes, ncclUint8, from, m.comm, m.stream));
    return err.first;
  });
  m.wait();
}

// ---- native collectives (nominal byte counts: see the header) ----

bool NcclCommunicator::native(const CollectiveCall& c) {
  run_native(*this, c);
  return true;
}

void NcclCommunicator::all_reduce_native(Buf data, ReduceOp op) {
  Impl& m = *impl_;
  const ncclRedOp_t o = nccl_op(op);
  if (data.count == 0) return m.guard("all_reduce");
  m.begin("all_reduce", data.bytes(), device_);
  m.check_nccl(ncclAllReduce(data.data, data.data, data.count, nccl_type(data.dtype), o, m.comm, m.stream));
  if (op == ReduceOp::avg) m.finish_avg(data.data, data.count, data.dtype, size_);
  m.wait();
  count(nominal::all_reduce(data.count, data.dtype, rank_, size_));
}

void NcclCommunicator::reduce_native(Buf data, ReduceOp op, int root) {
  Impl& m = *impl_;
  const ncclRedOp_t o = nccl_op(op);
  if (data.count == 0) return m.guard("reduce");
  m.begin("reduce", data.bytes(), device_);
  // In place at the root; other ranks' buffers are only read.
  m.check_nccl(ncclReduce(data.data, data.data, data.count, nccl_type(data.dtype), o, root, m.comm, m.stream));
  if (op == ReduceOp::avg && rank_ == root) m.finish_avg(data.data, data.count, data.dtype, size_);
  m.wait();
  count(nominal::reduce(data.bytes(), rank_, root, size_));
}

void NcclCommunicator::reduce_scatter_native(CBuf send, Buf recv, ReduceOp op) {
  Impl& m = *impl_;
  const ncclRedOp_t o = nccl_op(op);
  if (recv.count == 0) return m.guard("reduce_scatter");
  m.begin("reduce_scatter", send.bytes(), device_);
  m.check_nccl(ncclReduceScatter(send.data, recv.data, recv.count, nccl_type(recv.dtype), o, m.comm, m.stream));
  if (op == ReduceOp::avg) m.finish_avg(recv.data, recv.count, recv.dtype, size_);
  m.wait();
  count(nominal::reduce_scatter(recv.bytes(), size_));
}

void NcclCommunicator::all_gather_native(CBuf send, Buf recv) {
  Impl& m = *impl_;
  if (send.count == 0) return m.guard("all_gather");
  m.begin("all_gather", recv.bytes(), device_);
  m.check_nccl(ncclAllGather(send.data, recv.data, send.count, nccl_type(send.dtype), m.comm, m.stream));
  m.wait();
  count(nominal::all_gather(send.bytes(), size_));
}

void NcclCommunicator::all_gather_v_native(CBuf send, Buf recv, std::span<const std::size_t> counts) {
  Impl& m = *impl_;
  if (recv.count == 0) return m.guard("all_gather_v");
  m.begin("all_gather_v", recv.bytes(), device_);
  const ncclDataType_t t = nccl_type(recv.dtype);
  // One broadcast per contributing rank, each from its block's place: the root sends from `send`
  // (in place when send is that block), every other rank receives there.
  m.group([&] {
    FirstError err;
    std::size_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      const std::size_t c = counts[static_cast<std::size_t>(r)];
      void* block = recv.sub(offset, c).data;
      if (c > 0) err(ncclBroadcast(r == rank_ ? send.data : block, block, c, t, r, m.comm, m.stream));
      offset += c;
    }
    return err.first;
  });
  m.wait();
  count(nominal::all_gather_v(counts, recv.dtype, rank_));
}

void NcclCommunicator::all_to_all_native(CBuf send, Buf recv) {
  Impl& m = *impl_;
  const auto n = static_cast<std::size_t>(size_);
  const std::size_t block = send.count / n;
  if (block == 0) return m.guard("all_to_all");
  LC_CHECK(send.data != recv.data, "all_to_all: NCCL needs separate send and recv buffers");
  m.begin("all_to_all", send.bytes(), device_);
  const ncclDataType_t t = nccl_type(send.dtype);
  const auto r = static_cast<std::size_t>(rank_);
  // This rank's own block is a device copy on the stream (before NCCL's calls, so nothing runs
  // on the stream while NCCL may still be issuing).
  m.check_cuda(cudaMemcpyAsync(recv.sub(r * block, block).data, send.sub(r * block, block).data,
                               block * dtype_size(send.dtype), cudaMemcpyDeviceToDevice, m.stream));
  m.group([&] {
    FirstError err;
    for (std::size_t p = 0; p < n; ++p) {
      if (p == r) continue;
      err(ncclSend(send.sub(p * block, block).data, block, t, static_cast<int>(p), m.comm, m.stream));
      err(ncclRecv(recv.sub(p * block, block).data, block, t, static_cast<int>(p), m.comm, m.stream));
    }
    return err.first;
  });
  m.wait();
  count(nominal::all_to_all(block * dtype_size(send.dtype), size_));
}

void NcclCommunicator::broadcast_native(Buf data, int root) {
  Impl& m = *impl_;
  if (data.count == 0) return m.guard("broadcast");
  m.begin("broadcast", data.bytes(), device_);
  m.check_nccl(ncclBroadcast(data.data, data.data, data.count, nccl_type(data.dtype), root, m.comm, m.stream));
  m.wait();
  count(nominal::broadcast(data.bytes(), rank_, root, size_));
}

void NcclCommunicator::barrier_native() {
  Impl& m = *impl_;
  m.begin("barrier", kNoBytes, device_);
  m.check_nccl(ncclAllReduce(m.scratch, m.scratch, 1, ncclInt32, ncclSum, m.comm, m.stream));
  m.wait();
  count(nominal::barrier(size_));
}

}  // namespace laconic
