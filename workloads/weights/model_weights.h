// A model's parameters as a safetensors file in the names and layout of its architecture
// (Model::export_layout(): Hugging Face's for BERT and the GPT), and back: what `trainer export`
// writes (framework/inference/export.h) and `model.init_from` reads to start a run (run_spec.cpp).
#pragma once

#include <map>
#include <span>
#include <string>

#include "workloads/models/model.h"
#include "workloads/weights/safetensors.h"

namespace laconic {

// Writes the model's parameters (flat host values in params(), params.size() == store size).
void write_model_safetensors(const std::string& path, Model& model, std::span<const float> params,
                             std::map<std::string, std::string> metadata);

// Loads `file` (read from `path`) into the model's parameters, which must be on the host. Every
// tensor of the layout must be there with its shape; a tensor the layout does not have, a tied
// copy that differs from its original, a NaN or infinite value, a non-zero tensor the model lacks (BERT's token type
// embeddings) or another architecture's weights is a one-line InputError: "PATH: KEY: ...", KEY
// naming what asked for the load ("model.init_from").
void load_model_weights(const SafeTensorsFile& file, const std::string& path, Model& model, const std::string& key);
// Reads a weights file for `model`: a file larger than its tensors can take (each as F64, behind
// the largest header) is refused before anything is read.
SafeTensorsFile read_model_safetensors(const std::string& path, Model& model);
// Both: reads the file and loads it.
void load_model_safetensors(const std::string& path, Model& model, const std::string& key);

}  // namespace laconic
