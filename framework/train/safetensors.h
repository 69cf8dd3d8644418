// safetensors, the Hugging Face weights format (../shared/REFERENCES.md, "Formats"):
//
//   u64 little-endian N | N bytes of UTF-8 JSON | the data buffer
//   JSON: {"NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value", ...}}       (string values only)
//   offsets are relative to the buffer start; data is little-endian, C order.
//
// Laconic writes F32 tensors, in the order given, with no gaps, the header padded with spaces to a
// multiple of 8 bytes (as the reference writer does, so the buffer is 8-byte aligned). It reads
// F32, F64, F16 and BF16 tensors (converted to float) and checks everything it can: the header
// length against the file, the JSON, every entry's dtype, shape and offsets (inside the buffer,
// exactly shape's product of elements, no two tensors overlapping) and that metadata values are
// strings. Any problem is a one-line InputError naming the file (and the tensor).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
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

// The whole file, validated (see above).
SafeTensorsFile read_safetensors(const std::string& path);

}  // namespace laconic
