// The trainer's command line (laconic::train_main, train_main.h): it only parses arguments and
// calls framework/train. The trainer program (tools/trainer.cpp) is this one call; a user's own
// trainer, with models or reducers of its own registered first, is the same call in its main().
//
//   trainer --recipe recipes/NAME.toml [--section.key=value ...] [--out DIR]
//           [--print-config] [--dry-run]
//   mpirun -np 4 trainer --recipe ...         (the MPI backend, one rank per process)
//   trainer plan [--params 7e9] [--dtype bf16] [--world-sizes 8,64,1024] [--intra "450 GB/s"] ...
//   trainer compare --recipe R --vary sync.strategy=allreduce,topk [--vary ...] --out DIR
//                   [--target-loss X] [--seeds N] [--budget examples=E|bytes=B|sim_time=T]
//                   [--tune [VARIANT:]section.key=v1,v2 ...] [--tune-seeds N]
//                   [--section.key=value ...]                        (variants, one after another)
//   trainer compare --runs DIR1 DIR2 ... --out DIR [--target-loss X]  (finished runs)
//   trainer simulate RUN_DIR [--network NET.toml | --platform FILE.xml] [--as-params N] [--world N [--groups G]] [--out DIR]
//   trainer tokenize --input PATH... --vocab-size N --out DIR [--eval-fraction F] [--extensions .txt,.md]
//                    [--lowercase false]
//   trainer export RUN_DIR|CHECKPOINT_DIR --format safetensors --out FILE [--recipe R] [--config config.json]
//                  [--tokenizer tokenizer.json]
//   trainer generate RUN_DIR|CHECKPOINT_DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
//   trainer elastic --replicas N [--max-restarts K] --recipe R --out DIR [--store redis:HOST:PORT] [--resume]
//                   [--section.key=value ...]   (N replica processes, restarted when they die)
//   trainer elastic --replicas N ... --recipe R --out DIR -- COMMAND ARGS   (each replica runs the
//                   command, a laconic.torch script: framework/elastic/supervisor.h)
//   trainer --recipe R --replica I --replicas N --elastic-store SPEC --out DIR   (one replica; what
//                   `trainer elastic` starts)
//
// Exit codes: 0 success, 2 bad input (recipe, flag, data file; one-line message), 1 failure,
// 128 + N stopped by signal N (a checkpoint was written), 75 stopped by train.time_limit, 76 an
// elastic replica dropped from its run (restart it to rejoin).
#include <unistd.h>


#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/netsim/plan.h"
#include "collectives/netsim/topology.h"
#include "framework/cli/train_main.h"
#include "core/check.h"
#include "workloads/data/token_files.h"
#include "framework/elastic/elastic.h"
#include "framework/elastic/supervisor.h"
#include "framework/recipe/recipe.h"
#include "framework/report/compare.h"
#include "framework/report/seeds.h"
#include "core/units.h"
#include "framework/train/elastic_hook.h"
#include "framework/inference/export.h"
#include "framework/inference/generate.h"
#include "framework/train/run_dir.h"
#include "sim/failures.h"
#include "framework/train/faults.h"
#include "framework/train/memory_plan.h"
#include "workloads/models/model.h"
#include "framework/train/simulate.h"
#include "framework/train/tensorboard.h"
#include "framework/train/trainer.h"
#include "framework/train/world.h"

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

laconic::DType parse_dtype(const std::string& s) {
  for (auto t : {laconic::DType::f32, laconic::DType::bf16, laconic::DType::f16, laconic::DType::i32, laconic::DType::u8})
    if (s == laconic::name_of(t)) return t;
  LC_INPUT_ERROR("--dtype: expected one of f32, bf16, f16, i32, u8, got \"", s, "\"");
}

struct PlanArgs {
  // The memory table: a recipe (default: the built-in defaults) with these keys set when given.
  std::string recipe, optimizer, strategy, shard;
  double params = 7e9;
  std::string dtype = "bf16";
  std::vector<int> world_sizes = {8, 64, 1024};
  int ranks_per_node = 8;
  std::string intra = "450 GB/s", intra_latency = "1 us", inter = "50 GB/s", inter_latency = "2 us";
  double gamma = 0;
  std::vector<double> small_bytes = {4096};
};

void add_plan_options(CLI::App& plan, PlanArgs& a) {
  plan.add_option("--params", a.params, "gradient elements all-reduced per step")->capture_default_str();
  plan.add_option("--dtype", a.dtype, "gradient dtype on the wire: f32, bf16, f16")->capture_default_str();
  plan.add_option("--world-sizes", a.world_sizes, "world sizes to tabulate")->delimiter(',')->capture_default_str();
  plan.add_option("--ranks-per-node", a.ranks_per_node, "ranks sharing the intra-node link")->capture_default_str();
  plan.add_option("--intra", a.intra, "intra-node bandwidth")->capture_default_str();
  plan.add_option("--intra-latency", a.intra_latency, "intra-node latency")->capture_default_str();
  plan.add_option("--inter", a.inter, "inter-node bandwidth")->capture_default_str();
  plan.add_option("--inter-latency", a.inter_latency, "inter-node latency")->capture_default_str();
  plan.add_option("--gamma", a.gamma, "reduction cost, seconds per byte")->capture_default_str();
  plan.add_option("--small-bytes", a.small_bytes, "message sizes of the latency tables")->delimiter(',')->capture_default_str();
  plan.add_option("--recipe", a.recipe, "the memory table's recipe (default: the built-in defaults)");
  plan.add_option("--optimizer", a.optimizer, "the memory table's optimizer.name (default: the recipe's)");
  plan.add_option("--strategy", a.strategy, "the memory table's sync.strategy (default: the recipe's)");
  plan.add_option("--shard", a.shard, "the memory table's sync.shard: none, optimizer, gradients or outer (default: the recipe's)");
}

