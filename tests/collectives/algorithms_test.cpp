// The all-reduce algorithms beyond the ring (recursive doubling, Rabenseifner, hierarchical) and
// the auto_ size rule, on the threads backend: closed-form results for every world size 1..8,
// count (0, 1, < N, prime, large), op and dtype; bitwise identity across ranks and runs for
// order-dependent float sums (for recursive doubling and Rabenseifner against the documented
// fold order, recomputed here); per-rank bytes and messages against the formulas in each header,
// recomputed here independently of the algorithm code.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/threads/threads_communicator.h"

namespace laconic {
namespace {

const std::vector<std::size_t> kCounts = {0, 1, 7, 1009, 100000};
constexpr Algorithm kFlat[] = {Algorithm::recursive_doubling, Algorithm::rabenseifner, Algorithm::hierarchical};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

// Topologies for the hierarchical algorithm on n ranks: one group, two contiguous uneven groups
// (n = 8: {0,0,0,1,1,1,1,1}), interleaved groups {0,1,0,1,...}, and three interleaved groups
// with arbitrary ids.
std::vector<std::vector<int>> topologies(int n) {
  std::vector<std::vector<int>> t(4);
  for (int r = 0; r < n; ++r) {
    t[1].push_back(r < 3 ? 0 : 1);
    t[2].push_back(r % 2);
    t[3].push_back(r % 3 == 0 ? 7 : r % 3 == 1 ? -2 : 40);
  }
  return t;  // t[0] empty: one group
}

std::string describe(Algorithm a, int n, std::size_t count, const std::vector<int>& groups) {
  std::string s = std::string(name_of(a)) + " N=" + std::to_string(n) + " count=" + std::to_string(count) + " groups={";
  for (int g : groups) s += std::to_string(g) + ",";
  return s + "}";
}

// Element i on rank r: an integer below 2^24 in magnitude, so every partial sum is exact in f32
// and i32 and the result has a closed form whatever the order:
//   sum_r v = 1000·(N(N-1)/2 - 3N) + N·i,   max_r v = 1000·(N-4) + i.
std::int64_t value(int r, std::size_t i, int n) {
  const auto k = static_cast<std::int64_t>((static_cast<std::size_t>(r) + i) % static_cast<std::size_t>(n));
  return (k - 3) * 1000 + static_cast<std::int64_t>(i);
}
std::int64_t exact_sum(std::size_t i, int n) { return 1000LL * (n * (n - 1) / 2 - 3 * n) + n * static_cast<std::int64_t>(i); }
std::int64_t exact_max(std::size_t i, int n) { return 1000LL * (n - 4) + static_cast<std::int64_t>(i); }

float expected_f32(ReduceOp op, std::size_t i, int n) {
  switch (op) {
    case ReduceOp::sum: return static_cast<float>(exact_sum(i, n));
    case ReduceOp::avg: return static_cast<float>(exact_sum(i, n)) / static_cast<float>(n);  // one rounding
    case ReduceOp::max: return static_cast<float>(exact_max(i, n));
  }
  return 0;
}
std::int32_t expected_i32(ReduceOp op, std::size_t i, int n) {
  switch (op) {
    case ReduceOp::sum: return static_cast<std::int32_t>(exact_sum(i, n));
    case ReduceOp::avg: return static_cast<std::int32_t>(exact_sum(i, n) / n);  // truncating, like C++
    case ReduceOp::max: return static_cast<std::int32_t>(exact_max(i, n));
  }
  return 0;
}

// Runs `body` for every algorithm x world size x topology (hierarchical: all four; others: none).
template <class Body>
void for_each_setup(Body body) {
  for (Algorithm a : kFlat)
    for (int n = 1; n <= 8; ++n) {
      auto tops = topologies(n);
      if (a != Algorithm::hierarchical) tops.resize(1);
      for (const auto& groups : tops) body(a, n, groups);
    }
}

TEST(AllReduceAlgorithms, ClosedFormF32AndI32) {
  for_each_setup([](Algorithm a, int n, const std::vector<int>& groups) {
    run_threads(n, [&](Communicator& comm) {
      comm.set_algorithm(a);
      comm.set_groups(groups);
      std::vector<float> f;
      std::vector<std::int32_t> k;
      for (std::size_t count : kCounts)
        for (ReduceOp op : kOps) {
          f.resize(count);
          k.resize(count);
          for (std::size_t i = 0; i < count; ++i) {
            f[i] = static_cast<float>(value(comm.rank(), i, n));
            k[i] = static_cast<std::int32_t>(value(comm.rank(), i, n));
          }
          comm.all_reduce(buf(std::span(f)), op);
          comm.all_reduce(buf(std::span(k)), op);
          std::size_t wrong_f = 0, wrong_k = 0;
          for (std::size_t i = 0; i < count; ++i) {
            wrong_f += f[i] != expected_f32(op, i, n);
            wrong_k += k[i] != expected_i32(op, i, n);
          }
          ASSERT_EQ(wrong_f, 0u) << describe(a, n, count, groups) << " rank " << comm.rank() << " op " << name_of(op) << " f32";
          ASSERT_EQ(wrong_k, 0u) << describe(a, n, count, groups) << " rank " << comm.rank() << " op " << name_of(op) << " i32";
        }
    });
  });
}

TEST(AllReduceAlgorithms, ClosedFormBf16) {
  // Small integers are exact in bf16 (8 significant bits) and so are their partial sums here:
  //   v = ((r + i) mod N) - 3,  sum = N(N-1)/2 - 3N,  max = N - 4,  avg = bf16(sum / N).
  const std::size_t count = 1009;
  for_each_setup([&](Algorithm a, int n, const std::vector<int>& groups) {
    run_threads(n, [&](Communicator& comm) {
      comm.set_algorithm(a);
      comm.set_groups(groups);
      std::vector<bf16> x(count);
      for (ReduceOp op : kOps) {
        for (std::size_t i = 0; i < count; ++i)
          x[i] = to_bf16(static_cast<float>(static_cast<int>((comm.rank() + i) % n) - 3));
        comm.all_reduce(buf(std::span(x)), op);
        const float sum = static_cast<float>(n * (n - 1) / 2 - 3 * n);
        const float want = op == ReduceOp::sum ? sum : op == ReduceOp::max ? static_cast<float>(n - 4)
                                                                            : from_bf16(to_bf16(sum / static_cast<float>(n)));
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i) wrong += from_bf16(x[i]) != want;
        ASSERT_EQ(wrong, 0u) << describe(a, n, count, groups) << " rank " << comm.rank() << " op " << name_of(op);
      }
    });
  });
}

// Values whose float sum depends on the order of the additions.
float inexact(int r, std::size_t i) {
  return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r)) *
         std::exp2(static_cast<float>((i + static_cast<std::size_t>(r)) % 17) - 8);
}

