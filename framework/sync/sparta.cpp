#include "framework/sync/sparta.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/rng.h"
#include "core/timer.h"

namespace laconic {
namespace {
constexpr std::uint64_t kStream = 0x5350415254410000ULL;  // "SPARTA": a key of its own (core/rng.h purposes)
}  // namespace

Sparta::Sparta(SpartaOptions opts) : opts_(opts) {
  LC_CHECK(opts_.fraction > 0 && opts_.fraction <= 1, "sparta: fraction ", opts_.fraction, ": expected (0, 1]");
  LC_CHECK(opts_.period >= 1, "sparta: period ", opts_.period, ": expected at least 1");
  if (opts_.fraction < 1)
    threshold_ = static_cast<std::uint64_t>(std::ldexp(opts_.fraction, 64));  // < 2^64: fraction < 1
}

void Sparta::prepare(std::int64_t /*first_step*/) {
  LC_CHECK(store().device() == Device::cpu, "sparta: runs on host buffers");
  const std::size_t n = store().params().size();
  LC_CHECK(n <= std::numeric_limits<std::uint32_t>::max(), "sparta: ", n, " parameters: at most 2^32 - 1");
  values_.resize(n);
  index_.resize(n);
}

bool Sparta::chosen(std::int64_t step, std::size_t i) const {
  if (opts_.fraction >= 1) return true;
  const std::uint64_t key = rng::key({opts_.seed, kStream, static_cast<std::uint64_t>(step)});
  return rng::bits(key, i) < threshold_;
}

bool Sparta::after_update(std::int64_t step) {
  if (!syncs(step)) return false;
  const std::span<float> p = store().params();
  const std::uint64_t key = rng::key({opts_.seed, kStream, static_cast<std::uint64_t>(step)});
  const bool all = opts_.fraction >= 1;
  std::size_t k = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (all || rng::bits(key, i) < threshold_) {
      index_[k] = static_cast<std::uint32_t>(i);
      values_[k++] = p[i];
    }
  Stopwatch timer;
  if (k > 0) comm().all_reduce(std::span<float>(values_.data(), k), ReduceOp::avg);
  comm_s_ += timer.seconds();
  for (std::size_t j = 0; j < k; ++j) p[index_[j]] = values_[j];
  ++stats_.calls;
  stats_.input_bytes += p.size() * sizeof(float);
  stats_.value_bytes += k * sizeof(float);
  return true;
}

std::string Sparta::describe() const {
  std::ostringstream os;
  os << "SPARTA (every " << opts_.period << " step" << (opts_.period == 1 ? "" : "s") << ", each parameter with chance "
     << opts_.fraction << " averaged over the ranks: the same elements on every rank, from the seed and the step; no "
     << "gradient reduction)";
  return os.str();
}

}  // namespace laconic