// Bytes per rank for each world size (framework/train/memory_plan.h), in the units of the time table.
laconic::Recipe plan_recipe(const PlanArgs& a) {
  std::vector<std::string> keys;
  if (!a.optimizer.empty()) keys.push_back("optimizer.name=" + a.optimizer);
  if (!a.strategy.empty()) keys.push_back("sync.strategy=" + a.strategy);
  if (!a.shard.empty()) keys.push_back("sync.shard=" + a.shard);
  return a.recipe.empty() ? laconic::parse_recipe("[train]\nsteps = 1\n", "trainer plan", keys)
                          : laconic::load_recipe(a.recipe, keys);
}

void print_memory_plan(const PlanArgs& a, laconic::Recipe r, std::ostream& os) {
  os << "\nMemory per rank: " << laconic::param_count_text(static_cast<std::size_t>(a.params)) << " parameters, optimizer " << r.optimizer.name.value
     << ", sync.strategy " << r.sync.strategy.value << ", sync.shard " << laconic::name_of(r.sync.shard)
     << " (fp32; activations and data not included)\n\n"
     << "| ranks | weights | gradients | optimizer state | strategy state | strategy buffers | total |\n"
     << "|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto b = [](double v) { return laconic::format_bytes(v); };
  for (int n : a.world_sizes) {
    r.distributed.world_size = n;
    const laconic::MemoryPlan m = laconic::plan_memory(r, a.params, n);
    os << "| " << n << " | " << b(m.weights) << " | " << b(m.gradients) << " | " << b(m.optimizer) << " | "
       << b(m.strategy) << " | " << b(m.buffers) << " | " << b(m.total()) << " |\n";
  }
}

int run_plan(const PlanArgs& a) {
  laconic::PlanOptions o;
  if (!(a.params > 0)) LC_INPUT_ERROR("--params: expected a positive number, got ", a.params);
  if (a.ranks_per_node < 1) LC_INPUT_ERROR("--ranks-per-node: expected an integer >= 1, got ", a.ranks_per_node);
  for (int n : a.world_sizes)
    if (n < 1) LC_INPUT_ERROR("--world-sizes: expected integers >= 1, got ", n);
  o.parameters = a.params;
  o.dtype = parse_dtype(a.dtype);
  o.world_sizes = a.world_sizes;
  o.ranks_per_group = a.ranks_per_node;
  o.intra = {laconic::require_bandwidth(a.intra, "--intra"), laconic::require_duration(a.intra_latency, "--intra-latency")};
  o.inter = {laconic::require_bandwidth(a.inter, "--inter"), laconic::require_duration(a.inter_latency, "--inter-latency")};
  o.gamma_s_per_byte = a.gamma;
  o.small_message_bytes = a.small_bytes;
  const laconic::Recipe memory = plan_recipe(a);  // a bad key refused before anything is printed
  laconic::print_plan(o, std::cout);
  print_memory_plan(a, memory, std::cout);
  return 0;
}

struct CompareArgs {
  std::string recipe, out, plot_script;
  std::string package_plot_script;  // train_main's plot_script: the package's, for programs installed elsewhere
  std::vector<std::string> vary, runs, networks;
  double target_loss = 0;
  CLI::Option* target_option = nullptr;  // given or not: any loss, 0 included, is a valid target
  bool no_plots = false;
  int seeds = 1;
  std::vector<std::string> tune;
  int tune_seeds = 1;
  std::int64_t warm_start = 0;
  std::string budget;
  double as_params = 0;  // a double, so that 7e9 is accepted
  std::string tensorboard;  // --tensorboard LOGDIR
};

void add_compare_options(CLI::App& c, CompareArgs& a) {
  c.add_option("--tensorboard", a.tensorboard, "also write every compared run's records into LOGDIR/<run name> as "
                                               "TensorBoard events (tensorboard's own writer: the PyPI environment)");
  c.add_option("--recipe", a.recipe, "recipe whose variants to train (with --vary)");
  c.add_option("--vary", a.vary, "section.key=v1,v2,... one variant per value; repeat for the cartesian product")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c.add_option("--runs", a.runs, "finished run directories to compare instead (the first is the baseline)")
      ->expected(1, -1);
  c.add_option("--out", a.out, "where report.md, compare.json, the plots (and the variants' runs) go")->required();
  a.target_option = c.add_option("--target-loss", a.target_loss,
               "loss for time-to-target (default: the baseline's final eval loss x 1.02)");
  c.add_option("--plot-script", a.plot_script, "the plotting script (default: share/laconic/scripts/plot of the install, or the source tree's scripts/plot)");
  c.add_flag("--no-plots", a.no_plots, "write the report without plots");
  c.add_option("--seeds", a.seeds, "train every variant with N seeds (run.seed + 0..N-1, matched across variants); "
                                   "tables show mean +- std, plots bands")->capture_default_str();
  c.add_option("--tune", a.tune, "[VARIANT:]section.key=v1,v2,... tune each variant (or VARIANT) over these values "
                                 "first, on the validation half of the held-out data; the comparison then runs each "
                                 "variant's best on the test half (docs/compare.md#tuning)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c.add_option("--tune-seeds", a.tune_seeds, "seeds per tuning configuration (run.seed + 1000 + 0..N-1)")->capture_default_str();
  c.add_option("--warm-start", a.warm_start, "start every run from the weights of a data-parallel run of N steps "
                                             "(trained first into OUT/warm_start; DiLoCo's protocol)");
  c.add_option("--budget", a.budget, "compare losses at an equal budget: examples=E, bytes=B (inter-tier when "
                                     "simulated, e.g. 25MB) or sim_time=T (e.g. 90s)");
  c.add_option("--networks", a.networks, "replay every run on each of these [network] TOML files (a,b,...): a report "
                                         "per network and networks.md, runs x networks")
      ->delimiter(',');
  c.add_option("--as-params", a.as_params, "project every run's simulated time and bytes onto a model of N parameters "
                                           "(e.g. 7e9; the runs need a [network])");
  c.footer("Recipe overrides (--section.key=value) apply to every variant; --vary assignments come last.\n"
           "Variants train one after another in this process (threads backend); not under mpirun.");
}

// For the report: the command as one could paste it back into a shell.
std::string shell_command(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = i == 0 ? "trainer" : argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789_./=,:+@%-") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (const char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}

// scripts/plot from this program's own location: installed, <prefix>/bin/trainer finds
// <prefix>/share/laconic/scripts/plot; in a build directory of the source tree (build/,
// build-*/), <tree>/scripts/plot. Else `package` (a program of the user's, built against the
// package: train_main.h), when it exists. "" when none is there.
std::string default_plot_script(const std::string& package) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto up = exe.parent_path().parent_path();
    for (const auto& script : {up / "share" / "laconic" / "scripts" / "plot", up / "scripts" / "plot"})
      if (std::filesystem::exists(script, ec)) return script.string();
  }
  return !package.empty() && std::filesystem::exists(package, ec) ? package : "";
}

