#include "workloads/weights/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <cstdint>
#include <set>

#include <nlohmann/json.hpp>

#include "collectives/dtype.h"
#include "core/check.h"
#include "core/input.h"
#include "core/json.h"
#include "core/output.h"

namespace laconic {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// More dimensions than any weights have; it keeps the messages that print a shape short.
constexpr std::size_t kMaxRank = 64;
// The data is read and converted this many bytes at a time (a multiple of every dtype's width).
constexpr std::uint64_t kChunkBytes = 1u << 20;

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

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

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

namespace {

// One tensor's header entry, checked: its dtype and its bytes [begin, end) of the data buffer.
struct Entry {
  SafeTensor tensor;
  const DtypeInfo* dtype;
  std::uint64_t begin, end;
};

// The header's JSON (its length n from the file's first 8 bytes).
nlohmann::json read_header(const InputFile& in, const std::string& path, std::uint64_t& n) {
  if (in.size() < 8)
    LC_INPUT_ERROR(path, ": not a safetensors file: ", in.size(), " bytes, shorter than the 8-byte header length");
  in.read_at(0, &n, 8);
  if (n > kMaxSafetensorsHeader || n > in.size() - 8)
    LC_INPUT_ERROR(path, ": not a safetensors file: header length ", n, " exceeds the file (", in.size(),
                   " bytes) or the limit of 100 MB");
  nlohmann::json header;
  {
    std::string text(n, '\0');  // up to 100 MB, not kept beside the tensors
    in.read_at(8, text.data(), n);
    header = parse_json(text, path + ": corrupt safetensors header");
  }
  if (!header.is_object())
    LC_INPUT_ERROR(path, ": corrupt safetensors header: expected a JSON object, got ", header.type_name());
  return header;
}

void read_metadata(const nlohmann::json& entry, const std::string& path, std::map<std::string, std::string>& out) {
  if (!entry.is_object()) LC_INPUT_ERROR(path, ": __metadata__: expected an object of strings, got ", entry.type_name());
  for (const auto& [k, v] : entry.items()) {
    if (!v.is_string())
      LC_INPUT_ERROR(path, ": __metadata__: '", printable(k), "': expected a string value, got ", v.type_name());
    out[k] = v.get<std::string>();
  }
}

const DtypeInfo& entry_dtype(const nlohmann::json& dt, const std::string& where) {
  if (dt.is_string())
    for (const DtypeInfo& d : kReadable)
      if (dt.get<std::string>() == d.name) return d;
  const std::string got = dt.is_string() ? detail::concat('"', printable(dt.get<std::string>()), '"') : dt.type_name();
  LC_INPUT_ERROR(where, ": dtype ", got, ": expected one of \"F32\", \"F64\", \"F16\", \"BF16\"");
}

// The shape into `shape`; returns its element count. The element count may not wrap: [2^32, 2^32]
// is not an empty tensor.
std::uint64_t entry_shape(const nlohmann::json& shape, const std::string& where, std::vector<std::int64_t>& out) {
  if (!shape.is_array()) LC_INPUT_ERROR(where, ": shape: expected an array of sizes, got ", shape.type_name());
  if (shape.size() > kMaxRank) LC_INPUT_ERROR(where, ": shape: ", shape.size(), " dimensions, expected at most ", kMaxRank);
  std::uint64_t numel = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto& d = shape[i];
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      LC_INPUT_ERROR(where, ": shape[", i, "]: expected a size >= 0, got ",
                     d.is_number() ? "a negative or non-integer number" : d.type_name());
    out.push_back(d.get<std::int64_t>());
    if (__builtin_mul_overflow(numel, d.get<std::uint64_t>(), &numel))
      LC_INPUT_ERROR(where, ": shape ", shape_text(out), "...: more than 2^64 elements");
  }
  return numel;
}

// A tensor's entry, checked against the data buffer of `buffer` bytes (messages name keys and
// JSON types, never the values, which may be anything).
Entry read_entry(const std::string& name, const nlohmann::json& entry, const std::string& path, std::uint64_t buffer) {
  const std::string where = path + ": tensor '" + printable(name) + "'";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    LC_INPUT_ERROR(where, ": expected {\"dtype\", \"shape\", \"data_offsets\"}");
  const DtypeInfo& info = entry_dtype(entry["dtype"], where);
  Entry e{{name, {}, {}}, &info, 0, 0};
  const std::uint64_t numel = entry_shape(entry["shape"], where, e.tensor.shape);
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, info.bytes, &bytes))
    LC_INPUT_ERROR(where, ": shape ", shape_text(e.tensor.shape), ": more than 2^64 bytes of ", info.name);
  const auto& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    LC_INPUT_ERROR(where, ": data_offsets: expected [begin, end], two integers >= 0");
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > buffer)
    LC_INPUT_ERROR(where, ": data_offsets [", e.begin, ", ", e.end, "] outside the data buffer of ", buffer, " bytes");
  if (e.end - e.begin != bytes)
    LC_INPUT_ERROR(where, ": data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin, " bytes; shape ",
                   shape_text(e.tensor.shape), " of ", info.name, " needs ", bytes);
  return e;
}

// As the reference reader requires: the tensors, in the order of their offsets, tile the data
// buffer exactly, so no two overlap (whatever their order in the header) and no byte is unused.
// Sorts the entries in that order.
void check_tiling(std::vector<Entry>& entries, std::uint64_t buffer, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < covered)
      LC_INPUT_ERROR(path, ": tensors '", printable(entries[i - 1].tensor.name), "' and '", printable(e.tensor.name),
                     "' overlap in the data buffer");
    if (e.begin > covered)
      LC_INPUT_ERROR(path, ": bytes [", covered, ", ", e.begin, ") of the data buffer belong to no tensor");
    covered = e.end;
  }
  if (covered != buffer)
    LC_INPUT_ERROR(path, ": bytes [", covered, ", ", buffer, ") of the data buffer belong to no tensor");
}

// The entry's data (the buffer starts at byte `data_at` of the file), converted to float a chunk
// at a time.
void read_data(const InputFile& in, std::uint64_t data_at, Entry& e, std::vector<unsigned char>& chunk) {
  const std::size_t width = e.dtype->bytes;
  e.tensor.data.resize((e.end - e.begin) / width);
  chunk.resize(std::min<std::uint64_t>(e.end - e.begin, kChunkBytes));
  for (std::uint64_t at = e.begin; at < e.end; at += chunk.size()) {
    const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(e.end - at, chunk.size()));
    in.read_at(data_at + at, chunk.data(), len);
    float* out = e.tensor.data.data() + (at - e.begin) / width;
    for (std::size_t i = 0; i < len / width; ++i) out[i] = element(chunk.data() + i * width, e.dtype->name);
  }
}

}  // namespace

SafeTensorsFile read_safetensors(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  const InputFile in(path, max_bytes, what);
  std::uint64_t n = 0;
  const nlohmann::json header = read_header(in, path, n);
  const std::uint64_t buffer = in.size() - 8 - n;
  // Every entry is checked before any data is read.
  SafeTensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__")
      read_metadata(entry, path, file.metadata);
    else
      entries.push_back(read_entry(name, entry, path, buffer));
  }
  check_tiling(entries, buffer, path);
  std::vector<unsigned char> chunk;
  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    read_data(in, 8 + n, e, chunk);
    file.tensors.push_back(std::move(e.tensor));
  }
  return file;
}

}  // namespace laconic