// The fold order documented in recursive_doubling.h and rabenseifner.h, recomputed for one
// element: leaves y[nr] after the non-power-of-two fold (x[2j] + x[2j+1] for j < rem).
std::vector<float> folded_leaves(std::size_t i, int n) {
  int p2 = 1;
  while (2 * p2 <= n) p2 *= 2;
  const int rem = n - p2;
  std::vector<float> y(p2);
  for (int j = 0; j < p2; ++j) y[j] = j < rem ? inexact(2 * j, i) + inexact(2 * j + 1, i) : inexact(j + rem, i);
  return y;
}

// Recursive doubling: round m combines y[lower] + y[upper] on both partners.
float recursive_doubling_order(std::size_t i, int n) {
  std::vector<float> y = folded_leaves(i, n);
  const int p2 = static_cast<int>(y.size());
  for (int m = 1; m < p2; m *= 2)
    for (int j = 0; j < p2; j += 2 * m) y[j] = y[j] + y[j + m];
  return y[0];
}

// Rabenseifner: in step m = p'/2, ..., 1 every rank j folds its partner's partial in as the left
// operand: y[j] <- y[j^m] + y[j]; element i's value is the one its block's owner ends with.
float rabenseifner_order(std::size_t i, std::size_t count, int n) {
  std::vector<float> y = folded_leaves(i, n);
  const int p2 = static_cast<int>(y.size());
  for (int m = p2 / 2; m >= 1; m /= 2) {
    std::vector<float> next(p2);
    for (int j = 0; j < p2; ++j) next[j] = y[j ^ m] + y[j];
    y = next;
  }
  // Block of element i under the ring chunking of count over p2 blocks.
  const std::size_t q = count / p2, extra = count % p2;
  const std::size_t owner = i < extra * (q + 1) ? i / (q + 1) : extra + (i - extra * (q + 1)) / q;
  return y[owner];
}