// --as-params N of `command`: a whole number of parameters >= 1, or 0 when not given.
std::int64_t as_params_flag(double n, const char* command) {
  if (n != 0 && !(n >= 1 && n < 1e15 && n == std::floor(n)))
    LC_INPUT_ERROR(command, ": --as-params: expected a whole number of parameters >= 1, got ", n);
  return static_cast<std::int64_t>(n);
}

// Every run of OUT/compare.json into LOGDIR/<its name> (tensorboard.h).
void add_to_tensorboard(const std::string& python, const std::string& out, const std::string& logdir) {
  const auto path = std::filesystem::path(out) / "compare.json";
  std::ifstream in(path);
  const nlohmann::json c = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!c.is_object() || !c.contains("runs") || !c["runs"].is_array())
    LC_INPUT_ERROR(path.string(), ": no runs to write for --tensorboard");
  std::vector<std::string> args;
  std::string names;
  for (const auto& r : c["runs"]) {
    args.push_back(r.at("dir").get<std::string>());
    names += (names.empty() ? "" : ",") + r.at("name").get<std::string>();
  }
  args.insert(args.end(), {"--logdir", logdir, "--names", names});
  if (const std::string err = laconic::run_tensorboard(python, args); !err.empty())
    LC_INPUT_ERROR("compare: --tensorboard ", logdir, ": ", err);
  std::cout << "compare: the runs' records are in " << logdir << " (tensorboard --logdir " << logdir << ")\n";
}

int run_compare(const CompareArgs& a, const std::vector<std::string>& overrides, int argc, char** argv) {
  const bool variants = !a.recipe.empty() || !a.vary.empty();
  if (variants == !a.runs.empty())
    LC_INPUT_ERROR("compare: expected either --recipe R --vary KEY=V1,V2 or --runs DIR1 DIR2 ...");
  if (!variants && !overrides.empty())
    LC_INPUT_ERROR("compare: --", overrides.front(), ": recipe overrides need --recipe (finished runs "
                   "are compared as they ran)");
  if (variants && a.recipe.empty()) LC_INPUT_ERROR("compare: --vary needs --recipe");
  laconic::CompareOptions o;
  o.out_dir = a.out;
  if (a.target_option->count() > 0) o.target = a.target_loss;
  o.command = shell_command(argc, argv);
  if (a.no_plots) {
    o.plot_note = "not requested (--no-plots)";
  } else {
    o.plot_script = a.plot_script.empty() ? default_plot_script(a.package_plot_script) : a.plot_script;
    if (o.plot_script.empty())
      o.plot_note = "scripts/plot not found from the trainer's location (share/laconic/scripts or the source tree) nor at \"" +
                    a.package_plot_script + "\" (the package's); pass --plot-script";
  }
  o.log = &std::cout;
  o.progress_line = ::isatty(STDOUT_FILENO) != 0;
  o.networks = a.networks;
  o.seeds = a.seeds;
  if (a.seeds != 1 && !variants) LC_INPUT_ERROR("compare: --seeds needs --recipe and --vary (finished runs ran with their own seeds)");
  o.tune = a.tune;
  o.warm_start = a.warm_start;
  if (a.warm_start != 0 && !variants) LC_INPUT_ERROR("compare: --warm-start needs --recipe and --vary");
  o.tune_seeds = a.tune_seeds;
  if ((!a.tune.empty() || a.tune_seeds != 1) && !variants)
    LC_INPUT_ERROR("compare: --tune needs --recipe and --vary (finished runs cannot be tuned)");
  if (!a.budget.empty()) o.budget = laconic::parse_budget(a.budget);
  o.as_params = as_params_flag(a.as_params, "compare");
  // Before anything trains: an interpreter that can write the events, or one line and exit 2.
  const std::string python = a.tensorboard.empty() ? "" : laconic::tensorboard_python("compare: --tensorboard");
  if (variants) laconic::compare_variants(a.recipe, overrides, a.vary, o);
  else laconic::compare_run_dirs(a.runs, o);
  if (!python.empty()) add_to_tensorboard(python, a.out, a.tensorboard);
  return 0;
}

struct SimulateArgs {
  std::string run_dir;
  std::string failures;  // --failures mtbf=...,restart=...: goodput of checkpoint-restart vs elastic
  double as_params = 0;  // a double, so that 7e9 is accepted
  laconic::SimulateOptions o;
};

