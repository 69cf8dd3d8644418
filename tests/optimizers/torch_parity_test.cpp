// SGD and AdamW against torch.optim 1.13 trajectories (tests/fixtures/optim/torch_reference.txt,
// written by gen_fixtures.py there): same initial parameters, gradients and per-step learning
// rates; 10 steps; a decay group (w1, w2) and a no_decay bias group (weight decay 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace laconic {
namespace {

struct Case {
  std::string optimizer;
  std::map<std::string, double> options;
  std::vector<std::vector<float>> expect;  // parameters after step 1, 2, ...
};

struct Fixture {
  std::vector<std::tuple<std::string, ParamGroup, std::vector<std::int64_t>>> tensors;
  std::vector<float> init;
  std::vector<double> lr;                 // per step
  std::vector<std::vector<float>> grads;  // per step
  std::vector<Case> cases;
};

std::vector<float> read_floats(std::istringstream& in) {
  std::vector<float> out;
  for (double x; in >> x;) out.push_back(static_cast<float>(x));
  return out;
}

Fixture load_fixture() {
  const std::string path = std::string(LACONIC_SOURCE_DIR) + "/tests/fixtures/optim/torch_reference.txt";
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  Fixture fx;
  for (std::string line; std::getline(file, line);) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "tensor") {
      std::string name, group;
      in >> name >> group;
      std::vector<std::int64_t> shape;
      for (std::int64_t d; in >> d;) shape.push_back(d);
      fx.tensors.emplace_back(name, group == "decay" ? ParamGroup::decay : ParamGroup::no_decay, shape);
    } else if (kind == "init") {
      fx.init = read_floats(in);
    } else if (kind == "step") {
      int t;
      double lr;
      in >> t >> lr;
      fx.lr.push_back(lr);
      fx.grads.push_back(read_floats(in));
    } else if (kind == "case") {
      Case c;
      in >> c.optimizer;
      for (std::string kv; in >> kv;) {
        const auto eq = kv.find('=');
        c.options[kv.substr(0, eq)] = std::stod(kv.substr(eq + 1));
      }
      fx.cases.push_back(std::move(c));
    } else if (kind == "expect") {
      int t;
      in >> t;
      fx.cases.back().expect.push_back(read_floats(in));
    }
  }
  return fx;
}

std::unique_ptr<Optimizer> make(const Case& c) {
  const auto& o = c.options;
  if (c.optimizer == "sgd")
    return std::make_unique<Sgd>(SgdOptions{o.at("momentum"), o.at("nesterov") != 0.0, o.at("weight_decay")});
  return std::make_unique<AdamW>(AdamWOptions{o.at("beta1"), o.at("beta2"), o.at("eps"), o.at("weight_decay")});
}

TEST(TorchParity, SgdAndAdamWMatchTorchOptimStepByStep) {
  const Fixture fx = load_fixture();
  ASSERT_EQ(fx.tensors.size(), 3u);
  ASSERT_EQ(fx.lr.size(), 10u);
  ASSERT_EQ(fx.cases.size(), 4u);
  for (const Case& c : fx.cases) {
    ParamStore store;
    for (const auto& [name, group, shape] : fx.tensors) store.add(name, shape, group);
    store.finalize();
    ASSERT_EQ(fx.init.size(), store.size());
    std::copy(fx.init.begin(), fx.init.end(), store.params().begin());
    auto opt = make(c);
    double worst = 0.0;
    for (std::size_t t = 0; t < fx.lr.size(); ++t) {
      std::copy(fx.grads[t].begin(), fx.grads[t].end(), store.grads().begin());
      opt->step(store, fx.lr[t]);
      ASSERT_EQ(c.expect[t].size(), store.size());
      for (std::size_t i = 0; i < store.size(); ++i) {
        const double ref = c.expect[t][i], diff = std::abs(store.params()[i] - ref);
        worst = std::max(worst, diff);
        // float32 trajectories: agree to a few ulps of the value (torch's vector kernels may fuse).
        EXPECT_LE(diff, 1e-6 * std::max(1.0, std::abs(ref))) << opt->describe() << " step " << t + 1 << " i " << i;
      }
    }
    std::printf("[torch parity] %-70s max |ours - torch| = %.3g over %zu steps\n", opt->describe().c_str(),
                worst, fx.lr.size());
  }
}

}  // namespace
}  // namespace laconic
