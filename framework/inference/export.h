// Weights out of Laconic: `trainer export`, a run's checkpoint as a safetensors file in the names
// and layout of its architecture (model_weights.h), the model config and the run's provenance in
// __metadata__.
//
// __metadata__ keys written: "format" = "pt" (what transformers expects), "laconic.architecture",
// "laconic.config" (the Hugging Face config.json text, where the architecture has one),
// "laconic.model" (Model::describe()), "laconic.parameters", and from a checkpoint
// "laconic.step", "laconic.recipe_hash" and "laconic.recipe" (the resolved recipe).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include <memory>
#include <vector>

#include "workloads/models/model.h"
#include "framework/recipe/recipe.h"
#include "framework/train/checkpoint.h"
#include "workloads/weights/model_weights.h"
#include "workloads/weights/safetensors.h"

namespace laconic {

// The checkpoint `source` names, a run directory (its newest complete checkpoint) or a checkpoint
// directory, with the recipe of its run (`recipe`: a recipe file instead of the run's
// recipe.resolved.toml). Throws InputError (one line naming SOURCE) for anything else, a run
// without a complete checkpoint, or a checkpoint of another recipe than the run's.
struct RunCheckpoint {
  Recipe recipe;
  std::string recipe_file;
  CheckpointInfo info;
};
RunCheckpoint find_run_checkpoint(const std::string& source, const std::string& recipe = "");

// The checkpoint's model, built on the host, and its parameters (flat, params().size() values;
// not yet copied into the model).
struct CheckpointModel {
  std::unique_ptr<Model> model;
  std::vector<float> params;
};
CheckpointModel load_checkpoint_model(const RunCheckpoint& checkpoint);

// `trainer export SOURCE --format safetensors --out FILE`.
struct ExportOptions {
  std::string source;       // a run directory (its newest checkpoint) or a checkpoint directory
  std::string out;          // the .safetensors file
  std::string recipe;       // the run's recipe ("" = SOURCE's recipe.resolved.toml, or the run's of a checkpoint)
  std::string config_out;   // also write the architecture's config.json here ("" = no)
  // Where the run's tokenizer goes as a Hugging Face tokenizer.json (hf_tokenizer.h), when the run
  // has a Laconic tokenizer (run_tokenizer): "" = tokenizer.json beside `out`.
  std::string tokenizer_out;
};
struct ExportReport {
  std::string checkpoint;   // the checkpoint directory exported
  std::int64_t step = 0;
  std::string model;        // Model::describe()
  std::string architecture;
  std::size_t tensors = 0;
  std::int64_t parameters = 0;
  std::string tokenizer;    // the tokenizer.json written ("" = none: the run has no Laconic tokenizer)
};
ExportReport export_checkpoint(const ExportOptions& opts);

}  // namespace laconic