void add_simulate_options(CLI::App& sim, SimulateArgs& a) {
  sim.add_option("run_dir", a.run_dir, "a finished run's directory (with trace/)")->required();
  sim.add_option("--network", a.o.network_file, "a TOML file with a [network] table (default: the run's own)");
  sim.add_option("--failures", a.failures, "mtbf=D,restart=D[,seed=N,trials=N,checkpoint_every=N,period=N]: goodput "
                                           "of data parallel with checkpoint-restart against elastic training when "
                                           "hosts fail at random");
  sim.add_option("--platform", a.o.platform_file, "a SimGrid platform file (XML); its first N hosts are the ranks");
  sim.add_option("--as-params", a.as_params, "project message bytes and compute onto a model of N parameters (e.g. 7e9)");
  sim.add_option("--out", a.o.out_dir, "where summary.json and timeline.json go (default: RUN_DIR/simulated, "
                                       "RUN_DIR/simulated-world-N with --world)");
  sim.add_option("--world", a.o.world, "replay the run as N ranks: each collective regenerated for N, compute as "
                                       "recorded (a run recorded at a few ranks projected to thousands)");
  sim.add_option("--groups", a.o.groups, "with --world: in G groups (datacenters) of N/G ranks (default: the run's)");
  sim.add_option("--exact-up-to", a.o.exact_up_to, "with --world: rings of at most this many ranks replay message by "
                                                   "message, larger ones as one flow per rank (docs/simulation.md)")
      ->capture_default_str();
}

// --failures: the replayed step time under both failure policies (sim/failures.h),
// printed and written to OUT/goodput.json.
// A long duration in the unit that reads best: "14.5 days", "3.2 h", "12 min", "12.5 s".
std::string long_duration(double s) {
  char out[32];
  if (s >= 2 * 86400) std::snprintf(out, sizeof out, "%.3g days", s / 86400);
  else if (s >= 2 * 3600) std::snprintf(out, sizeof out, "%.3g h", s / 3600);
  else if (s >= 120) std::snprintf(out, sizeof out, "%.3g min", s / 60);
  else std::snprintf(out, sizeof out, "%.3g s", s);
  return out;
}

void report_failures(const SimulateArgs& a, const laconic::FailureModel& m, const laconic::Simulation& s) {
  const laconic::Recipe r = laconic::load_recipe((std::filesystem::path(a.run_dir) / "recipe.resolved.toml").string());
  laconic::FailureRun run;
  run.hosts = r.distributed.world_size;
  run.replicas = m.replicas > 0 ? m.replicas : r.network.groups > 0 ? r.network.groups : run.hosts;
  const std::int64_t replayed = s.steps.empty() ? 0 : s.steps.back() - s.first_step;
  run.step_s = replayed > 0 ? s.time_s / static_cast<double>(replayed) : 0;
  run.steps = m.steps > 0 ? m.steps : replayed;
  const std::string& strategy = r.sync.strategy.value;
  std::int64_t period = m.period;
  if (period == 0) {
    const laconic::StrategyTraits& t = laconic::strategy_traits(strategy);
    if (!t.periodic)
      LC_INPUT_ERROR("--failures: the run's sync.strategy \"", strategy, "\" has no outer period; give period=N for the elastic side");
    period = t.periodic(r).period;
  }
  run.period = period;
  run.checkpoint_every = m.checkpoint_every > 0 ? m.checkpoint_every : r.checkpoint.every > 0 ? r.checkpoint.every : period;
  run.join_timeout_s = r.elastic.join_timeout_s;
  if (replayed < 1) LC_INPUT_ERROR("--failures: the replay of ", a.run_dir, " has no steps to replay failures on");
  if (run.hosts % run.replicas != 0)
    LC_INPUT_ERROR("--failures: replicas=", run.replicas, ": expected a divisor of the run's ", run.hosts, " hosts");
  const laconic::GoodputResult g = laconic::simulate_failures(m, run);
  std::cout << std::defaultfloat << std::setprecision(4) << "simulate: failures: " << run.hosts << " hosts failing every "
            << long_duration(m.mtbf_s) << " on average, back after " << long_duration(m.restart_s)
            << "; " << run.steps << " steps of " << long_duration(run.step_s) << " ("
            << long_duration(run.steps * run.step_s) << " without failures); " << m.trials << " trials from seed "
            << m.seed << ", " << g.failures << " failures each on average\n"
            << std::fixed << std::setprecision(1)
            << "simulate:   data parallel, checkpoint-restart every " << run.checkpoint_every << " steps: goodput "
            << 100 * g.goodput_dp << "% +- " << 100 * g.goodput_dp_std << " (" << long_duration(g.wall_dp_s)
            << ", " << g.lost_dp_steps << " steps redone)\n"
            << "simulate:   elastic, " << run.replicas << " replicas syncing every " << run.period << " steps: goodput "
            << 100 * g.goodput_elastic << "% +- " << 100 * g.goodput_elastic_std << " ("
            << long_duration(g.wall_elastic_s) << ", " << g.lost_elastic_replica_steps
            << " replica-steps lost)\n";
  nlohmann::ordered_json j;
  j["mtbf_s"] = m.mtbf_s;
  j["restart_s"] = m.restart_s;
  j["seed"] = m.seed;
  j["trials"] = m.trials;
  j["hosts"] = run.hosts;
  j["replicas"] = run.replicas;
  j["steps"] = run.steps;
  j["step_s"] = run.step_s;
  j["period"] = run.period;
  j["checkpoint_every"] = run.checkpoint_every;
  j["join_timeout_s"] = run.join_timeout_s;
  j["failures_per_trial"] = g.failures;
  j["data_parallel"] = {{"goodput", g.goodput_dp}, {"goodput_std", g.goodput_dp_std}, {"wall_s", g.wall_dp_s},
                        {"steps_redone", g.lost_dp_steps}};
  j["elastic"] = {{"goodput", g.goodput_elastic}, {"goodput_std", g.goodput_elastic_std}, {"wall_s", g.wall_elastic_s},
                  {"replica_steps_lost", g.lost_elastic_replica_steps}};
  laconic::write_file_atomic(s.out_dir + "/goodput.json", j.dump(2) + "\n");
  std::cout << "simulate: wrote " << s.out_dir << "/goodput.json\n";
}

