// The report's statement of its protocol (framework/report/protocol.h): what the variants matched,
// read from their resolved recipes, and where they started.
#include "framework/report/protocol.h"

#include <gtest/gtest.h>

namespace laconic {
namespace {

RunResult run(const std::string& name, std::int64_t steps, int micro_batch, int world, const std::string& init = "\"\"") {
  RunResult r;
  r.name = name;
  r.steps = steps;
  r.recipe = {{"train.micro_batch", std::to_string(micro_batch)}, {"train.grad_accum", "1"},
              {"distributed.world_size", std::to_string(world)}, {"model.init_from", init}};
  return r;
}

TEST(Protocol, SaysWhatTheVariantsMatched) {
  EXPECT_EQ(protocol_markdown({run("dp/seed0", 100, 8, 8), run("dp/seed1", 100, 8, 8), run("diloco/seed0", 100, 8, 8)}),
            "- **Budget**: matched by examples (tokens) and by updates: every variant trains 100 optimizer steps of 64 "
            "examples (6400 examples)\n- **Start**: from scratch (each seed's initialisation)\n");
  // Twice the global batch for half the steps: the same examples, not the same updates.
  EXPECT_NE(protocol_markdown({run("a", 100, 8, 4), run("b", 50, 16, 4)})
                .find("matched by examples (tokens), 3200 each, not by updates (a 100 steps, b 50 steps)"),
            std::string::npos);
  EXPECT_NE(protocol_markdown({run("a", 100, 8, 4), run("b", 100, 8, 8)})
                .find("matched by updates, 100 steps each, not by examples (a 3200 examples, b 6400 examples)"),
            std::string::npos);
  EXPECT_NE(protocol_markdown({run("a", 100, 8, 4), run("b", 30, 8, 8)}).find("**not matched**"), std::string::npos);
}

TEST(Protocol, SaysWhereTheRunsStarted) {
  EXPECT_NE(protocol_markdown({run("a", 1, 1, 1, "\"w.safetensors\""), run("b", 1, 1, 1, "\"w.safetensors\"")})
                .find("every variant from the same weights, `w.safetensors`"),
            std::string::npos);
  EXPECT_NE(protocol_markdown({run("a", 1, 1, 1, "\"w.safetensors\""), run("b", 1, 1, 1)}).find("**different starts**"),
            std::string::npos);
  // One variant, or runs without a recipe (--runs of old directories): nothing to say.
  EXPECT_EQ(protocol_markdown({run("a/seed0", 1, 1, 1), run("a/seed1", 1, 1, 1)}), "");
  RunResult bare;
  bare.name = "x";
  EXPECT_EQ(protocol_markdown({bare, run("b", 1, 1, 1)}), "");
}

}  // namespace
}  // namespace laconic
