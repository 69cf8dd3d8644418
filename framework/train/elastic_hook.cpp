#include "framework/train/elastic_hook.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/check.h"
#include "core/input.h"
#include "framework/recipe/components.h"
#include "framework/sync/periodic.h"
#include "framework/train/checkpoint.h"
#include "framework/train/run_dir.h"
#include "framework/train/stop.h"
#include "framework/train/summary.h"

namespace laconic {
namespace {

constexpr const char* kHeldFile = "theta_global.json";  // in each checkpoint of an elastic replica

class ElasticHook final : public StepHook {
 public:
  ElasticHook(Loop& loop, ElasticGroup& group, Checkpointer& checkpointer)
      : loop_(loop), group_(group), checkpointer_(checkpointer) {
    // make_elastic_group checked the strategy's traits: a failure here is a bug.
    auto* periodic = dynamic_cast<PeriodicAveraging*>(&loop.sync);
    LC_CHECK(periodic != nullptr, "elastic training needs a periodic strategy");
    periodic->set_replica_group(&group);
  }

  // The donor of a sync that admitted replicas writes the step's checkpoint (every rank of the
  // replica) and sends it to them; rank 0 logs the syncs committed since to elastic.jsonl.
  void end_step(std::int64_t step) override {
    // Rank 0 decides for the replica (with overlapped syncs its communication thread sets the
    // flag at any time): one int on the control plane when the replica has several ranks.
    std::int32_t donate = loop_.lead() && group_.donation_pending() ? 1 : 0;
    if (loop_.control.size() > 1) loop_.control.broadcast(&donate, sizeof donate, 0);
    if (donate) {
      const std::string dir = checkpointer_.write(step + 1);
      if (loop_.lead()) group_.donate(dir);
    }
    if (!loop_.lead() || loop_.opts.run_dir.empty()) return;
    for (const Membership& m : group_.history(logged_syncs_)) {
      ++logged_syncs_;
      nlohmann::ordered_json j;
      j["round"] = m.round;
      j["step"] = m.step + 1;
      j["fragment"] = m.fragment;
      j["quorum_size"] = m.members.size();
      j["members"] = m.members;
      j["joiners"] = m.joiners;
      j["joined"] = m.joined;
      j["left"] = m.left;
      j["attempts"] = m.attempts;
      j["seconds"] = m.seconds;
      j["contributed_steps"] = m.contributed_steps;
      j["wall_s"] = loop_.ledger.wall_s();
      if (!log_) log_ = std::make_unique<JsonlWriter>(loop_.opts.run_dir + "/elastic.jsonl", loop_.ledger.resumed());
      log_->write_line(j.dump());
    }
  }

  void after_loop(std::int64_t steps, bool stopped) override {
    end_step(steps - 1);  // a sync the drain completed: its log line, its joiners' state
    if (!stopped && loop_.lead()) group_.finished();
  }

  void finish(TrainSummary& s) override {
    if (!loop_.lead()) return;
    s.theta_global_checksum = theta_global_checksum();
    s.elastic_syncs = group_.syncs();
  }

  // Every checkpoint says which run's theta_global it holds: a restarted replica offers it when
  // the run recovers (join_run).
  void save_files(const std::string& dir) override {
    if (!loop_.lead()) return;
    nlohmann::ordered_json j;
    j["store"] = group_.options().store.str();
    j["theta_global"] = theta_global_checksum();
    write_file_atomic(dir + "/" + kHeldFile, j.dump() + "\n");
  }

 private:
  Loop& loop_;
  ElasticGroup& group_;
  Checkpointer& checkpointer_;
  std::string theta_global_checksum() const {
    std::vector<float> anchors;  // the host copy of every fragment's theta_global
    for (const StateTensor& t : loop_.sync.state())
      if (t.name.rfind("periodic.global", 0) == 0) anchors.insert(anchors.end(), t.data.begin(), t.data.end());
    return hex64(hash_bytes(anchors.data(), anchors.size() * sizeof(float)));
  }