int run_simulate(const SimulateArgs& a) {
  if (!a.o.network_file.empty() && !a.o.platform_file.empty())
    LC_INPUT_ERROR("simulate: expected --network or --platform, not both");
  laconic::SimulateOptions o = a.o;
  o.as_params = as_params_flag(a.as_params, "simulate");
  std::optional<laconic::FailureModel> model;  // checked before the replay
  if (!a.failures.empty()) model = laconic::parse_failures(a.failures);
  else model.emplace();
  const laconic::Simulation s = laconic::simulate_run(a.run_dir, o);
  std::cout << "simulate: " << s.replay.engine << "\n"
            << "simulate: on " << s.network << "\n";
  if (s.world > 0)
    std::cout << "simulate: a PROJECTION of the " << s.recorded_world << "-rank run onto " << s.world << " ranks in "
              << s.groups << (s.groups == 1 ? " group" : " groups") << " (collectives regenerated, compute as recorded)\n";
  if (s.as_params > 0)
    std::cout << "simulate: a PROJECTION onto " << s.as_params << " parameters (bytes and compute x" << s.scale
              << "); convergence is the measured run's\n";
  std::cout << std::defaultfloat << std::setprecision(4) << "simulate: " << s.steps.size() - 1 << " steps in "
            << s.time_s << " s simulated, rank 0 waited " << s.exposed_s << " s for communication ("
            << (s.time_s > 0 ? 100 * s.exposed_s / s.time_s : 0) << "%), sent " << s.bytes_intra << " B inside groups, "
            << s.bytes_inter << " B between\n"
            << "simulate: wrote " << s.out_dir << "/summary.json"
            << (s.world > laconic::kMaxTimelineRanks ? " (no timeline beyond " + std::to_string(laconic::kMaxTimelineRanks) + " ranks)\n"
                                            : std::string(" and timeline.json (open in ui.perfetto.dev)\n"));
  if (!a.failures.empty()) report_failures(a, *model, s);
  return 0;
}

void add_tokenize_options(CLI::App& tok, laconic::TokenizeOptions& o) {
  tok.add_option("--input", o.inputs, "text files or folders (a folder's files with --extensions)")->required();
  tok.add_option("--vocab-size", o.vocab_size, "BPE vocabulary, special and byte tokens included (<= 65536)")->capture_default_str();
  tok.add_option("--out", o.out_dir, "folder for train.bin, val.bin and tokenizer.txt")->required();
  tok.add_option("--eval-fraction", o.eval_fraction, "share of documents held out to val.bin")->capture_default_str();
  tok.add_option("--extensions", o.extensions, "the files read inside a folder (\"\" = no extension)")->delimiter(',')->capture_default_str();
  tok.add_option("--lowercase", o.lowercase, "fold A-Z to a-z before tokenizing (true or false)")->capture_default_str();
}

int run_tokenize(const laconic::TokenizeOptions& o) {
  const laconic::TokenizeReport r = laconic::tokenize_to_files(o);
  for (const std::string& line : r.read) std::cout << "text: " << line << "\n";
  std::cout << "tokenize: " << r.documents << " documents, vocabulary " << r.vocab << "\n"
            << "tokenize: wrote " << r.train_file << " (" << r.train_tokens << " tokens)";
  if (!r.val_file.empty()) std::cout << ", " << r.val_file << " (" << r.val_tokens << " tokens)";
  std::cout << " and " << r.tokenizer_file << "\n"
            << "tokenize: train on them with [data] name = \"tokens\", train_path = \"" << r.train_file << "\", "
            << (r.val_file.empty() ? "" : "val_path = \"" + r.val_file + "\", ") << "vocab_size = " << r.vocab
            << " and [model] name = \"gpt\"\n";
  return 0;
}

struct ExportArgs {
  laconic::ExportOptions o;
  std::string format = "safetensors";
};

void add_export_options(CLI::App& ex, ExportArgs& a) {
  ex.add_option("source", a.o.source, "a run directory (its newest checkpoint) or a checkpoint directory")->required();
  ex.add_option("--format", a.format, "the weights format (safetensors)")->capture_default_str();
  ex.add_option("--out", a.o.out, "the file to write (written whole or not at all)")->required();
  ex.add_option("--recipe", a.o.recipe, "the run's recipe (default: recipe.resolved.toml of the run)");
  ex.add_option("--config", a.o.config_out, "also write the architecture's Hugging Face config.json here");
  ex.add_option("--tokenizer", a.o.tokenizer_out,
                "where the run's tokenizer goes as a Hugging Face tokenizer.json (default: beside --out)");
}

int run_export(const ExportArgs& a) {
  if (a.format != "safetensors") LC_INPUT_ERROR("export: --format: expected \"safetensors\", got \"", a.format, "\"");
  const laconic::ExportReport r = laconic::export_checkpoint(a.o);
  std::cout << "export: " << r.checkpoint << " (step " << r.step << "): " << r.model << "\n"
            << "export: wrote " << a.o.out << ": " << r.tensors << " tensors, " << r.parameters << " parameters, "
            << (r.architecture == "bert"  ? "Hugging Face BertForMaskedLM names"
                : r.architecture == "gpt" ? "Hugging Face GPT2LMHeadModel names"
                                          : "Laconic's parameter names")
            << (a.o.config_out.empty() ? "" : "; config in " + a.o.config_out) << "\n";
  if (!r.tokenizer.empty()) std::cout << "export: wrote " << r.tokenizer << " (Hugging Face tokenizers, BPE)\n";
  return 0;
}

struct GenerateArgs {
  laconic::GenerateOptions o;
  bool ids = false;
};

void add_generate_options(CLI::App& g, GenerateArgs& a) {
  g.add_option("run", a.o.run, "a GPT run's directory (its newest checkpoint) or a checkpoint directory")->required();
  g.add_option("--prompt", a.o.prompt, "the text to continue")->required();
  g.add_option("--tokens", a.o.tokens, "tokens to generate")->capture_default_str();
  g.add_option("--temperature", a.o.temperature, "softmax temperature; 0 = greedy")->capture_default_str();
  g.add_option("--top-k", a.o.top_k, "draw among the K likeliest tokens (0 = all)")->capture_default_str();
  g.add_option("--seed", a.o.seed, "the sampler's seed (same seed, same text)")->capture_default_str();
  g.add_flag("--ids", a.ids, "also print the generated token ids, on a second line");
}

