#include "optimizers/fused_layout.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace laconic {
namespace fused {

void make_chunks(std::span<const ParamView> views, std::vector<Chunk>& chunks, std::vector<Segment>& segments) {
  chunks.clear();
  segments.clear();
  for (std::size_t t = 0; t < views.size(); ++t) {
    const ParamView& v = views[t];
    const std::size_t first = chunks.size();
    for (std::size_t lo = v.offset, hi = v.offset + v.numel; lo < hi;) {
      const std::size_t end = std::min(hi, (lo / kChunk + 1) * kChunk);
      chunks.push_back({lo, static_cast<std::uint32_t>(t), static_cast<std::uint16_t>(end - lo),
                        static_cast<std::uint16_t>(v.group == ParamGroup::decay ? 1 : 0)});
      lo = end;
    }
    segments.push_back({static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(chunks.size() - first),
                        v.group == ParamGroup::decay ? 1u : 0u, 0u});
  }
  // Kernels index chunks by blockIdx.x and tensors by a 32-bit field.
  LC_CHECK(chunks.size() <= std::numeric_limits<std::int32_t>::max(), chunks.size(), " chunks");
}

}  // namespace fused

bool FusedLayout::describes(const ParamStore& store, std::span<const ParamView> views) const {
  if (chunks_.device() != store.device() || key_.size() != views.size()) return false;
  for (std::size_t t = 0; t < views.size(); ++t)
    if (key_[t].offset != views[t].offset || key_[t].numel != views[t].numel || key_[t].group != views[t].group)
      return false;
  return true;
}

void FusedLayout::prepare(const ParamStore& store, std::span<const ParamView> views) {
  if (describes(store, views)) return;
  std::vector<fused::Chunk> chunks;
  std::vector<fused::Segment> segments;
  fused::make_chunks(views, chunks, segments);
  const Device d = store.device();
  chunks_ = DeviceArray<fused::Chunk>(d, chunks.size());
  chunks_.upload(chunks);
  segments_ = DeviceArray<fused::Segment>(d, segments.size());
  segments_.upload(segments);
  partials_ = DeviceArray<double>(d, 2 * chunks.size());
  scales_ = DeviceArray<float>(d, segments.size());
  key_.clear();
  for (const ParamView& v : views) key_.push_back({v.offset, v.numel, v.group});
}

}  // namespace laconic