  std::size_t logged_syncs_ = 0;  // syncs written to elastic.jsonl
  std::unique_ptr<JsonlWriter> log_;
};

}  // namespace

// An elastic replica's group, after checking that the run can be one (before anything is written).
void check_elastic_strategy(const Recipe& recipe) {
  const std::string& s = recipe.sync.strategy.value;
  const StrategyTraits& traits = strategy_traits(s);
  if (!traits.periodic || !recipe.sync.phases.phases.empty())
    LC_INPUT_ERROR(recipe.path, ": sync.strategy = \"", s, "\"", recipe.sync.phases.phases.empty() ? "" : " with sync.phases",
                   ": elastic training needs one periodic strategy (", periodic_strategy_names(), "): "
                   "only its outer syncs cross replicas");
  const OuterPeriod period = traits.periodic(recipe);
  if (!period.not_elastic.empty()) LC_INPUT_ERROR(recipe.path, ": ", period.not_elastic);
  const std::int64_t warmup = period.warmup_steps;
  if (warmup > 0)
    LC_INPUT_ERROR(recipe.path, ": sync.", s, ".warmup_steps = ", warmup, ": an elastic run's synchronous warm-up would "
                   "average gradients within each replica only; start the replicas periodic (warmup_steps = 0)");
  const ElasticConfig& ec = recipe.elastic;
  if (ec.max_norm_ratio > 0 && ec.max_norm_ratio < 1)
    LC_INPUT_ERROR(recipe.path, ": elastic.max_norm_ratio = ", recipe_float(ec.max_norm_ratio),
                   ": expected 0 (off) or at least 1 (a multiple of the median member's norm)");
  if (ec.aggregate != Aggregate::mean && (!traits.reducer || traits.reducer(recipe) != "allreduce"))
    LC_INPUT_ERROR(recipe.path, ": elastic.aggregate = \"", name_of(ec.aggregate), "\": it gathers every replica's dense "
                   "pseudo-gradient, so sync.", s, " must average through the dense reducer (reducer = \"allreduce\", "
                   "dtype = \"fp32\"); use aggregate = \"mean\" with a compressing one");
  if (recipe.distributed.device != DeviceKind::cpu)
    LC_INPUT_ERROR(recipe.path, ": distributed.device = \"cuda\": elastic replicas run on the CPU for now");
  if (recipe.network.groups > 0)
    LC_INPUT_ERROR(recipe.path, ": network.groups: a simulated network does not apply to elastic replicas (their "
                                "outer syncs cross real processes over gloo)");
  elastic_secret(recipe);  // an unreadable secret_file: refused before any replica starts
}

std::string elastic_secret(const Recipe& recipe) {
  const std::string& file = recipe.elastic.secret_file.path;
  if (file.empty()) {
    const char* env = std::getenv("LACONIC_ELASTIC_SECRET");
    return env ? env : "";
  }
  constexpr std::size_t most = 4096;  // bytes: a key, not a file to load
  auto refuse = [&](const std::string& why) {
    LC_INPUT_ERROR(recipe.path, ": elastic.secret_file = \"", file, "\": ", why);
  };
  std::error_code ec;
  std::ifstream in;
  if (std::filesystem::is_regular_file(file, ec)) in.open(file, std::ios::binary);
  std::string secret(most + 1, '\0');
  if (in.is_open()) in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  if (!in.is_open() || in.bad()) refuse("cannot read it (expected a file holding the replicas' shared secret)");
  secret.resize(static_cast<std::size_t>(in.gcount()));
  if (secret.size() > most) refuse("expected a secret of at most 4096 bytes");
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) refuse("it is empty (expected the replicas' shared secret)");
  return secret;
}

void check_elastic_run(const Recipe& recipe, const RunSpec& spec) {
  check_elastic_strategy(recipe);
  if (spec.backend != BackendKind::threads)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend: an elastic replica is one process (the threads backend); "
                                "run one replica per process under `trainer elastic`");
}