TEST(AllReduceAlgorithms, InexactSumsAreBitwiseIdenticalAndFollowTheDocumentedOrder) {
  const std::size_t count = 1009;
  for_each_setup([&](Algorithm a, int n, const std::vector<int>& groups) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      std::vector<std::vector<float>> out(2 * n);
      for (int run = 0; run < 2; ++run)
        run_threads(n, [&](Communicator& comm) {
          comm.set_algorithm(a);
          comm.set_groups(groups);
          std::vector<float> x(count);
          for (std::size_t i = 0; i < count; ++i) x[i] = inexact(comm.rank(), i);
          comm.all_reduce(std::span(x), op);
          out[run * n + comm.rank()] = x;
        });
      for (int k = 1; k < 2 * n; ++k)
        ASSERT_EQ(std::memcmp(out[k].data(), out[0].data(), count * sizeof(float)), 0)
            << describe(a, n, count, groups) << " rank " << k % n << " run " << k / n << " differs from rank 0";
      for (std::size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r) exact += inexact(r, i);
        if (op == ReduceOp::avg) exact /= n;
        ASSERT_NEAR(out[0][i], exact, 1e-5 * (1 + std::abs(exact))) << describe(a, n, count, groups) << " i " << i;
        if (a == Algorithm::hierarchical) continue;
        float want = a == Algorithm::recursive_doubling ? recursive_doubling_order(i, n) : rabenseifner_order(i, count, n);
        if (op == ReduceOp::avg) want /= static_cast<float>(n);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out[0][i]), std::bit_cast<std::uint32_t>(want))
            << describe(a, n, count, groups) << " op " << name_of(op) << " i " << i;
      }
    }
  });
}

TEST(AllReduceAlgorithms, MaxOfSignedZerosIsBitwiseIdentical) {
  // max(+0, -0) returns its left operand, so only a fixed operand order gives every rank the same
  // bits: the recursive-doubling partners must combine in canonical order (lower rank left), and
  // then the result is the leftmost leaf of the balanced tree, rank 0's zero.
  const std::size_t count = 64;
  const auto zero = [](int r, std::size_t i) { return ((static_cast<std::size_t>(r) * 7 + i) / 3) % 2 ? -0.0f : 0.0f; };
  for_each_setup([&](Algorithm a, int n, const std::vector<int>& groups) {
    std::vector<std::vector<float>> out(n);
    run_threads(n, [&](Communicator& comm) {
      comm.set_algorithm(a);
      comm.set_groups(groups);
      std::vector<float> x(count);
      for (std::size_t i = 0; i < count; ++i) x[i] = zero(comm.rank(), i);
      comm.all_reduce(std::span(x), ReduceOp::max);
      out[comm.rank()] = x;
    });
    for (int r = 1; r < n; ++r)
      ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), count * sizeof(float)), 0)
          << describe(a, n, count, groups) << " rank " << r << " differs from rank 0";
    if (a == Algorithm::recursive_doubling) {
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(std::signbit(out[0][i]), std::signbit(zero(0, i))) << describe(a, n, count, groups) << " i " << i;
    }
  });
}

// ---- bytes on the wire, recomputed from the header formulas ----

struct Expected {
  std::uint64_t sent = 0, recv = 0, messages = 0;
};

std::uint64_t ring_chunk(std::size_t count, int n, int c) { return count / n + (static_cast<std::size_t>(c) < count % n ? 1 : 0); }
int largest_pof2(int n) {
  int p = 1;
  while (2 * p <= n) p *= 2;
  return p;
}
int lg(int p) { return std::countr_zero(static_cast<unsigned>(p)); }

// recursive_doubling.h / rabenseifner.h: S for the fold, plus the power-of-two part `core` for
// participants (which for a folded odd rank comes with one more S each way).
Expected with_fold(int r, int n, std::uint64_t S, Expected core) {
  const int rem = n - largest_pof2(n);
  if (r >= 2 * rem) return core;
  if (r % 2 == 0) return {S, S, 1};
  return {core.sent + S, core.recv + S, core.messages + 1};
}

Expected recursive_doubling_bytes(int r, int n, std::size_t count, std::size_t E) {
  if (n == 1 || count == 0) return {};
  const std::uint64_t S = count * E, rounds = static_cast<std::uint64_t>(lg(largest_pof2(n)));
  return with_fold(r, n, S, {rounds * S, rounds * S, rounds});
}

