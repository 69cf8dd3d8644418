#include "workloads/data/source.h"

#include <vector>

#include "core/check.h"
#include "workloads/data/image_batch.h"

namespace laconic {

void ImageSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t) const {
  gather(out, *d_, indices);
}

void MlmSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const {
  mlm_batch(out, *d_, indices, opts_, key);
}

RangeSource::RangeSource(std::shared_ptr<const DataSource> inner, std::int64_t begin, std::int64_t end)
    : inner_(std::move(inner)), begin_(begin), end_(end) {
  LC_CHECK(inner_ && 0 <= begin_ && begin_ <= end_ && end_ <= inner_->size(), "RangeSource: [", begin_, ", ", end_,
           ") of ", inner_ ? inner_->size() : 0, " examples");
}

void RangeSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const {
  // Evaluation only (not the step loop): one small index vector per batch.
  std::vector<std::int64_t> shifted(indices.begin(), indices.end());
  for (std::int64_t& i : shifted) {
    LC_CHECK(0 <= i && i < size(), "RangeSource: example ", i, " of ", size());
    i += begin_;
  }
  inner_->fill(out, shifted, key);
}

std::shared_ptr<const DataSource> eval_split(std::shared_ptr<const DataSource> eval, EvalSplit split) {
  if (!eval || split == EvalSplit::all) return eval;
  const std::int64_t n = eval->size(), half = n / 2;
  return split == EvalSplit::validation ? std::make_shared<RangeSource>(eval, 0, half)
                                        : std::make_shared<RangeSource>(eval, half, n);
}

}  // namespace laconic