std::unique_ptr<ElasticGroup> make_elastic_group(const Recipe& recipe, const RunSpec& spec, const TrainOptions& opts) {
  const TrainOptions::Elastic& e = opts.elastic;
  check_elastic_run(recipe, spec);
  if (opts.run_dir.empty()) LC_INPUT_ERROR("elastic training needs a run directory (its state moves through checkpoints)");
  if (e.replica < 0 || e.replica >= e.replicas)
    LC_INPUT_ERROR("--replica ", e.replica, ": expected a replica in [0, ", e.replicas - 1, "] (--replicas ", e.replicas, ")");
  ElasticOptions o;
  o.replica = e.replica;
  o.replicas = e.replicas;
  try {
    o.store = StoreSpec::parse(e.store);
  } catch (const Error& err) {
    LC_INPUT_ERROR("--elastic-store: ", err.what());
  }
  o.join_timeout_s = recipe.elastic.join_timeout_s;
  o.sync_timeout_s = recipe.elastic.sync_timeout_s;
  o.join_wait_s = recipe.elastic.join_wait_s;
  o.max_attempts = static_cast<int>(recipe.elastic.max_attempts);
  o.address = recipe.elastic.address;
  o.streams = recipe.distributed.streams;
  o.stop_requested = [] { return SignalStop::received() != 0; };
  o.examples_per_step = static_cast<std::int64_t>(recipe.train.micro_batch) * recipe.train.grad_accum *
                        recipe.distributed.world_size;
  const OuterPeriod period = strategy_traits(recipe.sync.strategy.value).periodic(recipe);
  o.max_local_steps = std::max(period.period, period.longest);
  o.aggregate = {recipe.elastic.aggregate, recipe.elastic.trim_fraction, recipe.elastic.max_norm_ratio};
  if (recipe.elastic.min_quorum > e.replicas)
    LC_INPUT_ERROR(recipe.path, ": elastic.min_quorum = ", recipe.elastic.min_quorum, ": expected at most --replicas (",
                   e.replicas, "), or 0 for a majority");
  o.min_quorum = static_cast<int>(recipe.elastic.min_quorum);
  o.secret = elastic_secret(recipe);
  if (o.secret.empty() && opts.log)
    *opts.log << "laconic: elastic: replica " << e.replica << ": the store is unauthenticated (anyone who can write "
              << "it can forge its keys): set LACONIC_ELASTIC_SECRET or elastic.secret_file" << std::endl;
  // A donated state is one checkpoint: per rank at most 8 float32 values per parameter (7 today:
  // the parameters, the inner optimizer's two moments, and over the fragments theta_global, the
  // outer momentum, an overlapped sync's delta, a compressing reducer's error feedback or DeMo's
  // momentum), and 16 MiB for the rest (the manifest with the recipe, entry headers, counters).
  o.max_state_bytes = 8 * sizeof(float) * static_cast<std::uint64_t>(spec.plan.parameters) *
                          static_cast<std::uint64_t>(recipe.distributed.world_size) + (std::uint64_t{16} << 20);
  return std::make_unique<ElasticGroup>(o, opts.log);
}

// This replica's newest checkpoint, when it is of this run (its store) or the replicas resume one.
std::optional<HeldCheckpoint> held_checkpoint(const ElasticGroup& group, const std::string& root,
                                              const TrainOptions& opts) {
  std::optional<CheckpointInfo> info;
  try {
    info = find_latest_checkpoint(root);
  } catch (const Error&) {  // every checkpoint damaged: nothing to offer, the run's state comes from others
  }
  if (!info) return std::nullopt;
  std::string text;
  try {
    text = read_input_file(info->dir + "/" + kHeldFile, 4096, "theta_global label");
  } catch (const Error&) {  // a checkpoint of a non-elastic run, or damaged: not offered
    return std::nullopt;
  }
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("store") || !j.contains("theta_global") || !j["theta_global"].is_string())
    return std::nullopt;
  if (opts.resume.empty() && j["store"] != group.options().store.str()) return std::nullopt;  // an earlier run's
  return HeldCheckpoint{info->dir, info->step, j["theta_global"].get<std::string>()};
}

std::optional<TrainOptions> join_run(ElasticGroup& group, const std::string& checkpoint_root,
                                     const TrainOptions& opts) {
  const std::optional<std::string> dir = group.join(checkpoint_root, held_checkpoint(group, checkpoint_root, opts));
  if (!dir) return std::nullopt;
  TrainOptions joined = opts;
  joined.resume = *dir;
  joined.resume_any_recipe = false;
  return joined;
}

DataShard data_shard(const Communicator& comm, const ElasticGroup* group) {
  if (!group) return {comm.rank(), comm.size()};
  return {group->options().replica * comm.size() + comm.rank(), comm.size() * group->options().replicas};
}

std::unique_ptr<StepHook> make_elastic_hook(Loop& loop, ElasticGroup* group, Checkpointer& checkpointer) {
  return group ? std::make_unique<ElasticHook>(loop, *group, checkpointer) : nullptr;
}

}  // namespace laconic
