#include "framework/inference/export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "framework/train/checkpoint.h"
#include "framework/recipe/factory.h"
#include "workloads/data/hf_tokenizer.h"
#include "framework/train/run_dir.h"
#include "framework/train/run_spec.h"
#include "workloads/weights/safetensors.h"

namespace laconic {
namespace {

// The shard entries that size a model without its data (written by the Checkpointer).
constexpr const char* kDataDims[] = {"data.features", "data.classes", "data.vocab", "data.seq_len"};

}  // namespace

RunCheckpoint find_run_checkpoint(const std::string& source_dir, const std::string& recipe_arg) {
  namespace fs = std::filesystem;
  const fs::path source(source_dir);
  std::error_code ec;
  RunCheckpoint c;
  c.recipe_file = recipe_arg;
  if (fs::exists(source / "MANIFEST.json", ec)) {
    c.info = read_checkpoint_info(source_dir);
    // The default layout: RUN_DIR/checkpoints/step-N.
    if (c.recipe_file.empty()) c.recipe_file = (source.parent_path().parent_path() / "recipe.resolved.toml").string();
    if (!fs::exists(c.recipe_file, ec))
      LC_INPUT_ERROR(source_dir, ": no recipe.resolved.toml in the run directory above this checkpoint (", c.recipe_file,
                     "): pass the run's recipe with --recipe");
  } else if (fs::exists(source / "recipe.resolved.toml", ec)) {
    if (c.recipe_file.empty()) c.recipe_file = (source / "recipe.resolved.toml").string();
  } else {
    LC_INPUT_ERROR(source_dir, ": expected a run directory (with recipe.resolved.toml) or a checkpoint directory "
                   "(with MANIFEST.json)");
  }
  c.recipe = load_recipe(c.recipe_file);
  if (c.info.dir.empty()) {
    const std::string root = checkpoint_root(c.recipe, source_dir);
    const auto latest = find_latest_checkpoint(root);
    if (!latest)
      LC_INPUT_ERROR(source_dir, ": no complete checkpoint under ", root,
                     " (train with --checkpoint.every=N; the last step is always checkpointed then)");
    c.info = *latest;
  }
  if (recipe_arg.empty() && recipe_hash(c.recipe) != c.info.recipe_hash)
    LC_INPUT_ERROR(c.info.dir, ": checkpoint of another recipe (hash ", c.info.recipe_hash, ") than ", c.recipe_file,
                   " (hash ", recipe_hash(c.recipe), "): pass the run's recipe with --recipe");
  return c;
}

CheckpointModel load_checkpoint_model(const RunCheckpoint& c) {
  const ShardReader shard = open_shard(c.info, 0);
  for (const char* dim : kDataDims)
    if (!shard.has(dim))
      LC_INPUT_ERROR(shard.path(), ": no '", dim, "' entry: a checkpoint written before export existed; resume and "
                     "checkpoint it again");
  TrainData dims;
  dims.features = static_cast<int>(shard.read_scalar("data.features"));
  dims.classes = static_cast<int>(shard.read_scalar("data.classes"));
  dims.vocab = static_cast<int>(shard.read_scalar("data.vocab"));
  dims.seq_len = static_cast<int>(shard.read_scalar("data.seq_len"));
  CheckpointModel m;
  m.model = make_model(c.recipe, dims);
  m.params.resize(m.model->params().size());
  shard.read("params", m.params);  // a size mismatch names the shard and both sizes
  return m;
}

ExportReport export_checkpoint(const ExportOptions& o) {
  namespace fs = std::filesystem;
  const RunCheckpoint c = find_run_checkpoint(o.source, o.recipe);
  const CheckpointInfo& info = c.info;
  const Recipe& recipe = c.recipe;
  CheckpointModel m = load_checkpoint_model(c);
  Model& model = *m.model;
  Recipe provenance = recipe;
  provenance.path.clear();  // where the export read it from is not the weights' business
  std::map<std::string, std::string> meta{{"laconic.step", std::to_string(info.step)},
                                          {"laconic.recipe_hash", info.recipe_hash},
                                          {"laconic.recipe", to_toml(provenance)}};
  const ExportLayout layout = model.export_layout();
  if (!o.config_out.empty() && layout.config.empty())
    LC_INPUT_ERROR("--config: the \"", layout.architecture, "\" model has no Hugging Face config");
  // Everything that can fail on input is read before the first file is written. The tokenizer is
  // the one the run trained with (from the cache beside the runs, run.out_dir, when present).
  LoadOptions load;
  load.cache_dir = recipe.run.out_dir;
  load.write_cache = false;
  const std::optional<Tokenizer> tok = run_tokenizer(recipe, load);
  std::string config = layout.config;
  if (tok && layout.architecture == "gpt" && !config.empty()) {
    // Documents end with [SEP] in the GPT's stream (lm.h), which so also marks where one begins:
    // GPT-2's single <|endoftext|> plays both parts the same way.
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(config);
    j["bos_token_id"] = kSep;
    j["eos_token_id"] = kSep;
    config = j.dump();
  }
  const std::string tokenizer_out =
      !tok ? "" : !o.tokenizer_out.empty() ? o.tokenizer_out : (fs::path(o.out).parent_path() / "tokenizer.json").string();
  const std::string tokenizer_json = tok ? hf_tokenizer_json(*tok) : "";

  write_model_safetensors(o.out, model, m.params, std::move(meta));
  try {
    if (!o.config_out.empty()) write_file_atomic(o.config_out, config + "\n");
    if (!tokenizer_out.empty()) write_file_atomic(tokenizer_out, tokenizer_json + "\n");
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(e.what());
  }
  ExportReport r;
  r.checkpoint = info.dir;
  r.step = info.step;
  r.model = model.describe();
  r.architecture = layout.architecture;
  r.tensors = layout.tensors.size();
  r.parameters = static_cast<std::int64_t>(model.params().size());
  r.tokenizer = tokenizer_out;
  return r;
}

}  // namespace laconic
