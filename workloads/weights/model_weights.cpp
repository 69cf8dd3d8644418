#include "workloads/weights/model_weights.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/check.h"

namespace laconic {

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

SafeTensorsFile read_model_safetensors(const std::string& path, Model& model) {
  // The largest file of this model's weights: every tensor it may hold (tied copies too) as F64,
  // the widest dtype read, behind the largest header.
  const ExportLayout layout = model.export_layout();
  const auto numel = [](const std::vector<std::int64_t>& shape) {
    std::uint64_t n = 1;
    for (const std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  };
  std::uint64_t elements = 0;
  for (const ExportTensor& t : layout.tensors) elements += numel(t.shape);
  for (const auto& [alias, original] : layout.tied)
    for (const ExportTensor& t : layout.tensors)
      if (t.name == original) elements += numel(t.shape);
  return read_safetensors(path, 8 + kMaxSafetensorsHeader + 8 * elements,
                          "safetensors file for " + model.describe());
}

void load_model_safetensors(const std::string& path, Model& model, const std::string& key) {
  load_model_weights(read_model_safetensors(path, model), path, model, key);
}

void load_model_weights(const SafeTensorsFile& file, const std::string& path, Model& model, const std::string& key) {
  LC_CHECK(model.device() == Device::cpu, "load_model_weights: the model must be on the host");
  const ExportLayout layout = model.export_layout();
  const std::string where = path + ": " + key;
  if (const auto it = file.metadata.find("laconic.architecture"); it != file.metadata.end() && it->second != layout.architecture)
    LC_INPUT_ERROR(where, ": weights of a \"", printable(it->second), "\" model, this recipe's is \"", layout.architecture, "\" (",
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
    // A NaN or infinity would only surface as a NaN loss steps later, far from its cause.
    if (const auto bad = std::find_if(f->data.begin(), f->data.end(), [](float v) { return !std::isfinite(v); });
        bad != f->data.end())
      LC_INPUT_ERROR(where, ": tensor '", t.name, "': value ", *bad, " at index ", bad - f->data.begin(),
                     ": expected finite weights");
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
      LC_INPUT_ERROR(where, ": unknown tensor '", printable(t.name), "' ", shape_text(t.shape), " (not a parameter of ",
                     model.describe(), ")");
}

}  // namespace laconic
