// What the tests of traced runs share: a temporary folder, a small traced recipe and its data.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "framework/recipe/recipe.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("laconic-sim-" + std::to_string(::getpid()) + "-" +
                                std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str(const std::string& sub) const { return (path / sub).string(); }
};

inline Recipe traced_recipe(int world) {
  Recipe r;
  r.run.seed = 3;
  r.model.hidden = {32, 16};
  r.train.steps = 12;
  r.train.micro_batch = 8;
  r.train.grad_accum = 2;
  r.train.log_every = 4;
  r.train.trace = AutoBool{true};
  r.optimizer.lr = 0.05;
  r.distributed.world_size = world;
  r.distributed.algorithm = Algorithm::ring;
  r.distributed.timeout_s = 60;
  r.sync.bucket_mb = 0.001;  // ~1 KB buckets: several per step, reduced while backward runs
  return r;
}

inline TrainData traced_data() {
  return image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
}

}  // namespace laconic
