#include "workloads/data/image_batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

// 7 examples of 2x2 whose pixel j of example i is 10 i + j, label i % 10.
ImageDataset tiny() {
  ImageDataset d;
  d.rows = 2;
  d.cols = 2;
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 4; ++j) d.images.push_back(static_cast<float>(10 * i + j));
    d.labels.push_back(i % 10);
  }
  return d;
}

void expect_examples(const Batch& b, const std::vector<std::int64_t>& which) {
  ASSERT_EQ(b.size, static_cast<int>(which.size()));
  ASSERT_EQ(b.features, 4);
  ASSERT_EQ(b.inputs.size(), which.size() * 4);
  ASSERT_EQ(b.targets.size(), which.size());
  for (std::size_t i = 0; i < which.size(); ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(b.inputs[i * 4 + static_cast<std::size_t>(j)], 10.0f * static_cast<float>(which[i]) + static_cast<float>(j));
    EXPECT_EQ(b.targets[i], which[i] % 10);
  }
}

TEST(Gather, CopiesExamplesInIndexOrder) {
  const ImageDataset d = tiny();
  Batch b;
  const std::vector<std::int64_t> idx = {6, 0, 3, 3};
  gather(b, d, idx);
  expect_examples(b, idx);
  EXPECT_THROW(gather(b, d, std::vector<std::int64_t>{7}), Error);
}

TEST(Gather, ReusesBuffersOnceGrown) {
  const ImageDataset d = tiny();
  Batch b;
  gather(b, d, std::vector<std::int64_t>{1, 2, 3, 4, 5});
  const float* inputs = b.inputs.data();
  const std::int32_t* targets = b.targets.data();
  gather(b, d, std::vector<std::int64_t>{2});  // smaller: shrinks size, keeps storage
  expect_examples(b, {2});
  gather(b, d, std::vector<std::int64_t>{5, 4, 3, 2, 1});
  expect_examples(b, {5, 4, 3, 2, 1});
  EXPECT_EQ(b.inputs.data(), inputs);
  EXPECT_EQ(b.targets.data(), targets);
}

TEST(Slice, IteratesInOrderInChunksClippingTheLast) {
  const ImageDataset d = tiny();
  Batch b;
  std::vector<std::int64_t> seen_sizes;
  std::int64_t next = 0;
  for (std::int64_t begin = 0; begin < d.size(); begin += 3) {
    slice(b, d, begin, 3);
    std::vector<std::int64_t> expected;
    for (int i = 0; i < b.size; ++i) expected.push_back(next++);
    expect_examples(b, expected);
    seen_sizes.push_back(b.size);
  }
  EXPECT_EQ(seen_sizes, (std::vector<std::int64_t>{3, 3, 1}));
  EXPECT_THROW(slice(b, d, 7, 3), Error);
}

}  // namespace
}  // namespace laconic