Expected rabenseifner_bytes(int r, int n, std::size_t count, std::size_t E) {
  if (n == 1 || count == 0) return {};
  const int p2 = largest_pof2(n), rem = n - p2;
  const int nr = r >= 2 * rem ? r - rem : r / 2;
  // W(nr): elements of the aligned windows of m = 1, 2, ..., p2/2 blocks that contain block nr.
  std::uint64_t w = 0;
  for (int m = 1; m < p2; m *= 2)
    for (int b = nr / m * m; b < nr / m * m + m; ++b) w += ring_chunk(count, p2, b);
  const std::uint64_t core = E * (count - ring_chunk(count, p2, nr) + w);
  return with_fold(r, n, count * E, {core, core, 2u * static_cast<std::uint64_t>(lg(p2))});
}

Expected hierarchical_bytes(int r, int n, std::size_t count, std::size_t E, const std::vector<int>& groups) {
  if (n == 1 || count == 0) return {};
  const auto g = [&](int q) { return groups.empty() ? 0 : groups[q]; };
  std::vector<int> members, leaders;
  for (int q = 0; q < n; ++q) {
    if (g(q) == g(r)) members.push_back(q);
    bool first = true;
    for (int p = 0; p < q; ++p) first = first && g(p) != g(q);
    if (first) leaders.push_back(q);
  }
  const int size = static_cast<int>(members.size());
  int v = 0;
  while (members[v] != r) ++v;
  // Binomial-tree children of local index v: m = 2^k below v's lowest set bit, v + m < size.
  std::uint64_t children = 0;
  for (int m = 1; m < size && (v == 0 || m < (v & -v)); m *= 2) children += v + m < size;
  const std::uint64_t S = count * E, tree = (v != 0 ? 1 : 0) + children;
  Expected e{tree * S, tree * S, tree};
  if (v == 0) {
    const int L = static_cast<int>(leaders.size());
    int l = 0;
    while (leaders[l] != r) ++l;
    if (L > 1) {
      e.sent += E * (2 * count - ring_chunk(count, L, l) - ring_chunk(count, L, (l + 1) % L));
      e.recv += E * (2 * count - ring_chunk(count, L, (l + L - 1) % L) - ring_chunk(count, L, l));
      e.messages += 2u * (L - 1);
    }
  }
  return e;
}

TEST(AllReduceAlgorithms, BytesOnTheWireMatchTheHeaderFormulas) {
  for_each_setup([](Algorithm a, int n, const std::vector<int>& groups) {
    for (std::size_t count : kCounts)
      for (DType t : {DType::f32, DType::bf16}) {
        const std::size_t E = dtype_size(t);
        std::vector<ByteCounters> counted(n);
        run_threads(n, [&](Communicator& comm) {
          comm.set_algorithm(a);
          comm.set_groups(groups);
          std::vector<std::byte> data(count * E);
          comm.all_reduce(Buf{data.data(), count, t}, ReduceOp::sum);
          counted[comm.rank()] = comm.bytes();
        });
        std::uint64_t total_sent = 0, total_recv = 0;
        for (int r = 0; r < n; ++r) {
          const Expected e = a == Algorithm::recursive_doubling ? recursive_doubling_bytes(r, n, count, E)
                             : a == Algorithm::rabenseifner     ? rabenseifner_bytes(r, n, count, E)
                                                                : hierarchical_bytes(r, n, count, E, groups);
          EXPECT_EQ(counted[r].sent, e.sent) << describe(a, n, count, groups) << " rank " << r << " E " << E;
          EXPECT_EQ(counted[r].recv, e.recv) << describe(a, n, count, groups) << " rank " << r << " E " << E;
          EXPECT_EQ(counted[r].messages_sent, e.messages) << describe(a, n, count, groups) << " rank " << r;
          total_sent += counted[r].sent;
          total_recv += counted[r].recv;
        }
        EXPECT_EQ(total_sent, total_recv) << describe(a, n, count, groups);
      }
  });
}

