// The checkpoint property: state() exposes every buffer an optimizer carries between steps, so
// a fresh optimizer that is prepare()d and given a copy of the state (and of the parameters)
// continues bit for bit like the original. And step() allocates nothing after the first call.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "optimizers/adamw.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"
#include "optimizers/muon.h"
#include "optimizers/sgd.h"

// Counts global operator new calls while armed (this test binary only).
namespace {
std::atomic<bool> g_armed{false};
std::atomic<long> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_armed.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace laconic {
namespace {

using Factory = std::function<std::unique_ptr<Optimizer>()>;

ParamStore make_store() {
  ParamStore s;
  s.add("w", {4, 3}, ParamGroup::decay, ParamKind::hidden_matrix);  // Muon orthogonalises it
  s.add("v", {5}, ParamGroup::decay);
  s.add("b", {3}, ParamGroup::no_decay);
  s.finalize();
  for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = std::cos(1.3f * i) * 0.7f;
  return s;
}

void set_grads(ParamStore& s, int t) {
  for (std::size_t i = 0; i < s.size(); ++i) s.grads()[i] = std::sin(0.61f * i + 0.9f * t) * (1 + 0.3f * t);
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Runs 3 steps on the original, copies state (except the buffer named `skip`) into a fresh
// optimizer, runs 3 more steps on both; returns whether the parameters stayed bitwise equal.
bool resumes_identically(const Factory& make, const std::string& skip = "") {
  ParamStore a = make_store();
  auto opt_a = make();
  for (int t = 0; t < 3; ++t) set_grads(a, t), opt_a->step(a, 0.1);

  ParamStore b = make_store();
  std::copy(a.params().begin(), a.params().end(), b.params().begin());
  auto opt_b = make();
  opt_b->prepare(b);
  auto from = opt_a->state(), to = opt_b->state();
  EXPECT_EQ(from.size(), to.size());
  for (std::size_t k = 0; k < std::min(from.size(), to.size()); ++k) {
    EXPECT_EQ(from[k].name, to[k].name);
    EXPECT_EQ(from[k].data.size(), to[k].data.size()) << from[k].name;
    if (from[k].name != skip && from[k].data.size() == to[k].data.size())
      std::copy(from[k].data.begin(), from[k].data.end(), to[k].data.begin());
  }
  for (int t = 3; t < 6; ++t) {
    set_grads(a, t), set_grads(b, t);
    opt_a->step(a, 0.05), opt_b->step(b, 0.05);
  }
  return same_bits(a.params(), b.params());
}

const std::vector<std::pair<std::string, Factory>>& optimizers() {
  static const std::vector<std::pair<std::string, Factory>> all = {
      {"adamw", [] { return std::make_unique<AdamW>(AdamWOptions{}); }},
      {"lars", [] { return std::make_unique<Lars>(LarsOptions{0.9, 0.01, 1e-3, 0.0}); }},
      {"lamb", [] { return std::make_unique<Lamb>(LambOptions{}); }},
      {"sgd", [] { return std::make_unique<Sgd>(SgdOptions{0.9, true, 1e-4}); }},
      {"muon", [] { return std::make_unique<Muon>(MuonOptions{}, AdamWOptions{}); }},
  };
  return all;
}

TEST(OptimizerState, CopiedStateContinuesBitwise) {
  for (const auto& [name, make] : optimizers()) EXPECT_TRUE(resumes_identically(make)) << name;
}

TEST(OptimizerState, EveryBufferMatters) {
  // Dropping any one buffer breaks the continuation: state() lists nothing superfluous, and the
  // step count really is part of the state (bias correction depends on it).
  for (const auto& [name, make] : optimizers()) {
    ParamStore s = make_store();
    auto opt = make();
    opt->prepare(s);
    for (const auto& st : opt->state()) EXPECT_FALSE(resumes_identically(make, st.name)) << name << " " << st.name;
  }
}

TEST(OptimizerState, StepCountIsExposed) {
  ParamStore s = make_store();
  AdamW adamw({});
  Lamb lamb({});
  for (int t = 0; t < 3; ++t) set_grads(s, t), adamw.step(s, 0.1), lamb.step(s, 0.1);
  for (auto* opt : std::initializer_list<Optimizer*>{&adamw, &lamb}) {
    const auto st = opt->state();
    ASSERT_EQ(st.size(), 3u);
    EXPECT_EQ(st[2].name, "step");
    ASSERT_EQ(st[2].data.size(), 1u);
    EXPECT_EQ(st[2].data[0], 3.0f);
  }
}

TEST(OptimizerState, PrepareKeepsLoadedState) {
  // prepare() on an already sized optimizer must not wipe what a checkpoint wrote.
  ParamStore s = make_store();
  Lars opt({});
  opt.prepare(s);
  opt.state()[0].data[2] = 0.25f;
  opt.prepare(s);
  EXPECT_EQ(opt.state()[0].data[2], 0.25f);
}

TEST(OptimizerState, StepAllocatesNothingAfterTheFirst) {
  const auto& all = optimizers();
  for (const auto& [name, make] : all) {
    ParamStore s = make_store();
    auto opt = make();
    set_grads(s, 0);
    opt->step(s, 0.1);
    g_news = 0;
    g_armed = true;
    for (int t = 1; t < 4; ++t) opt->step(s, 0.1);
    g_armed = false;
    EXPECT_EQ(g_news.load(), 0) << name;
  }
}

}  // namespace
}  // namespace laconic
