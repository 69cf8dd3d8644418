// Training from inside a user's program: a recipe written in code (TOML text; load_recipe reads a
// file the same way), one call to laconic::train, and the summary back as a struct. Here: the MLP
// on Fashion-MNIST over 4 workers with DiLoCo, then the same budget with all-reduce, side by side.
//
//   train_from_cpp [OUT_DIR]     (default: runs-example/) exit 0 when both runs learn
#include <laconic/laconic.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "runs-example";
  const std::string text = R"(
[run]
seed = 1
[model]
hidden = [128]
[data]
name = "fashion_mnist"
[train]
steps = 150
micro_batch = 32
log_every = 50
[optimizer]
name = "sgd"
lr = 0.05
[distributed]
world_size = 4
[sync]
strategy = "diloco"
[sync.diloco]
period = 10
)";
  try {
    double accuracy[2] = {0, 0};
    const char* strategies[] = {"diloco", "allreduce"};
    for (int i = 0; i < 2; ++i) {
      // Overrides as on the trainer's command line: "section.key=value".
      const laconic::Recipe recipe = laconic::parse_recipe(
          text, "example.toml", {std::string("sync.strategy=") + strategies[i], "run.out_dir=" + out});
      laconic::TrainOptions options;
      options.run_dir = out + "/" + strategies[i];  // recipe.resolved.toml, metrics.jsonl, summary.json
      const laconic::TrainSummary s = laconic::train(recipe, options);
      std::printf("%-9s  %lld steps  eval loss %.4f  accuracy %.1f%%  sent %llu bytes per rank\n", strategies[i],
                  static_cast<long long>(s.steps), s.eval_loss, 100 * s.eval_accuracy,
                  static_cast<unsigned long long>(s.bytes_sent));
      accuracy[i] = s.eval_accuracy;
    }
    return accuracy[0] > 0.6 && accuracy[1] > 0.6 ? 0 : 1;
  } catch (const laconic::InputError& e) {  // a bad recipe or data file: one line
    std::fprintf(stderr, "train_from_cpp: %s\n", e.what());
    return 2;
  }
}
