#include "framework/train/resume.h"

#include <algorithm>
#include <map>
#include <ostream>
#include <utility>
#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

// What differs between a checkpoint's recipe and this run's (both recipe_identity text): one line
// per key, with both values (none when the texts agree key by key).
std::vector<std::string> recipe_differences(const std::string& theirs, const std::string& ours) {
  const std::optional<FlatToml> a = flatten_toml(theirs), b = flatten_toml(ours);
  if (!a || !b) return {"(the checkpoint's recipe is not TOML)"};
  std::map<std::string, std::pair<std::string, std::string>> keys;  // key -> (checkpoint's, this run's)
  for (const auto& [k, v] : *a) keys[k].first = v;
  for (const auto& [k, v] : *b) keys[k].second = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : keys)
    if (v.first != v.second)
      out.push_back(printable(k) + " = " + (v.first.empty() ? "(absent)" : printable(v.first)) + " in the checkpoint, " +
                    (v.second.empty() ? "(absent)" : printable(v.second)) + " here");
  return out;
}

}  // namespace

std::optional<CheckpointInfo> resolve_resume(const RunSpec& spec, const TrainOptions& opts, const std::string& root) {
  if (opts.resume.empty()) return std::nullopt;
  const Recipe& recipe = spec.recipe;
  std::optional<CheckpointInfo> info;
  if (opts.resume == "auto") {
    info = find_latest_checkpoint(root, [&](const std::string& why) {
      if (opts.log) *opts.log << "laconic: --resume auto: skipped " << why << std::endl;
    });
    if (!info) {
      if (opts.log) *opts.log << "laconic: --resume auto: no complete checkpoint under " << root << ", starting fresh" << std::endl;
      return std::nullopt;
    }
  } else {
    info = read_checkpoint_info(opts.resume);
    verify_checkpoint(*info);
  }
  if (info->world_size != recipe.distributed.world_size)
    LC_INPUT_ERROR(info->dir, ": checkpoint of ", info->world_size, " ranks; this run has distributed.world_size = ",
                   recipe.distributed.world_size, " (every rank's state is its own: resume with the same world size)");
  if (info->recipe_hash != spec.hash && !opts.resume_any_recipe) {
    // Continuing a run for more (or fewer) steps is a resume too: the state is the same, the
    // schedule is laid over the new length from here on.
    std::vector<std::string> diff = info->recipe.empty() ? std::vector<std::string>{}
                                                         : recipe_differences(info->recipe, spec.identity);
    const auto length_only = [](const std::string& d) { return d.rfind("train.steps ", 0) == 0 || d.rfind("train.epochs ", 0) == 0; };
    const bool extends = !diff.empty() && std::all_of(diff.begin(), diff.end(), length_only);
    if (!extends) {
      std::string keys;
      for (std::size_t i = 0; i < diff.size() && i < 4; ++i) keys += (i ? "; " : ": ") + diff[i];
      if (diff.size() > 4) keys += detail::concat("; and ", diff.size() - 4, " more");
      LC_INPUT_ERROR(info->dir, ": checkpoint of a different recipe",
                     diff.empty() ? detail::concat(" (hash ", info->recipe_hash, ", this one ", spec.hash, ")") : keys,
                     " (pass --resume-any-recipe to continue anyway)");
    }
    if (opts.log) *opts.log << "laconic: continuing " << info->dir << " with " << diff.front() << std::endl;
  }
  if (info->step == spec.plan.steps)
    throw RunFinished(detail::concat(opts.run_dir.empty() ? info->dir : opts.run_dir, " finished its ", info->step,
                                     " steps already (", info->dir, "); nothing to do, nothing written (raise "
                                     "train.steps to continue it)"));
  if (info->step > spec.plan.steps)
    LC_INPUT_ERROR(info->dir, ": checkpoint of step ", info->step, ", past this run's ", spec.plan.steps,
                   " steps (train.steps)");
  return info;
}

std::optional<CheckpointInfo> agree_on_resume(Communicator& comm, const TrainOptions& opts,
                                              const std::optional<CheckpointInfo>& mine, const std::string& root) {
  if (opts.resume != "auto" || comm.size() == 1) return mine;
  std::int64_t step = mine ? mine->step : -1;
  comm.broadcast(&step, sizeof step, 0);
  if (step < 0) return std::nullopt;
  if (mine && mine->step == step) return mine;
  return read_checkpoint_info(checkpoint_dir(root, step));
}

}  // namespace laconic