int run_generate(const GenerateArgs& a) {
  const laconic::GenerateResult r = laconic::generate(a.o);
  std::cerr << "generate: " << r.ids.size() << " tokens after a " << r.prompt_ids.size() << "-token prompt from "
            << r.checkpoint << " (step " << r.step << "), "
            << (a.o.temperature == 0 ? std::string("greedy")
                                     : laconic::detail::concat("temperature ", a.o.temperature, ", top-k ", a.o.top_k,
                                                               ", seed ", a.o.seed))
            << "\n";
  std::cout << r.text << "\n";
  if (a.ids) {
    for (std::size_t i = 0; i < r.ids.size(); ++i) std::cout << (i ? " " : "") << r.ids[i];
    std::cout << "\n";
  }
  return 0;
}

struct ElasticArgs {
  int replicas = 0;
  int max_restarts = 3;
  bool resume = false;
  std::string recipe, out, store;
  std::vector<std::string> command;  // after `--`: what each replica runs instead of the trainer
};

void add_elastic_options(CLI::App& e, ElasticArgs& a) {
  e.add_option("--replicas", a.replicas, "replica processes (each a run of the recipe's periodic strategy)")
      ->required()
      ->check(CLI::Range(1, 1024));
  e.add_option("--max-restarts", a.max_restarts, "restarts allowed over the whole run")->capture_default_str()->check(CLI::Range(0, 1000000));
  e.add_option("--recipe", a.recipe, "the recipe every replica runs")->required();
  e.add_option("--out", a.out, "where replica-I/, store/ and elastic.json go")->required();
  e.add_option("--store", a.store, "the replicas' rendezvous: redis:HOST[:PORT] (default: a file store in OUT/store)");
  e.add_flag("--resume", a.resume, "continue a stopped elastic run: every replica from its newest checkpoint");
}

// The supervisor: the recipe (and its data) checked once here, then the replica processes.
int run_elastic(const ElasticArgs& a, const std::vector<std::string>& overrides) {
  if (!a.command.empty() && !overrides.empty())
    LC_INPUT_ERROR("elastic: --", overrides.front(), ": with a command after --, the script's lt.Sync(overrides=...) "
                   "sets recipe keys; give none here");
  const laconic::Recipe recipe = laconic::load_recipe(a.recipe, overrides);
  if (!a.store.empty()) {
    // Reachable before any replica starts (a redis that is down would fail every restart).
    try {
      laconic::KeyStore::open(laconic::StoreSpec::parse(a.store));
    } catch (const laconic::Error& e) {
      LC_INPUT_ERROR("--store ", a.store, ": ", e.what());
    }
  }
  laconic::SupervisorOptions o;
  if (a.command.empty()) {
    laconic::LoadOptions load;
    load.cache_dir = recipe.run.out_dir;
    const laconic::TrainData data = laconic::load_data(recipe, load);
    const laconic::RunSpec spec = laconic::resolve(recipe, data, a.out);
    laconic::check_elastic_run(recipe, spec);
    o.steps = spec.plan.steps;
  } else {
    // A script's model and data are its own: what the supervisor can check is the recipe's.
    laconic::check_elastic_strategy(recipe);
    if (recipe.train.steps <= 0)
      LC_INPUT_ERROR(a.recipe, ": train.steps: expected the steps the script trains (> 0), got ", recipe.train.steps);
    o.steps = recipe.train.steps;
    o.command = a.command;
    o.recipe = std::filesystem::absolute(a.recipe).string();
  }
  std::error_code ec;
  o.program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  LC_CHECK(!ec, "elastic: cannot find this program (/proc/self/exe): ", ec.message());
  o.args = {"--recipe", a.recipe};
  if (a.resume) o.args.insert(o.args.end(), {"--resume", "auto"});
  for (const std::string& ov : overrides) o.args.push_back("--" + ov);
  o.out_dir = a.out;
  o.replicas = a.replicas;
  o.max_restarts = a.max_restarts;
  o.store = a.store;
  o.resume = a.resume;
  o.log = &std::cout;
  const laconic::SupervisorResult r = laconic::run_supervisor(o);
  if (r.exit_code > 128)
    std::cerr << "trainer: elastic run stopped by a signal; "
              << (r.checkpointed == a.replicas ? std::string("every replica")
                                               : std::to_string(r.checkpointed) + " of " + std::to_string(a.replicas) +
                                                     " replicas")
              << " checkpointed its step (continue with trainer elastic ... --resume)" << std::endl;
  return r.exit_code;
}

// `trainer elastic ... -- COMMAND ARGS`: what follows `--` is the replicas' command, untouched;
// argc is cut to the arguments before it.
std::vector<std::string> take_command(int& argc, char** argv) {
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      command.assign(argv + i + 1, argv + argc);
      if (command.empty()) LC_INPUT_ERROR("--: expected a command after it (trainer elastic ... -- python3 train.py)");
      argc = i;
      break;
    }
  return command;
}

// The trainer's own options: a run of a recipe (or one replica of an elastic run).
struct TrainArgs {
  std::string recipe_path, out_dir, resume;
  bool print_config = false, dry_run = false, resume_any_recipe = false;
  laconic::TrainOptions::Elastic elastic;
};

void add_train_options(CLI::App& app, TrainArgs& a) {
  app.add_option("--recipe", a.recipe_path, "TOML recipe to run");
  app.add_option("--out", a.out_dir, "run directory (default: [run] out_dir / [run] name)");
  app.add_flag("--print-config", a.print_config, "print the resolved recipe as TOML and exit");
  app.add_flag("--dry-run", a.dry_run, "validate the recipe and data, print the plan, write nothing");
  app.add_option("--resume", a.resume,
                 "continue from a checkpoint: 'auto' (the newest complete one of this run, if any) or its directory");
  app.add_flag("--resume-any-recipe", a.resume_any_recipe,
               "resume even if the recipe differs from the checkpoint's (state loaded as saved; not bit-exact)");
  app.add_option("--replica", a.elastic.replica, "elastic training: this process is replica I (set by trainer elastic)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--replicas", a.elastic.replicas, "elastic training: of N replicas")->check(CLI::Range(1, 1024));
  app.add_option("--elastic-store", a.elastic.store, "elastic training: the replicas' store, file:DIR or redis:HOST:PORT");
}

