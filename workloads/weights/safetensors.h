// safetensors, the Hugging Face weights format (docs/references.md, "Formats"):
//
//   u64 little-endian N | N bytes of UTF-8 JSON | the data buffer
//   JSON: {"NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value", ...}}       (string values only)
//   offsets are relative to the buffer start; data is little-endian, C order.
//
// Laconic writes F32 tensors, in the order given, with no gaps, the header padded with spaces to a
// multiple of 8 bytes (as the reference writer does, so the buffer is 8-byte aligned). It reads
// F32, F64, F16 and BF16 tensors (converted to float) and checks everything it can: a regular file
// within the caller's limit, the header length (at most 100 MB, as the reference reader allows)
// against the file, the JSON (nested at most kMaxJsonDepth deep), every entry's dtype, shape (at
// most 64 dimensions, an element count that does not wrap) and offsets (exactly shape's product of
// elements; in the order of their offsets the tensors tile the data buffer, as the reference
// requires: no two overlap, no byte is left over) and that metadata values are strings. Any
// problem is a one-line InputError naming the file (and the tensor); names from the file are
// printed escaped (printable()), values from the header never.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace laconic {

struct SafeTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // the product of shape elements, C order
};

struct SafeTensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafeTensor> tensors;  // in the order of their data in the file
  const SafeTensor* find(const std::string& name) const;
};

// Writes `path` atomically (a temporary file, fsync, rename): nothing is left half-written. An
// unwritable path is an InputError naming it. Tensor names must be unique and non-empty.
void write_safetensors(const std::string& path, std::span<const SafeTensor> tensors,
                       const std::map<std::string, std::string>& metadata);

// The whole file, validated (see above), of at most max_bytes bytes. The header is checked before
// any data is read; the tensors then take (end - begin) / width floats each, at most twice the
// file's size (F16, BF16).
// `what` names the file in errors.
SafeTensorsFile read_safetensors(const std::string& path, std::uint64_t max_bytes = UINT64_MAX,
                                 std::string_view what = "safetensors file");

// The reference reader's bound on the JSON header: 100 MB.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

// "[2, 3]", as messages print a shape.
std::string shape_text(std::span<const std::int64_t> shape);

}  // namespace laconic
