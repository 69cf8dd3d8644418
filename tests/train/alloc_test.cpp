// "No allocation in the step loop" (DESIGN.md): once buffers have grown at the first steps, a
// training step must not touch the heap. Performance is part of correctness, and an allocation
// per step is also a lock, a page fault and a source of jitter between ranks.
//
// The test binary interposes the C allocator (operator new in libstdc++ goes through malloc) and
// counts every call process-wide while armed; on_step records the count at each (rank, step), and
// the count must not move between two steady-state steps of rank 0. Ranks run in lockstep (every
// step has a collective), so while rank 0 goes from step kFirst to kLast the other ranks are inside
// steps kFirst .. kLast + 1, all past warm-up and all before the final evaluation.
//
// To find who allocated: LACONIC_ALLOC_ABORT=1 aborts on the first allocation inside the window,
// so a debugger's backtrace names the caller.
//
// One exception, counted apart and printed: calls made by the GEMM library's own code (oneDNN's
// libdnnl, whose sgemm takes its packing buffer from malloc on every call, and the OpenMP runtime
// that runs its threads). dnnl_sgemm takes no buffer from its caller; the cost is inside the GEMM
// times measured against OpenBLAS (docs/benchmarks.md, "CPU GEMM library"). Everything our code
// allocates, and everything the other libraries allocate for us, still counts.
#include <gtest/gtest.h>

#include <link.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/rng.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

// Sanitizer builds (make test-asan / test-tsan) own malloc: the sanitizer's runtime calls it
// before it has initialised itself, which crashes in our (instrumented) counter, and its free()
// would be handed glibc's blocks. There the step loops still run under the sanitizer, but
// nothing is counted and the tests report themselves skipped.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LACONIC_ALLOC_COUNTING 0
#else
#define LACONIC_ALLOC_COUNTING 1
#endif
constexpr bool kCounting = LACONIC_ALLOC_COUNTING;

// glibc's own entry points: the interposed functions forward to them.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {

std::atomic<std::uint64_t> g_allocs{0};
std::atomic<bool> g_armed{false};
std::atomic<bool> g_abort_in_window{false};  // LACONIC_ALLOC_ABORT: set only inside the window
// The size of the i-th counted allocation (the first kSizes of them): a failure names the sizes,
// which usually tells a GEMM packing buffer from a message buffer from a vector growing.
constexpr std::size_t kSizes = 1 << 14;
std::array<std::size_t, kSizes> g_sizes{};

// The executable segments of the GEMM library's objects (found when armed), and the allocations
// they made themselves.
struct CodeRange {
  std::uintptr_t begin, end;
};
constexpr int kMaxRanges = 16;
std::array<CodeRange, kMaxRanges> g_gemm_code{};
int g_gemm_ranges = 0;
std::atomic<std::uint64_t> g_gemm_allocs{0};

void find_gemm_library_code() {
  g_gemm_ranges = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void*) {
        const char* name = info->dlpi_name;
        if (!name || (!std::strstr(name, "libdnnl") && !std::strstr(name, "libgomp"))) return 0;
        for (int i = 0; i < info->dlpi_phnum && g_gemm_ranges < kMaxRanges; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            g_gemm_code[g_gemm_ranges++] = {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
        }
        return 0;
      },
      nullptr);
}

bool from_gemm_library(const void* caller) {
  const auto a = reinterpret_cast<std::uintptr_t>(caller);
  for (int i = 0; i < g_gemm_ranges; ++i)
    if (a >= g_gemm_code[i].begin && a < g_gemm_code[i].end) return true;
  return false;
}

inline void count(std::size_t bytes, const void* caller) {
  if (!g_armed.load(std::memory_order_relaxed)) return;
  if (from_gemm_library(caller)) {
    g_gemm_allocs.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t i = g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (i < kSizes) g_sizes[i] = bytes;
  if (g_abort_in_window.load(std::memory_order_relaxed)) std::abort();
}

}  // namespace

