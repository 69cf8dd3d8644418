// collectives/nominal_bytes.h: the byte counts that the MPI and NCCL backends add for their
// native collectives equal what the base class's default algorithms count on the threads
// backend, rank by rank, for every collective, root and world size 1..5 (counts that N divides
// and counts it does not, empty buffers included). No MPI or device needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "collectives/nominal_bytes.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"

namespace laconic {
namespace {

void expect_counts(const ByteCounters& got, const ByteCounters& want, const std::string& what) {
  EXPECT_EQ(got.sent, want.sent) << what;
  EXPECT_EQ(got.recv, want.recv) << what;
  EXPECT_EQ(got.messages_sent, want.messages_sent) << what;
}

// The nominal counts (what MPI and NCCL count for their native collectives) equal what the
// base class's default algorithms count on the threads backend, rank by rank. No device needed.
TEST(NominalBytes, EqualTheDefaultAlgorithmsCounts) {
  for (int n = 1; n <= 5; ++n) {
    for (std::size_t count : {0, 1, 3, 7, 64}) {
      run_threads(n, [&](Communicator& comm) {
        const int r = comm.rank();
        const auto un = static_cast<std::size_t>(n);
        const std::string where = detail::concat("n=", n, " rank ", r, " count=", count);
        std::vector<float> a(count * un, 1.0f), b(count * un, 0.0f);
        const auto delta = [&](auto call) {
          const ByteCounters before = comm.bytes();
          call();
          const ByteCounters after = comm.bytes();
          return ByteCounters{after.sent - before.sent, after.recv - before.recv,
                              after.messages_sent - before.messages_sent};
        };
        const Buf one{a.data(), count, DType::f32};
        expect_counts(delta([&] { comm.all_reduce(one, ReduceOp::sum); }),
                      nominal::all_reduce(count, DType::f32, r, n), "all_reduce " + where);
        for (int root = 0; root < n; ++root) {
          expect_counts(delta([&] { comm.reduce(one, ReduceOp::sum, root); }),
                        nominal::reduce(one.bytes(), r, root, n), detail::concat("reduce root ", root, " ", where));
          expect_counts(delta([&] { comm.broadcast(one, root); }), nominal::broadcast(one.bytes(), r, root, n),
                        detail::concat("broadcast root ", root, " ", where));
        }
        expect_counts(delta([&] { comm.reduce_scatter(CBuf{a.data(), count * un, DType::f32}, Buf{b.data(), count, DType::f32},
                                                      ReduceOp::sum); }),
                      nominal::reduce_scatter(count * 4, n), "reduce_scatter " + where);
        expect_counts(delta([&] { comm.all_gather(CBuf{a.data(), count, DType::f32}, Buf{b.data(), count * un, DType::f32}); }),
                      nominal::all_gather(count * 4, n), "all_gather " + where);
        std::vector<std::size_t> counts(un);
        for (std::size_t q = 0; q < un; ++q) counts[q] = count - std::min(count, q);
        std::size_t total = 0;
        for (std::size_t c : counts) total += c;
        expect_counts(delta([&] {
                        comm.all_gather_v(CBuf{a.data(), counts[static_cast<std::size_t>(r)], DType::f32},
                                          Buf{b.data(), total, DType::f32}, counts);
                      }),
                      nominal::all_gather_v(counts, DType::f32, r), "all_gather_v " + where);
        expect_counts(delta([&] { comm.all_to_all(CBuf{a.data(), count * un, DType::f32}, Buf{b.data(), count * un, DType::f32}); }),
                      nominal::all_to_all(count * 4, n), "all_to_all " + where);
        expect_counts(delta([&] { comm.barrier(); }), nominal::barrier(n), "barrier " + where);
      });
    }
  }
}

}  // namespace
}  // namespace laconic
