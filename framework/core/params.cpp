#include "framework/core/params.h"

#include "framework/core/check.h"

namespace laconic {

std::size_t ParamStore::add(std::string name, std::vector<std::int64_t> shape, ParamGroup group) {
  LC_CHECK(!finalized_, "ParamStore::add('", name, "') after finalize()");
  std::size_t numel = 1;
  for (auto d : shape) {
    LC_CHECK(d > 0, "parameter '", name, "' has a non-positive dimension ", d);
    numel *= static_cast<std::size_t>(d);
  }
  for (const auto& v : views_) LC_CHECK(v.name != name, "duplicate parameter name '", name, "'");
  views_.push_back(ParamView{std::move(name), total_, numel, std::move(shape), group});
  total_ += numel;
  return views_.size() - 1;
}

void ParamStore::finalize() {
  LC_CHECK(!finalized_, "ParamStore::finalize() called twice");
  params_.resize(total_);  // zero-filled
  grads_.resize(total_);
  finalized_ = true;
}

void ParamStore::to(Device d) {
  LC_CHECK(finalized_, "ParamStore::to() before finalize()");
  params_.to(d);
  grads_.to(d);
}

void ParamStore::zero_grad() { grads_.zero(); }

}  // namespace laconic
