#include "framework/sync/noloco.h"

#include <numeric>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/rng.h"
#include "core/timer.h"

namespace laconic {
namespace {
constexpr std::uint64_t kStream = 0x4e4f4c4f434f0000ULL;  // "NOLOCO": a key of its own (core/rng.h purposes)
}  // namespace

NoLoco::NoLoco(NoLocoOptions opts) : opts_(opts) {
  LC_CHECK(opts_.period >= 1, "noloco: period ", opts_.period, ": expected at least 1");
  LC_CHECK(opts_.outer_lr > 0, "noloco: outer_lr ", opts_.outer_lr, ": expected > 0");
  LC_CHECK(opts_.momentum >= 0 && opts_.momentum < 1, "noloco: momentum ", opts_.momentum, ": expected [0, 1)");
  LC_CHECK(opts_.pull >= 0, "noloco: pull ", opts_.pull, ": expected >= 0");
  LC_CHECK(opts_.first_step >= 0, "noloco: first_step ", opts_.first_step);
}

void NoLoco::pairing(std::uint64_t seed, std::int64_t index, int world, std::vector<int>& perm) {
  perm.resize(static_cast<std::size_t>(world));  // no allocation once sized
  std::iota(perm.begin(), perm.end(), 0);
  const std::uint64_t key = rng::key({seed, kStream, static_cast<std::uint64_t>(index)});
  for (std::size_t i = perm.size(); i > 1; --i) {  // Fisher-Yates, from the top
    const std::size_t j = rng::below(key, i - 1, i);
    std::swap(perm[i - 1], perm[j]);
  }
}

int NoLoco::peer(std::uint64_t seed, std::int64_t index, int world, int rank, std::vector<int>& perm) {
  pairing(seed, index, world, perm);
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] == rank) {
      if (i + 1 == perm.size() && perm.size() % 2 == 1) return rank;  // the odd one out
      return perm[i ^ 1];
    }
  LC_CHECK(false, "noloco: rank ", rank, " not in a world of ", world);
  return rank;
}

void NoLoco::prepare(std::int64_t /*first_step*/) {
  if (store().device() != Device::cpu)
    LC_INPUT_ERROR("sync.strategy = \"noloco\" runs on the host only (no CUDA kernels yet): use device = \"cpu\"");
  const std::span<const float> p = store().params();
  anchor_.assign(p.begin(), p.end());
  momentum_.assign(p.size(), 0.0f);
  send_.resize(2 * p.size());
  recv_.resize(2 * p.size());
  perm_.resize(static_cast<std::size_t>(comm().size()));
}

void NoLoco::begin(std::int64_t /*step*/) {
  LC_CHECK(bound(), "NoLoco::begin before start()");
  const std::span<const float> p = store().params();
  std::copy(p.begin(), p.end(), anchor_.begin());
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
}

void NoLoco::finish(std::int64_t /*step*/) {
  LC_CHECK(bound(), "NoLoco::finish before start()");
  Stopwatch timer;
  comm().all_reduce(store().params(), ReduceOp::avg);
  comm_s_ += timer.seconds();
}

bool NoLoco::after_update(std::int64_t step) {
  if (!syncs(step)) return false;
  LC_CHECK(bound(), "NoLoco::after_update before start()");
  const std::span<float> p = store().params();
  const std::size_t n = p.size();
  const std::int64_t index = (step + 1 - opts_.first_step) / opts_.period - 1;
  const int me = comm().rank();
  const int other = peer(opts_.seed, index, comm().size(), me, perm_);
  for (std::size_t i = 0; i < n; ++i) {
    send_[i] = anchor_[i];
    send_[n + i] = p[i] - anchor_[i];
  }
  // The partner's (phi, theta - phi); sitting out, the group is this rank alone.
  const float* theirs = send_.data();
  if (other != me) {
    Stopwatch timer;
    comm().sendrecv(send_.data(), 2 * n * sizeof(float), other, recv_.data(), 2 * n * sizeof(float), other);
    comm_s_ += timer.seconds();
    theirs = recv_.data();
    ++stats_.calls;
    stats_.input_bytes += n * sizeof(float);
    stats_.value_bytes += 2 * n * sizeof(float);
  }
  // The lower rank's value first, so both partners add in the same order.
  const float* lo = other < me ? theirs : send_.data();
  const float* hi = other < me ? send_.data() : theirs;
  const auto alpha = static_cast<float>(opts_.outer_lr);
  const auto beta = static_cast<float>(opts_.momentum);
  const auto gamma = static_cast<float>(opts_.pull);
  for (std::size_t i = 0; i < n; ++i) {
    const float phi_mean = 0.5f * (lo[i] + hi[i]);
    const float d_mean = 0.5f * (lo[n + i] + hi[n + i]);
    const float phi = anchor_[i];
    const float m = beta * momentum_[i] + alpha * d_mean + gamma * (phi_mean - phi);
    momentum_[i] = m;
    anchor_[i] = phi + m;
    p[i] = anchor_[i];
  }
  return true;
}

std::vector<StateTensor> NoLoco::state() {
  return {{"noloco.anchor", std::span<float>(anchor_), Device::cpu},
          {"noloco.momentum", std::span<float>(momentum_), Device::cpu}};
}

std::string NoLoco::describe() const {
  std::ostringstream os;
  os << "NoLoCo (every " << opts_.period << " step" << (opts_.period == 1 ? "" : "s")
     << ", pairwise averaging with a random peer, outer heavy-ball lr " << opts_.outer_lr << " momentum "
     << opts_.momentum << " pull " << opts_.pull << "; no gradient reduction)";
  return os.str();
}

}  // namespace laconic
