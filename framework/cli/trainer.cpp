// trainer: the command-line front end. It only parses arguments and calls framework/train.
//
//   trainer --recipe recipes/NAME.toml [--section.key=value ...] [--out DIR]
//           [--print-config] [--dry-run]
//
// Exit codes: 0 success, 2 bad input (recipe, flag, data file; one-line message), 1 failure.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "framework/core/check.h"
#include "framework/recipe/recipe.h"
#include "framework/train/trainer.h"

namespace {

constexpr int kInputError = 2;

// "--section.key=value" arguments are recipe overrides; everything else goes to CLI11.
std::vector<std::string> take_overrides(int argc, char** argv, std::vector<std::string>& rest) {
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const auto dot = a.find('.');
    if (a.rfind("--", 0) == 0 && dot != std::string::npos && eq != std::string::npos && dot < eq)
      overrides.push_back(a.substr(2));
    else
      rest.push_back(a);
  }
  return overrides;
}

int run(int argc, char** argv) {
  std::vector<std::string> rest;
  const auto overrides = take_overrides(argc, argv, rest);

  CLI::App app{"Laconic trainer: data-parallel training that communicates little.\n"
               "Recipe keys can be overridden as --section.key=value (e.g. --train.steps=100)."};
  std::string recipe_path, out_dir;
  bool print_config = false, dry_run = false;
  app.add_option("--recipe", recipe_path, "TOML recipe to run")->required();
  app.add_option("--out", out_dir, "run directory (default: [run] out_dir / [run] name)");
  app.add_flag("--print-config", print_config, "print the resolved recipe as TOML and exit");
  app.add_flag("--dry-run", dry_run, "validate the recipe and data, print the plan, write nothing");
  std::vector<const char*> args{argv[0]};
  for (const auto& a : rest) args.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "trainer: error: " << e.what() << " (see trainer --help)\n";
    return kInputError;
  }

  const laconic::Recipe recipe = laconic::load_recipe(recipe_path, overrides);
  if (print_config) {
    std::cout << laconic::to_toml(recipe);
    return 0;
  }
  const laconic::TrainData data = laconic::load_data(recipe);
  if (dry_run) {
    const auto plan = laconic::make_plan(recipe, data);
    std::cout << "recipe:       " << recipe_path << "\n"
              << "model:        " << plan.model << "\n"
              << "world size:   " << recipe.distributed.world_size << " (" << laconic::name_of(recipe.distributed.backend) << ")\n"
              << "global batch: " << plan.global_batch << "\n"
              << "steps:        " << plan.steps << " (" << plan.steps_per_epoch << " per epoch)\n"
              << "dry run: nothing written\n";
    return 0;
  }
  laconic::TrainOptions opts;
  opts.run_dir = out_dir.empty() ? (std::filesystem::path(recipe.run.out_dir) / recipe.run.name).string() : out_dir;
  opts.log = &std::cout;
  opts.progress_line = ::isatty(STDOUT_FILENO) != 0;
  const auto s = laconic::train(recipe, data, opts);
  std::cout << "done: " << s.steps << " steps in " << s.wall_s << " s, final loss " << s.final_loss
            << ", eval accuracy " << 100.0 * s.eval_accuracy << "%, sent " << s.bytes_sent
            << " bytes per rank; results in " << opts.run_dir << "/\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const laconic::InputError& e) {
    std::cerr << "trainer: error: " << e.what() << "\n";
    return kInputError;
  } catch (const std::exception& e) {
    std::cerr << "trainer: failed: " << e.what() << "\n";
    return 1;
  }
}