#if LACONIC_ALLOC_COUNTING
// Definitions in the executable take precedence over libc's for every caller in the process
// (libstdc++, Eigen's aligned_malloc, gtest), which is what makes the count process-wide.
extern "C" {

void* malloc(std::size_t n) {
  count(n, __builtin_return_address(0));
  return __libc_malloc(n);
}

void* calloc(std::size_t k, std::size_t n) {
  count(k * n, __builtin_return_address(0));
  return __libc_calloc(k, n);
}

void* realloc(void* p, std::size_t n) {
  count(n, __builtin_return_address(0));
  return __libc_realloc(p, n);
}

void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count(n, __builtin_return_address(0));
  return __libc_memalign(alignment, n);
}

void* memalign(std::size_t alignment, std::size_t n) {
  count(n, __builtin_return_address(0));
  return __libc_memalign(alignment, n);
}

int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  count(n, __builtin_return_address(0));
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"
#endif

namespace laconic {
namespace {

using testing::blobs;

constexpr int kWorld = 3;
constexpr int kSteps = 20;
constexpr int kFirst = 5;  // rank 0's steps bounding the window (0-based, after on_step)
constexpr int kLast = 14;

// The default recipe's shapes (784 inputs as Fashion-MNIST, hidden {512, 256}, micro-batch 64):
// every GEMM takes Eigen's blocked path, whose packing buffers here exceed Eigen's default
// 128 KiB stack-allocation limit; and every layer kind the MLP has on its hot path.
Recipe recipe() {
  Recipe r;
  r.run.seed = 11;
  r.model.hidden = {512, 256};
  r.model.activation = MlpActivation::gelu;
  r.model.layernorm = true;
  r.model.dropout = 0.1f;
  r.train.steps = kSteps;
  r.train.micro_batch = 64;
  r.train.log_every = 1000;  // no log record inside the run (logging may allocate; it is not a step)
  r.train.eval_every = 0;    // evaluation only after the last step
  r.optimizer.lr = 0.05;
  r.optimizer.momentum = 0.9;
  r.optimizer.weight_decay = 1e-4;
  r.schedule.warmup_steps = 3;
  r.schedule.decay = LrDecay::cosine;
  r.distributed.world_size = kWorld;
  r.distributed.timeout_s = 60;
  return r;
}

// Trains `r` on `data` and asserts that no rank allocated between steps kFirst and kLast.
void expect_no_allocations_in_steps(const Recipe& r, const TrainData& data) {
  // seen[rank][step]: the process-wide count when that rank finished that step. Preallocated,
  // and each slot written by one thread only, so the callback itself allocates nothing.
  std::array<std::array<std::uint64_t, kSteps>, kWorld> seen{};
  const bool abort_in_window = std::getenv("LACONIC_ALLOC_ABORT") != nullptr;
  TrainOptions opts;  // no log, no run_dir
  opts.on_step = [&](int rank, std::int64_t step, const ParamStore&) {
    seen[rank][step] = g_allocs.load(std::memory_order_relaxed);
    if (abort_in_window && rank == 0 && step == kFirst) g_abort_in_window = true;
    if (rank == 0 && step == kLast) g_abort_in_window = false;
  };

  find_gemm_library_code();
  g_allocs = 0;
  g_gemm_allocs = 0;
  g_armed = true;
  const TrainSummary s = train(r, data, opts);
  g_armed = false;
  g_abort_in_window = false;

  ASSERT_EQ(s.steps, kSteps);
  EXPECT_TRUE(std::isfinite(s.final_loss));
  if (!kCounting) GTEST_SKIP() << "sanitizer build: malloc is the sanitizer's, nothing was counted";
  // Sanity: the counter works (setup, threads and evaluation do allocate).
  EXPECT_GT(g_allocs.load(), 0u) << "the allocator interposition is not in effect";

  const std::uint64_t delta = seen[0][kLast] - seen[0][kFirst];
  std::cout << "allocations while rank 0 went from step " << kFirst << " to " << kLast << ": " << delta
            << " (whole run: " << g_allocs.load() << "; by the GEMM library's own code, whole run: "
            << g_gemm_allocs.load() << ")\n";
  if (delta != 0) {
    // Where: the count is process-wide, so an interval of one rank may include another's calls.
    for (int r = 0; r < kWorld; ++r)
      for (int st = kFirst + 1; st <= kLast; ++st)
        if (seen[r][st] != seen[r][st - 1])
          std::cout << "  rank " << r << ", step " << st << ": " << seen[r][st] - seen[r][st - 1]
                    << " allocations since its previous step\n";
    std::cout << "  sizes (bytes):";
    for (std::uint64_t i = seen[0][kFirst]; i < seen[0][kLast] && i < kSizes && i < seen[0][kFirst] + 32; ++i)
      std::cout << " " << g_sizes[i];
    std::cout << "\n";
  }
  EXPECT_EQ(delta, 0u) << "the step loop allocated (LACONIC_ALLOC_ABORT=1 under gdb names the caller)";
}

TEST(StepLoop, AllocatesNothingAfterWarmup) {
  // 1000 examples over a global batch of 192: the window crosses epoch boundaries (reshuffles).
  expect_no_allocations_in_steps(recipe(), image_data(blobs(1000, 784, 10, 1), blobs(200, 784, 10, 2)));
}

// BERT on masked tokens with LAMB, gradient clipping and the noise-scale estimate (one extra
// all-reduce per step): the token model's step loop allocates nothing either, in fp32 or with its
// GEMM operands rounded to bf16 (the rounded copies of a head whose rows vary step to step).
// Under ZeRO-2 (small buckets: staging slots taken and given back through backward, one held for
// the tied embedding, and the scratch of a second micro-batch made at the first step) neither.
Recipe bert_with_lamb(nn::Precision precision) {
  Recipe r = recipe();
  testing::use_small_bert(r);
  r.model.dropout = 0.1f;
  r.train.micro_batch = 8;
  r.train.grad_accum = 2;
  r.train.noise_scale = true;
  r.optimizer.name = "lamb";
  r.optimizer.lr = 0.01;
  r.optimizer.weight_decay = 0.01;
  r.optimizer.grad_clip = 1.0;
  r.schedule.decay = LrDecay::poly;
  r.train.precision = precision;
  return r;
}

TEST(StepLoop, BertWithLambAllocatesNothingAfterWarmup) {
  expect_no_allocations_in_steps(bert_with_lamb(nn::Precision::fp32), testing::masked_tokens());
}
TEST(StepLoop, BertInBf16AllocatesNothingAfterWarmup) {
  expect_no_allocations_in_steps(bert_with_lamb(nn::Precision::bf16), testing::masked_tokens());
}
TEST(StepLoop, BertUnderZero2AllocatesNothingAfterWarmup) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlapped" : "in line");
    Recipe r = bert_with_lamb(nn::Precision::fp32);
    r.train.noise_scale = false;
    r.sync.shard = ShardKind::gradients;
    r.sync.bucket_mb = 0.02;
    r.sync.overlap = overlap;
    expect_no_allocations_in_steps(r, testing::masked_tokens());
  }
}


// Every compressed strategy, in several buckets reduced while backward runs, with momentum
// correction: compression starts before the window (PowerSGD's dense start included), and from
// then on the reducers, their collectives and the communication threads allocate nothing.
TEST(StepLoop, CompressedStrategiesAllocateNothingAfterWarmup) {
  const TrainData data = image_data(blobs(1000, 784, 10, 1), blobs(200, 784, 10, 2));
  for (const StrategyName kind : {"topk", "powersgd", "onebit"}) {
    SCOPED_TRACE(kind.c_str());
    Recipe r = recipe();
    r.sync.strategy = kind;
    r.sync.bucket_mb = 0.5;  // fc1's weight, then the rest: two buckets
    r.sync.momentum = 0.9;
    r.optimizer.momentum = 0;
    r.sync.powersgd.start_iter = 2;
    r.sync.topk.selection = TopKOptions::Selection::exact;
    expect_no_allocations_in_steps(r, data);
  }
}

}  // namespace
}  // namespace laconic