TEST(AllReduceAlgorithms, PowerOfTwoTotalsMatchTheTextbookCosts) {
  // For p = 2^k and p | count: recursive doubling moves lg p·S per rank, Rabenseifner exactly
  // 2(p-1)/p·S per rank, like the ring (Thakur, Rabenseifner & Gropp 2005).
  for (int n : {2, 4, 8}) {
    const std::size_t count = 1024;
    const std::uint64_t S = 4 * count;
    for (Algorithm a : {Algorithm::recursive_doubling, Algorithm::rabenseifner}) {
      std::vector<ByteCounters> counted(n);
      run_threads(n, [&](Communicator& comm) {
        comm.set_algorithm(a);
        std::vector<float> x(count, 1.0f);
        comm.all_reduce(std::span(x), ReduceOp::sum);
        counted[comm.rank()] = comm.bytes();
      });
      for (int r = 0; r < n; ++r) {
        if (a == Algorithm::recursive_doubling) EXPECT_EQ(counted[r].sent, static_cast<std::uint64_t>(lg(n)) * S);
        else EXPECT_EQ(counted[r].sent * n, 2u * (n - 1) * S);
      }
    }
  }
}

TEST(AllReduceAlgorithms, HierarchicalCrossesGroupsOnlyFromLeaders) {
  // Groups {0,0,0,1,1,1,1,1}: only ranks 0 and 3 talk across groups, so with a large buffer the
  // non-leaders move exactly their tree share and the leaders add one 2-rank ring, S each way.
  const int n = 8;
  const std::size_t count = 1000;
  const std::vector<int> groups = {0, 0, 0, 1, 1, 1, 1, 1};
  std::vector<ByteCounters> counted(n);
  run_threads(n, [&](Communicator& comm) {
    comm.set_algorithm(Algorithm::hierarchical);
    comm.set_groups(groups);
    std::vector<float> x(count, static_cast<float>(comm.rank()));
    comm.all_reduce(std::span(x), ReduceOp::sum);
    for (float v : x) ASSERT_EQ(v, 28.0f);
    counted[comm.rank()] = comm.bytes();
  });
  const std::uint64_t S = 4 * count;
  // Group 0 (3 ranks): v = 0 has children {1, 2}; v = 1 has none, v = 2 none.
  // Group 1 (5 ranks): v = 0 has children {1, 2, 4}; v = 2 has child 3; v = 1, 3, 4 none.
  const std::uint64_t tree[n] = {2, 1, 1, 3, 1, 2, 1, 1};
  for (int r = 0; r < n; ++r) {
    const std::uint64_t ring = (r == 0 || r == 3) ? S : 0;  // 2-rank ring: 2·(S - S/2) = S
    EXPECT_EQ(counted[r].sent, tree[r] * S + ring) << "rank " << r;
  }
}

TEST(AllReduceAlgorithms, AutoWithoutChooserSwitchesAt2KiB) {
  // Below 2 KiB the fixed rule runs recursive doubling (lg p·S per rank), from 2 KiB the ring.
  const int n = 4;
  for (std::size_t count : {std::size_t{511}, std::size_t{512}}) {  // 2044 and 2048 bytes
    std::vector<ByteCounters> counted(n);
    run_threads(n, [&](Communicator& comm) {
      comm.set_algorithm(Algorithm::auto_);
      std::vector<float> x(count, 1.0f);
      comm.all_reduce(std::span(x), ReduceOp::sum);
      for (float v : x) ASSERT_EQ(v, 4.0f);
      counted[comm.rank()] = comm.bytes();
    });
    for (int r = 0; r < n; ++r) {
      const Expected e = count * 4 < 2048 ? recursive_doubling_bytes(r, n, count, 4) : Expected{2 * 3 * 4 * count / 4, 0, 6};
      EXPECT_EQ(counted[r].sent, e.sent) << "count " << count << " rank " << r;
      EXPECT_EQ(counted[r].messages_sent, e.messages) << "count " << count << " rank " << r;
    }
  }
}

TEST(AllReduceAlgorithms, ChooserOverridesTheSizeRule) {
  const int n = 3;
  std::vector<ByteCounters> counted(n);
  run_threads(n, [&](Communicator& comm) {
    comm.set_algorithm(Algorithm::auto_);
    comm.set_algorithm_chooser([](std::size_t) { return Algorithm::rabenseifner; });
    std::vector<float> x(10, 1.0f);
    comm.all_reduce(std::span(x), ReduceOp::sum);
    counted[comm.rank()] = comm.bytes();
  });
  for (int r = 0; r < n; ++r) {
    const Expected e = rabenseifner_bytes(r, n, 10, 4);
    EXPECT_EQ(counted[r].sent, e.sent) << "rank " << r;
    EXPECT_EQ(counted[r].messages_sent, e.messages) << "rank " << r;
  }
}

}  // namespace
}  // namespace laconic