// The whole command line: the trainer's options and each subcommand's, bound to their arguments
// (CLI11 keeps pointers to them, so it stays where it is built).
struct CommandLine {
  CLI::App app{"Laconic trainer: data-parallel training that communicates little.\n"
               "Recipe keys can be overridden as --section.key=value (e.g. --train.steps=100)."};
  TrainArgs train;
  PlanArgs plan_args;
  CompareArgs compare_args;
  SimulateArgs simulate_args;
  laconic::TokenizeOptions tokenize_args;
  ExportArgs export_args;
  GenerateArgs generate_args;
  ElasticArgs elastic_args;
  CLI::App* plan = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* simulate = nullptr;
  CLI::App* tokenize = nullptr;
  CLI::App* exporter = nullptr;
  CLI::App* generate = nullptr;
  CLI::App* elastic = nullptr;

  explicit CommandLine(const char* plot_script);
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  bool subcommand_parsed() const {
    return plan->parsed() || compare->parsed() || simulate->parsed() || tokenize->parsed() || exporter->parsed() ||
           generate->parsed() || elastic->parsed();
  }
};

CommandLine::CommandLine(const char* plot_script) {
  add_train_options(app, train);
  plan = app.add_subcommand("plan", "predicted all-reduce time per step from the alpha-beta cost model");
  add_plan_options(*plan, plan_args);
  compare_args.package_plot_script = plot_script;
  compare = app.add_subcommand("compare", "train variants of a recipe side by side (or read finished "
                                          "runs) and write a report with plots");
  add_compare_options(*compare, compare_args);
  simulate = app.add_subcommand("simulate", "replay a finished run's event trace on a (other) network "
                                            "with SimGrid, without retraining");
  add_simulate_options(*simulate, simulate_args);
  tokenize = app.add_subcommand("tokenize", "train Laconic's BPE on text and write llm.c token files "
                                            "(train.bin, val.bin) with the tokenizer beside them");
  add_tokenize_options(*tokenize, tokenize_args);
  exporter = app.add_subcommand("export", "write a run's (or checkpoint's) weights as safetensors, in the "
                                          "Hugging Face names of its architecture");
  add_export_options(*exporter, export_args);
  generate = app.add_subcommand("generate", "continue a prompt with a GPT run's newest checkpoint");
  add_generate_options(*generate, generate_args);
  elastic = app.add_subcommand("elastic", "run N replicas of a periodic strategy as processes that may "
                                          "leave and rejoin, restarting those that die");
  add_elastic_options(*elastic, elastic_args);
  elastic->footer("After --, a command each replica runs instead of the trainer (a laconic.torch script:\n"
                  "  trainer elastic --replicas 3 --recipe R --out DIR -- /usr/bin/python3 train.py); docs/torch.md");
}

// Parses `rest` (the arguments other than recipe overrides); an exit code when that is all
// (--help, or a parse error printed here), nullopt to go on.
std::optional<int> parse(CommandLine& cl, const char* program, const std::vector<std::string>& rest) {
  std::vector<const char*> args{program};
  for (const auto& a : rest) args.push_back(a.c_str());
  try {
    cl.app.parse(static_cast<int>(args.size()), args.data());
    if (!cl.subcommand_parsed() && cl.train.recipe_path.empty()) throw CLI::RequiredError("--recipe");
  } catch (const CLI::CallForHelp& e) {
    return cl.app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "trainer: error: " << e.what() << " (see trainer --help)\n";
    return kInputError;
  }
  return std::nullopt;
}

// A subcommand that reads no recipe refuses overrides; `hint` says what to use instead.
void refuse_overrides(const char* subcommand, const std::vector<std::string>& overrides, const char* hint = "") {
  if (!overrides.empty()) LC_INPUT_ERROR(subcommand, ": --", overrides.front(), ": recipe overrides do not apply", hint);
}

// The subcommand given, run; nullopt when there is none (a run of the recipe). argc and argv: the
// command line before any `--`, which compare's report quotes.
std::optional<int> run_subcommand(CommandLine& cl, const std::vector<std::string>& overrides,
                                  const std::vector<std::string>& command, int argc, char** argv) {
  if (cl.plan->parsed()) return run_plan(cl.plan_args);
  if (cl.compare->parsed()) return run_compare(cl.compare_args, overrides, argc, argv);
  if (cl.tokenize->parsed()) {
    refuse_overrides("tokenize", overrides);
    return run_tokenize(cl.tokenize_args);
  }
  if (cl.exporter->parsed()) {
    refuse_overrides("export", overrides);
    return run_export(cl.export_args);
  }
  if (cl.generate->parsed()) {
    refuse_overrides("generate", overrides);
    return run_generate(cl.generate_args);
  }
  if (!command.empty() && !cl.elastic->parsed())
    LC_INPUT_ERROR("-- ", command.front(), ": a command after -- goes with trainer elastic only");
  if (cl.elastic->parsed()) {
    cl.elastic_args.command = command;
    return run_elastic(cl.elastic_args, overrides);
  }
  const laconic::TrainOptions::Elastic& e = cl.train.elastic;
  if ((e.replicas > 0) != !e.store.empty() || (e.replica != 0 && e.replicas == 0))
    LC_INPUT_ERROR("--replica, --replicas and --elastic-store go together (one replica of an elastic run; see trainer elastic)");
  if (cl.simulate->parsed()) {
    refuse_overrides("simulate", overrides, " (use --network)");
    return run_simulate(cl.simulate_args);
  }
  return std::nullopt;
}

