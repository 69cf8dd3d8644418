#include "core/params.h"

#include "core/check.h"
#include "core/input.h"
#include "core/units.h"

namespace laconic {

std::size_t ParamStore::add(std::string name, std::vector<std::int64_t> shape, ParamGroup group, ParamKind kind) {
  LC_CHECK(!finalized_, "ParamStore::add('", name, "') after finalize()");
  LC_CHECK(kind != ParamKind::hidden_matrix || shape.size() == 2, "hidden matrix '", name, "' has ", shape.size(),
           " dimensions");
  std::size_t numel = 1;
  for (auto d : shape) {
    LC_CHECK(d > 0, "parameter '", name, "' has a non-positive dimension ", d);
    if (__builtin_mul_overflow(numel, static_cast<std::size_t>(d), &numel))
      LC_INPUT_ERROR("parameter '", name, "' has more than 2^64 elements");
  }
  for (const auto& v : views_) LC_CHECK(v.name != name, "duplicate parameter name '", name, "'");
  views_.push_back(ParamView{std::move(name), total_, numel, std::move(shape), group, kind});
  if (__builtin_add_overflow(total_, numel, &total_)) LC_INPUT_ERROR("the model has more than 2^64 parameters");
  return views_.size() - 1;
}

void ParamStore::finalize() {
  LC_CHECK(!finalized_, "ParamStore::finalize() called twice");
  // Weights and gradients alone: a model whose two buffers exceed the machine's memory is refused
  // here, before the allocation fails or the kernel's OOM killer ends the process.
  const double bytes = 2.0 * sizeof(float) * static_cast<double>(total_);
  if (bytes > static_cast<double>(physical_memory_bytes()))
    LC_INPUT_ERROR("the model's ", total_, " parameters need ", format_bytes(bytes), " for weights and gradients, more "
                   "than this machine's memory (", format_bytes(static_cast<double>(physical_memory_bytes())), ")");
  params_.resize(total_);  // zero-filled
  grads_.resize(total_);
  finalized_ = true;
}

void ParamStore::to(Device d) {
  LC_CHECK(finalized_, "ParamStore::to() before finalize()");
  LC_CHECK(!window_, "ParamStore::to() with staged gradients");
  params_.to(d);
  grads_.to(d);
}

void ParamStore::zero_grad() {
  if (window_)
    window_->zero();
  else
    grads_.zero();
}

DeviceArray<float>& ParamStore::whole_grads() {
  LC_CHECK(!window_, "the whole gradient buffer is not held (sync.shard = \"gradients\" stages a bucket at a time); "
           "a model writes its gradients through ParamStore::grad(view)");
  return grads_;
}

void ParamStore::stage_grads(GradWindow* w) {
  LC_CHECK(finalized_, "ParamStore::stage_grads() before finalize()");
  window_ = w;
  if (w) {
    grads_ = DeviceArray<float>(params_.device());
  } else if (grads_.size() != total_) {
    grads_ = DeviceArray<float>(params_.device(), total_);
  }
}

}  // namespace laconic
