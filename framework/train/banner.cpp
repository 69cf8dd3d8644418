#include "framework/train/banner.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/units.h"

namespace laconic {

void start_banner(std::ostream& log, const RunSpec& spec, const TrainData& data, const Communicator& comm,
                  int gemm_threads, const std::string& run_dir) {
  const Recipe& recipe = spec.recipe;
  const TrainPlan& plan = spec.plan;
  log << "laconic: " << plan.model << ", " << comm.size() << " ranks (" << comm.backend()
      << " backend, " << name_of(recipe.distributed.algorithm) << " all-reduce), global batch "
      << plan.global_batch << ", " << plan.steps << " steps";
  if (plan.steps_per_epoch > 0)
    log << " (" << std::fixed << std::setprecision(2)
        << static_cast<double>(plan.steps) / static_cast<double>(plan.steps_per_epoch) << " epochs)";
  log << (spec.device == Device::cpu ? ", GEMM threads per rank " + std::to_string(gemm_threads) : "") << std::endl;
  log << "laconic: data " << data.describe << std::endl;
  if (plan.external) {
    log << "laconic: the optimizer and its schedule are the caller's; Laconic syncs with " << recipe.sync.strategy.value
        << std::endl;
  } else {
    log << "laconic: " << recipe.optimizer.name << ", peak lr " << std::defaultfloat << std::setprecision(6)
        << plan.lr;
    if (recipe.schedule.scaling_rule == ScalingRule::none)
      log << " (no scaling)";
    else
      log << " (" << name_of(recipe.schedule.scaling_rule) << " scaling from batch "
          << (recipe.schedule.base_batch > 0 ? recipe.schedule.base_batch : plan.global_batch) << " at lr "
          << recipe.optimizer.lr << ")";
    log << ", warmup " << plan.warmup_steps << " steps, " << name_of(recipe.schedule.decay) << " decay"
        << std::endl;
  }
  if (!std::isnan(data.baseline_loss))
    log << "laconic: unigram baseline (context-free) "
        << (recipe.model.name == "gpt" ? "next-token" : "MLM") << " loss " << std::fixed << std::setprecision(3)
        << data.baseline_loss << " nats" << std::endl;
  if (recipe.network.groups > 0)
    log << "laconic: simulating " << recipe.network.groups << " groups, "
        << format_bandwidth(recipe.network.intra_bandwidth.bytes_per_s) << " / "
        << format_duration(recipe.network.intra_latency.seconds) << " inside, "
        << format_bandwidth(recipe.network.inter_bandwidth.bytes_per_s) << " / "
        << format_duration(recipe.network.inter_latency.seconds) << " between; compute "
        << name_of(recipe.network.compute) << std::endl;
  for (const std::string& note : spec.notes) log << "laconic: " << note << std::endl;
  if (!run_dir.empty()) log << "laconic: writing " << run_dir << "/" << std::endl;
}

std::string resolved_comment(const TrainPlan& p, const TrainData& d) {
  std::ostringstream os;
  os << std::setprecision(17) << "\n# Resolved at start:\n"
     << "#   model           = " << p.model << "\n"
     << "#   data            = " << d.describe << "\n"
     << "#   global_batch    = " << p.global_batch << "\n"
     << "#   steps           = " << p.steps;
  if (p.external) {  // the caller's data and optimizer: no epochs, no schedule of Laconic's
    os << "\n";
    return os.str();
  }
  os << " (" << p.steps_per_epoch << " per epoch)\n"
     << "#   effective_lr    = " << p.lr << "\n"
     << "#   warmup_steps    = " << p.warmup_steps << "\n";
  if (!std::isnan(d.baseline_loss)) os << "#   unigram_loss    = " << d.baseline_loss << "\n";
  return os.str();
}

namespace {

// "laconic: held per rank: ...\n" (summary.json's memory_*), or "" for a summary without them.
std::string memory_line(const TrainSummary& s) {
  if (!s.memory_weights) return "";
  const auto b = [](const std::optional<std::uint64_t>& v) { return format_bytes(static_cast<double>(v.value_or(0))); };
  return "laconic: held per rank: weights " + b(s.memory_weights) + ", gradients " + b(s.memory_gradients) +
         ", optimizer state " + b(s.memory_optimizer) + ", strategy state " + b(s.memory_strategy) +
         (s.memory_buffers.value_or(0) ? ", strategy buffers " + b(s.memory_buffers) : "") +
         (s.memory_planned ? " (trainer plan: " + b(s.memory_planned) + " in all)" : "") + "; peak RSS " + b(s.peak_rss) + "\n";
}

}  // namespace

std::string done_line(const TrainSummary& s) {
  std::ostringstream os;
  os << std::defaultfloat << std::setprecision(4) << "done: " << s.steps << " steps";
  if (s.first_step > 0) os << " (resumed at " << s.first_step << ")";
  if (s.skipped_steps > 0) os << " (" << s.skipped_steps << " skipped: non-finite gradients)";
  os << " in " << s.wall_s << " s";
  if (!std::isnan(s.sim_time_s)) os << " (simulated " << s.sim_time_s << " s)";
  os << std::fixed << std::setprecision(3) << ", final loss " << s.final_loss;
  if (!std::isnan(s.eval_loss)) {
    os << ", eval loss " << s.eval_loss;
    if (!std::isnan(s.baseline_loss)) {
      const double below = s.baseline_loss - s.eval_loss;
      os << " (" << std::setprecision(2) << std::abs(below) << " nats " << (below >= 0 ? "below" : "above")
         << " the unigram baseline " << std::setprecision(3) << s.baseline_loss << ")";
    }
  }
  if (!std::isnan(s.eval_accuracy)) os << ", eval accuracy " << std::setprecision(1) << 100.0 * s.eval_accuracy << "%";
  os << ", sent " << format_bytes(static_cast<double>(s.bytes_sent)) << " per rank";
  if (!s.checkpoint.empty()) os << "; weights in " << s.checkpoint;
  return memory_line(s) + os.str();
}

}  // namespace laconic
