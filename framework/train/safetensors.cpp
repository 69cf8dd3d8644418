#include "framework/train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "collectives/dtype.h"
#include "framework/core/check.h"
#include "framework/train/run_dir.h"

namespace laconic {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// A header larger than this is not a weights file (the reference reader's bound is 100 MB).
constexpr std::uint64_t kMaxHeader = 100u << 20;

struct DtypeInfo {
  const char* name;
  std::size_t bytes;
};
constexpr DtypeInfo kReadable[] = {{"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}};

float element(const unsigned char* p, const std::string& dtype) {
  if (dtype == "F32") {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (dtype == "F64") {
    double v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == "F16" ? from_f16(f16{bits}) : from_bf16(bf16{bits});
}

}  // namespace

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void write_safetensors(const std::string& path, std::span<const SafeTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const SafeTensor& t : tensors) {
    LC_CHECK(!t.name.empty() && t.name != "__metadata__" && names.insert(t.name).second, "safetensors: tensor name '",
             t.name, "' is empty, reserved or repeated");
    std::int64_t numel = 1;
    for (const std::int64_t d : t.shape) numel *= d;
    LC_CHECK(numel == static_cast<std::int64_t>(t.data.size()), "safetensors: tensor '", t.name, "' has ",
             t.data.size(), " values for its shape's ", numel);
    const std::uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8 + json.size() + offset, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, json.data(), json.size());
  char* at = out.data() + 8 + json.size();
  for (const SafeTensor& t : tensors) {
    if (!t.data.empty()) std::memcpy(at, t.data.data(), t.data.size() * sizeof(float));
    at += t.data.size() * sizeof(float);
  }
  try {
    write_file_atomic(path, out);
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(e.what());  // an unwritable --out is the user's to fix
  }
}

SafeTensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) LC_INPUT_ERROR(path, ": cannot open safetensors file: ", std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    LC_INPUT_ERROR(path, ": not a safetensors file: ", bytes.size(), " bytes, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader || n > bytes.size() - 8)
    LC_INPUT_ERROR(path, ": not a safetensors file: header length ", n, " exceeds the file (", bytes.size(),
                   " bytes) or 100 MB");
  const std::string_view text(bytes.data() + 8, n);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    LC_INPUT_ERROR(path, ": corrupt safetensors header (JSON): ", what);
  }
  if (!header.is_object()) LC_INPUT_ERROR(path, ": corrupt safetensors header: expected a JSON object");
  const std::uint64_t buffer = bytes.size() - 8 - n;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data() + 8 + n);

  SafeTensorsFile file;
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) LC_INPUT_ERROR(path, ": __metadata__: expected an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) LC_INPUT_ERROR(path, ": __metadata__: '", k, "': expected a string value");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      LC_INPUT_ERROR(where, ": expected {\"dtype\", \"shape\", \"data_offsets\"}");
    const auto& dt = entry["dtype"];
    const DtypeInfo* info = nullptr;
    if (dt.is_string())
      for (const DtypeInfo& d : kReadable)
        if (dt.get<std::string>() == d.name) info = &d;
    if (!info) LC_INPUT_ERROR(where, ": dtype ", dt.dump(), ": expected one of \"F32\", \"F64\", \"F16\", \"BF16\"");
    SafeTensor t;
    t.name = name;
    std::uint64_t numel = 1;
    if (!entry["shape"].is_array()) LC_INPUT_ERROR(where, ": shape: expected an array of sizes");
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (1ull << 40))
        LC_INPUT_ERROR(where, ": shape ", entry["shape"].dump(), ": expected sizes >= 0");
      t.shape.push_back(d.get<std::int64_t>());
      numel *= d.get<std::uint64_t>();
      if (numel > (1ull << 40)) LC_INPUT_ERROR(where, ": shape ", entry["shape"].dump(), ": too many elements");
    }
    const auto& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      LC_INPUT_ERROR(where, ": data_offsets: expected [begin, end]");
    const auto begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    if (begin > end || end > buffer)
      LC_INPUT_ERROR(where, ": data_offsets [", begin, ", ", end, "] outside the data buffer of ", buffer, " bytes");
    if (end - begin != numel * info->bytes)
      LC_INPUT_ERROR(where, ": data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes; shape ",
                     entry["shape"].dump(), " of ", info->name, " needs ", numel * info->bytes);
    t.data.resize(numel);
    for (std::uint64_t i = 0; i < numel; ++i) t.data[i] = element(data + begin + i * info->bytes, info->name);
    spans.push_back({begin, end, name});
    file.tensors.push_back(std::move(t));
  }
  std::vector<std::size_t> order(spans.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return spans[a].begin < spans[b].begin; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Span& a = spans[order[i - 1]];
    const Span& b = spans[order[i]];
    if (b.begin < a.end && b.end > b.begin)
      LC_INPUT_ERROR(path, ": tensors '", a.name, "' and '", b.name, "' overlap in the data buffer");
  }
  std::vector<SafeTensor> sorted;
  sorted.reserve(order.size());
  for (const std::size_t i : order) sorted.push_back(std::move(file.tensors[i]));
  file.tensors = std::move(sorted);
  return file;
}

}  // namespace laconic