// --dry-run: the plan of the run, checked as the run would check it; nothing written.
int print_dry_run(const TrainArgs& a, const laconic::Recipe& recipe, const laconic::TrainData& data,
                  const std::string& run_dir, bool lead) {
  const laconic::RunSpec spec = laconic::resolve(recipe, data, run_dir);  // refuses what a run would
  const laconic::TrainPlan& plan = spec.plan;
  if (lead)
    std::cout << "recipe:       " << a.recipe_path << "\n"
              << "model:        " << plan.model << "\n"
              << "world size:   " << recipe.distributed.world_size << " ("
              << laconic::name_of(spec.backend) << ")\n"
              << "global batch: " << plan.global_batch << "\n"
              << "steps:        " << plan.steps << " (" << plan.steps_per_epoch << " per epoch)\n"
              << "dry run: nothing written\n";
  return 0;
}

laconic::TrainOptions train_options(const TrainArgs& a, const laconic::Recipe& recipe, const std::string& run_dir,
                                    const laconic::ProcessRuntime& process) {
  const bool lead = process.lead();
  laconic::TrainOptions opts;
  opts.run_dir = run_dir;
  opts.log = lead ? &std::cout : nullptr;
  // Not under mpirun: it hands rank 0 a pseudo-terminal even when its own output is a file.
  opts.progress_line = lead && !process.launched() && ::isatty(STDOUT_FILENO) != 0;
  opts.resume = a.resume;
  opts.resume_any_recipe = a.resume_any_recipe;
  opts.hooks.push_back(laconic::fault_injector(recipe.fault));  // [fault], for tests of the failure paths
  opts.stop_on_signals = true;  // preemption: a checkpoint, then exit 128 + the signal
  opts.elastic = a.elastic;
  return opts;
}

// The run's last line and exit code. Stopped early: one line saying why and where to continue
// from, and an exit code that says it too (128 + the signal, as a shell reports a process the
// signal killed; 75 = EX_TEMPFAIL, "try again", for the time limit).
int finish_run(const laconic::TrainSummary& s, const std::string& run_dir, bool lead) {
  if (s.stopped.empty()) {
    if (lead) std::cout << laconic::done_line(s) << "; results in " << run_dir << "/\n";
    return 0;
  }
  const bool by_signal = s.stopped == "signal";
  if (lead)
    std::cerr << "trainer: stopped by " << (by_signal ? s.signal : "train.time_limit") << " after step " << s.steps
              << " of " << s.planned_steps << "; "
              << (s.checkpoint.empty() ? "no checkpoint (no run directory)"
                                       : "checkpoint " + s.checkpoint + " (continue with --resume auto)")
              << std::endl;
  return by_signal ? 128 + s.stop_signal : 75;
}

// A run of the recipe (--print-config and --dry-run included). quiet_errors: set on every rank
// but the lead one, which alone reports an input error.
int run_recipe(const TrainArgs& a, const std::vector<std::string>& overrides, bool& quiet_errors) {
  const laconic::Recipe recipe = laconic::load_recipe(a.recipe_path, overrides);
  if (a.print_config) {
    std::cout << laconic::to_toml(recipe);
    return 0;
  }
  const laconic::ProcessRuntime process(recipe);  // outlives the run; every rank parsed the same recipe
  const bool lead = process.lead();
  quiet_errors = !lead;  // the same input error on every rank is printed once, by rank 0
  laconic::LoadOptions load;
  load.cache_dir = recipe.run.out_dir;  // the tokenizer is cached beside the runs
  load.write_cache = lead && !a.dry_run;
  const laconic::TrainData data = laconic::load_data(recipe, load);
  const std::string run_dir =
      a.out_dir.empty() ? (std::filesystem::path(recipe.run.out_dir) / recipe.run.name).string() : a.out_dir;
  if (a.dry_run) return print_dry_run(a, recipe, data, run_dir, lead);
  laconic::TrainOptions opts = train_options(a, recipe, run_dir, process);
  if (recipe.train.tensorboard && lead) {  // the records, as they are made, to tensorboard's writer
    auto stream = std::make_shared<laconic::TensorboardStream>(laconic::tensorboard_python("train.tensorboard"),
                                                               (std::filesystem::path(run_dir) / "tensorboard").string());
    opts.on_record = [stream](const std::string& line) { stream->write(line); };
  }
  return finish_run(laconic::train(recipe, data, opts), opts.run_dir, lead);
}

int run(int argc, char** argv, const char* plot_script, bool& quiet_errors) {
  const std::vector<std::string> command = take_command(argc, argv);
  std::vector<std::string> rest;
  const auto overrides = take_overrides(argc, argv, rest);
  CommandLine cl(plot_script);
  if (const std::optional<int> code = parse(cl, argv[0], rest)) return *code;
  if (const std::optional<int> code = run_subcommand(cl, overrides, command, argc, argv)) return *code;
  return run_recipe(cl.train, overrides, quiet_errors);
}

}  // namespace

namespace laconic {

int train_main(int argc, char** argv, const char* plot_script) {
  bool quiet_errors = false;
  try {
    return run(argc, argv, plot_script, quiet_errors);
  } catch (const laconic::ReplicaDropped& e) {
    std::cerr << "trainer: " << e.what() << std::endl;
    return 76;
  } catch (const laconic::RunFinished& e) {
    if (!quiet_errors) std::cout << "trainer: " << e.what() << std::endl;  // under mpirun, rank 0 says it
    return 0;
  } catch (const laconic::InputError& e) {
    if (!quiet_errors) {
      std::cerr << "trainer: error: " << e.what() << std::endl;
    } else {
      // Under mpirun every rank hits the same input error; rank 0 reports it. The others leave a
      // moment later, since mpirun kills the job as soon as one process exits non-zero.
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return kInputError;
  } catch (const std::exception& e) {
    std::cerr << "trainer: failed: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace laconic
