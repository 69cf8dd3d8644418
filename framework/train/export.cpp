#include "framework/train/export.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "framework/core/check.h"
#include "framework/train/checkpoint.h"
#include "framework/train/factory.h"
#include "framework/train/run_dir.h"
#include "framework/train/run_spec.h"
#include "framework/train/safetensors.h"

namespace laconic {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The shard entries that size a model without its data (written by the Checkpointer).
constexpr const char* kDataDims[] = {"data.features", "data.classes", "data.vocab", "data.seq_len"};

}  // namespace

void write_model_safetensors(const std::string& path, Model& model, std::span<const float> params,
                             std::map<std::string, std::string> metadata) {
  const ExportLayout layout = model.export_layout();
  LC_CHECK(params.size() == model.params().size(), "export: ", params.size(), " values for ", model.params().size(),
           " parameters");
  std::vector<SafeTensor> tensors;
  tensors.reserve(layout.tensors.size());
  for (const ExportTensor& t : layout.tensors)
    tensors.push_back({t.name, t.shape, export_tensor(model.params(), params, t)});
  metadata["format"] = "pt";
  metadata["laconic.architecture"] = layout.architecture;
  if (!layout.config.empty()) metadata["laconic.config"] = layout.config;
  metadata["laconic.model"] = model.describe();
  metadata["laconic.parameters"] = std::to_string(model.params().size());
  write_safetensors(path, tensors, metadata);
}

void load_model_safetensors(const std::string& path, Model& model, const std::string& key) {
  load_model_weights(read_safetensors(path), path, model, key);
}

void load_model_weights(const SafeTensorsFile& file, const std::string& path, Model& model, const std::string& key) {
  LC_CHECK(model.device() == Device::cpu, "load_model_weights: the model must be on the host");
  const ExportLayout layout = model.export_layout();
  const std::string where = path + ": " + key;
  if (const auto it = file.metadata.find("laconic.architecture"); it != file.metadata.end() && it->second != layout.architecture)
    LC_INPUT_ERROR(where, ": weights of a \"", it->second, "\" model, this recipe's is \"", layout.architecture, "\" (",
                   model.describe(), ")");
  ParamStore& store = model.params();
  const std::span<float> params = store.params();
  std::set<std::string> known;
  for (const ExportTensor& t : layout.tensors) {
    known.insert(t.name);
    const SafeTensor* f = file.find(t.name);
    if (!f)
      LC_INPUT_ERROR(where, ": missing tensor '", t.name, "' ", shape_text(t.shape), " (the file holds ", file.tensors.size(),
                     " tensors; this recipe's model is ", model.describe(), ")");
    if (f->shape != t.shape)
      LC_INPUT_ERROR(where, ": tensor '", t.name, "': shape ", shape_text(f->shape), ", expected ", shape_text(t.shape),
                     " for ", model.describe());
    if (t.view == ExportTensor::kZeros) {
      if (std::any_of(f->data.begin(), f->data.end(), [](float v) { return v != 0.0f; }))
        LC_INPUT_ERROR(where, ": tensor '", t.name, "': expected zeros (Laconic's ", layout.architecture,
                       " has no such parameter), got non-zero values");
      continue;
    }
    import_tensor(store, params, t, f->data);
  }
  for (const auto& [alias, original] : layout.tied) {
    known.insert(alias);
    const SafeTensor* a = file.find(alias);
    const SafeTensor* o = file.find(original);
    if (a && (a->shape != o->shape || a->data != o->data))
      LC_INPUT_ERROR(where, ": tensor '", alias, "' differs from '", original, "', which it is tied to in this model");
  }
  for (const SafeTensor& t : file.tensors)
    if (!known.count(t.name))
      LC_INPUT_ERROR(where, ": unknown tensor '", t.name, "' ", shape_text(t.shape), " (not a parameter of ",
                     model.describe(), ")");
}

ExportReport export_checkpoint(const ExportOptions& o) {
  namespace fs = std::filesystem;
  const fs::path source(o.source);
  std::error_code ec;
  CheckpointInfo info;
  std::string recipe_file = o.recipe;
  if (fs::exists(source / "MANIFEST.json", ec)) {
    info = read_checkpoint_info(o.source);
    // The default layout: RUN_DIR/checkpoints/step-N.
    if (recipe_file.empty()) recipe_file = (source.parent_path().parent_path() / "recipe.resolved.toml").string();
    if (!fs::exists(recipe_file, ec))
      LC_INPUT_ERROR(o.source, ": no recipe.resolved.toml in the run directory above this checkpoint (",
                     recipe_file, "): pass the run's recipe with --recipe");
  } else if (fs::exists(source / "recipe.resolved.toml", ec)) {
    if (recipe_file.empty()) recipe_file = (source / "recipe.resolved.toml").string();
  } else {
    LC_INPUT_ERROR(o.source, ": expected a run directory (with recipe.resolved.toml) or a checkpoint directory "
                   "(with MANIFEST.json)");
  }
  const Recipe recipe = load_recipe(recipe_file);
  if (info.dir.empty()) {
    const std::string root = checkpoint_root(recipe, o.source);
    const auto latest = find_latest_checkpoint(root);
    if (!latest)
      LC_INPUT_ERROR(o.source, ": no complete checkpoint under ", root,
                     " (train with --checkpoint.every=N; the last step is always checkpointed then)");
    info = *latest;
  }
  if (o.recipe.empty() && recipe_hash(recipe) != info.recipe_hash)
    LC_INPUT_ERROR(info.dir, ": checkpoint of another recipe (hash ", info.recipe_hash, ") than ", recipe_file, " (hash ",
                   recipe_hash(recipe), "): pass the run's recipe with --recipe");
  const ShardReader shard = open_shard(info, 0);
  for (const char* dim : kDataDims)
    if (!shard.has(dim))
      LC_INPUT_ERROR(shard.path(), ": no '", dim, "' entry: a checkpoint written before export existed; resume and "
                     "checkpoint it again");
  TrainData dims;
  dims.features = static_cast<int>(shard.read_scalar("data.features"));
  dims.classes = static_cast<int>(shard.read_scalar("data.classes"));
  dims.vocab = static_cast<int>(shard.read_scalar("data.vocab"));
  dims.seq_len = static_cast<int>(shard.read_scalar("data.seq_len"));
  const auto model = make_model(recipe, dims);
  std::vector<float> params(model->params().size());
  shard.read("params", params);  // a size mismatch names the shard and both sizes
  Recipe provenance = recipe;
  provenance.path.clear();  // where the export read it from is not the weights' business
  std::map<std::string, std::string> meta{{"laconic.step", std::to_string(info.step)},
                                          {"laconic.recipe_hash", info.recipe_hash},
                                          {"laconic.recipe", to_toml(provenance)}};
  const ExportLayout layout = model->export_layout();
  if (!o.config_out.empty() && layout.config.empty())
    LC_INPUT_ERROR("--config: the \"", layout.architecture, "\" model has no Hugging Face config");
  write_model_safetensors(o.out, *model, params, std::move(meta));
  if (!o.config_out.empty()) {
    try {
      write_file_atomic(o.config_out, layout.config + "\n");
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      throw InputError(e.what());
    }
  }
  ExportReport r;
  r.checkpoint = info.dir;
  r.step = info.step;
  r.model = model->describe();
  r.architecture = layout.architecture;
  r.tensors = layout.tensors.size();
  r.parameters = static_cast<std::int64_t>(model->params().size());
  return r;
}

}  // namespace laconic
