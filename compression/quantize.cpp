#include "compression/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "collectives/dtype.h"
#include "core/check.h"

namespace laconic {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool is_int(Codec c) { return c == Codec::int8 || c == Codec::int4 || c == Codec::int2; }

// The largest code value an int codec uses (int2: the outer level 1.5), or the largest finite
// value of a float codec (bf16: scales are 1).
double code_max(Codec c) {
  switch (c) {
    case Codec::int8: return 127.0;
    case Codec::int4: return 7.0;
    case Codec::int2: return 1.5;
    case Codec::fp16: return 65504.0;
    case Codec::fp8_e4m3: return 448.0;
    case Codec::bf16:
    case Codec::fp32: return 0.0;
  }
  return 0.0;
}

// The scale of a block whose largest magnitude is `a` (the header's rules).
float block_scale(Codec c, float a) {
  if (!std::isfinite(a)) return kNaN;
  if (a == 0.0f) return 0.0f;
  if (c == Codec::bf16) return 1.0f;
  if (is_int(c)) return static_cast<float>(static_cast<double>(a) / code_max(c));
  // Float codecs: the smallest power of two p with a / p <= max (a normal float, >= 2^-126).
  int e = 0;
  const double m = std::frexp(static_cast<double>(a) / code_max(c), &e);  // r = m * 2^e, m in [0.5, 1)
  double p = std::ldexp(1.0, m == 0.5 ? e - 1 : e);
  p = std::max(p, static_cast<double>(std::numeric_limits<float>::min()));
  return static_cast<float>(p);
}

// The code of v = x / s (the int codecs' integer in two's complement, the float codecs' bits).
std::uint32_t encode_one(Codec c, float v) {
  switch (c) {
    case Codec::int8:
    case Codec::int4: {
      const float q = std::clamp(std::nearbyint(v), static_cast<float>(-code_max(c)), static_cast<float>(code_max(c)));
      return static_cast<std::uint32_t>(static_cast<std::int32_t>(q));
    }
    case Codec::int2: return static_cast<std::uint32_t>(std::clamp(std::floor(v) + 2.0f, 0.0f, 3.0f));
    case Codec::bf16: return to_bf16(v).bits;
    case Codec::fp16: return to_f16(v).bits;
    case Codec::fp8_e4m3: return to_fp8_e4m3(v);
    case Codec::fp32: break;
  }
  return 0;
}

// The value of one code, before the scale.
float decode_one(Codec c, std::uint32_t q) {
  switch (c) {
    case Codec::int8: return static_cast<float>(static_cast<std::int8_t>(q));
    case Codec::int4: return static_cast<float>(static_cast<std::int32_t>(q << 28) >> 28);  // sign-extend
    case Codec::int2: return static_cast<float>(q) - 1.5f;
    case Codec::bf16: return from_bf16(bf16{static_cast<std::uint16_t>(q)});
    case Codec::fp16: return from_f16(f16{static_cast<std::uint16_t>(q)});
    case Codec::fp8_e4m3: return from_fp8_e4m3(static_cast<std::uint8_t>(q));
    case Codec::fp32: break;
  }
  return 0.0f;
}

// Reads and writes codes of `bits` bits (2, 4, 8 or 16) at element positions of a code stream.
std::uint32_t get_code(const std::uint8_t* codes, std::size_t i, int bits) {
  if (bits == 16) {
    std::uint16_t v;
    std::memcpy(&v, codes + 2 * i, sizeof v);
    return v;
  }
  const std::size_t bit = i * static_cast<std::size_t>(bits);
  return (codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

void put_code(std::uint8_t* codes, std::size_t i, int bits, std::uint32_t q) {
  if (bits == 16) {
    const auto v = static_cast<std::uint16_t>(q);
    std::memcpy(codes + 2 * i, &v, sizeof v);
    return;
  }
  const std::size_t bit = i * static_cast<std::size_t>(bits);
  const std::uint32_t mask = (1u << bits) - 1u;
  std::uint8_t& byte = codes[bit / 8];
  byte = static_cast<std::uint8_t>((byte & ~(mask << (bit % 8))) | ((q & mask) << (bit % 8)));
}

std::size_t blocks_of(std::size_t block, std::size_t n) { return (n + block - 1) / block; }

// Calls f(block index, first element, elements) for every block of n.
template <typename F>
void for_blocks(std::size_t block, std::size_t n, F&& f) {
  for (std::size_t b = 0, i = 0; i < n; ++b, i += block) f(b, i, std::min(block, n - i));
}

template <bool kAdd>
void decode_into(std::span<const std::uint8_t> in, Codec c, std::size_t block, float weight, std::span<float> out) {
  const std::size_t n = out.size();
  LC_CHECK(in.size() >= quantize_bytes(c, block, n), "quantized input has ", in.size(), " bytes, ",
           quantize_bytes(c, block, n), " expected for ", n, " elements");
  if (c == Codec::fp32) {
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, in.data() + 4 * i, sizeof v);
      if constexpr (kAdd) out[i] += weight * v; else out[i] = v;
    }
    return;
  }
  const int bits = codec_bits(c);
  const std::uint8_t* codes = in.data() + quantize_scale_bytes(c, block, n);
  for_blocks(block, n, [&](std::size_t b, std::size_t first, std::size_t count) {
    float s;
    std::memcpy(&s, in.data() + 4 * b, sizeof s);
    for (std::size_t i = first; i < first + count; ++i) {
      const float v = decode_one(c, get_code(codes, i, bits)) * s;
      if constexpr (kAdd) out[i] += weight * v; else out[i] = v;
    }
  });
}

}  // namespace

int codec_bits(Codec c) {
  switch (c) {
    case Codec::fp32: return 32;
    case Codec::bf16:
    case Codec::fp16: return 16;
    case Codec::fp8_e4m3:
    case Codec::int8: return 8;
    case Codec::int4: return 4;
    case Codec::int2: return 2;
  }
  return 32;
}

std::size_t quantize_scale_bytes(Codec c, std::size_t block, std::size_t n) {
  LC_CHECK(block >= 1, "codec block ", block);
  return c == Codec::fp32 ? 0 : sizeof(float) * blocks_of(block, n);
}

std::size_t quantize_bytes(Codec c, std::size_t block, std::size_t n) {
  const auto bits = static_cast<std::size_t>(codec_bits(c));
  return quantize_scale_bytes(c, block, n) + (n * bits + 7) / 8;
}

std::uint8_t to_fp8_e4m3(float x) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return 0x7F;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7E;  // saturate (no infinities)
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1); a = 1.f * 2^(e-1)
  std::uint32_t code;
  if (a == 0.0f || e - 1 < -6) {
    // Subnormal (or zero): multiples of 2^-9; 8 * 2^-9 rounds up into the smallest normal, code 8.
    code = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(a, 9)));
  } else {
    auto mant = static_cast<std::uint32_t>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));  // 3 bits, may carry
    std::uint32_t exp = static_cast<std::uint32_t>(e - 1 + 7);
    if (mant == 8) {
      mant = 0;
      ++exp;
    }
    code = (exp << 3) | mant;
  }
  return static_cast<std::uint8_t>(sign | std::min<std::uint32_t>(code, 0x7E));
}

float from_fp8_e4m3(std::uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const std::uint32_t exp = (code >> 3) & 0xF, mant = code & 0x7;
  if (exp == 0xF && mant == 0x7) return kNaN;
  const float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                           : std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  return negative ? -v : v;
}

void quantize_encode(std::span<const float> x, std::span<float> error, Codec c, std::size_t block,
                     std::span<std::uint8_t> out) {
  const std::size_t n = x.size();
  LC_CHECK(error.empty() || error.size() == n, "error has ", error.size(), " elements, x ", n);
  LC_CHECK(out.size() >= quantize_bytes(c, block, n), "quantized output has ", out.size(), " bytes, ",
           quantize_bytes(c, block, n), " needed for ", n, " elements");
  const bool ef = !error.empty();
  if (c == Codec::fp32) {  // exact: nothing to feed back
    std::memcpy(out.data(), x.data(), x.size_bytes());
    if (ef) {
      for (std::size_t i = 0; i < n; ++i) {
        const float acc = x[i] + error[i];
        std::memcpy(out.data() + 4 * i, &acc, sizeof acc);
        error[i] = 0.0f;
      }
    }
    return;
  }
  const int bits = codec_bits(c);
  std::uint8_t* codes = out.data() + quantize_scale_bytes(c, block, n);
  std::memset(codes, 0, (n * static_cast<std::size_t>(bits) + 7) / 8);  // padding bits are 0
  const auto acc = [&](std::size_t i) { return ef ? x[i] + error[i] : x[i]; };
  for_blocks(block, n, [&](std::size_t b, std::size_t first, std::size_t count) {
    float a = 0.0f;
    bool finite = true;
    for (std::size_t i = first; i < first + count; ++i) {
      const float v = std::fabs(acc(i));
      finite = finite && std::isfinite(v);
      a = std::max(a, v);
    }
    const float s = block_scale(c, finite ? a : kNaN);
    std::memcpy(out.data() + 4 * b, &s, sizeof s);
    const bool coded = std::isfinite(s) && s != 0.0f;
    // Dividing by the scale (not multiplying by its inverse): exact for the powers of two of the
    // float codecs, and the int codecs' round trip of q * s then gives q back exactly.
    for (std::size_t i = first; i < first + count; ++i) {
      const float v = acc(i);
      const std::uint32_t q = coded ? encode_one(c, v / s) : (c == Codec::int2 ? 2u : 0u);
      put_code(codes, i, bits, q);
      if (ef) error[i] = v - decode_one(c, q) * s;
    }
  });
}

void quantize_decode(std::span<const std::uint8_t> in, Codec c, std::size_t block, std::span<float> out) {
  decode_into<false>(in, c, block, 1.0f, out);
}

void quantize_decode_add(std::span<const std::uint8_t> in, Codec c, std::size_t block, float weight,
                         std::span<float> sum) {
  decode_into<true>(in, c, block, weight, sum);
}

// ---- the reducer ----

QuantizedReducer::QuantizedReducer(QuantizeOptions opts) : opts_(opts) {
  LC_CHECK(opts_.block >= 1, "codec block ", opts_.block);
  LC_CHECK(opts_.device == Device::cpu, "the ", name_of(opts_.codec),
           " pseudo-gradient codec runs on host buffers only (device = \"cpu\")");
}

void QuantizedReducer::prepare(std::span<const BucketLayout> buckets) {
  for (const BucketLayout& b : buckets) residuals(b);
}

QuantizedReducer::Residuals* QuantizedReducer::residuals(const BucketLayout& bucket) {
  if (!opts_.error_feedback) return nullptr;
  LC_CHECK(bucket.id >= 0, "bucket id ", bucket.id);
  const auto id = static_cast<std::size_t>(bucket.id);
  if (id >= residuals_.size()) residuals_.resize(id + 1);
  Residuals& r = residuals_[id];
  if (r.worker.empty()) {
    r.worker.assign(bucket.size, 0.0f);
    r.server.assign(bucket.size, 0.0f);
  }
  LC_CHECK(r.worker.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size,
           " elements; its codec residuals were sized for ", r.worker.size());
  return &r;
}

void QuantizedReducer::size_wire(std::size_t n, int world) {
  if (world == world_ && n <= wire_n_) return;
  for (const Residuals& r : residuals_) n = std::max(n, r.worker.size());
  const RankChunks c(n, world);
  const std::size_t nb = quantize_bytes(opts_.codec, opts_.block, c.chunk);
  blocks_.assign(c.world * nb, 0);
  received_.assign(c.world * nb, 0);
  average_.assign(c.chunk, 0.0f);
  world_ = world;
  wire_n_ = n;
}

void QuantizedReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t /*step*/,
                              Communicator& comm) {
  LC_CHECK(data.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements, got ",
           data.size());
  check_comm_memory(opts_.device, comm, name_of(opts_.codec));
  Residuals* res = residuals(bucket);
  size_wire(data.size(), comm.size());
  const RankChunks c(data.size(), comm.size());
  const Codec codec = opts_.codec;
  const std::size_t block = opts_.block;
  const std::size_t nb = quantize_bytes(codec, block, c.chunk);
  const auto own = static_cast<std::size_t>(comm.rank());
  const auto part = [&](std::span<float> v, std::size_t j) {
    return v.subspan(std::min(c.begin(j), c.n), c.real(j));
  };
  const auto wire = [&](std::vector<std::uint8_t>& v, std::size_t j) {
    return std::span<std::uint8_t>(v).subspan(j * nb, nb);
  };
  const auto error = [&](std::vector<float>* r, std::size_t j) {
    return r ? part(std::span<float>(*r), j) : std::span<float>{};
  };

  // Phase 1: chunk j, with this rank's worker residual, to rank j.
  for (std::size_t j = 0; j < c.world; ++j)
    quantize_encode(part(data, j), error(res ? &res->worker : nullptr, j), codec, block, wire(blocks_, j));
  const std::size_t wire_bytes = c.world * nb;  // the buffers are sized for the largest bucket
  comm.all_to_all(CBuf{blocks_.data(), wire_bytes, DType::u8}, Buf{received_.data(), wire_bytes, DType::u8});

  // Phase 2: the owned chunk's average over the ranks in rank order, encoded again and shared.
  const std::span<float> average = std::span<float>(average_).first(c.real(own));
  std::fill(average.begin(), average.end(), 0.0f);
  const float w = 1.0f / static_cast<float>(c.world);
  for (std::size_t i = 0; i < c.world; ++i) quantize_decode_add(wire(received_, i), codec, block, w, average);
  quantize_encode(average, error(res ? &res->server : nullptr, own), codec, block, wire(blocks_, own));
  comm.all_gather(CBuf{blocks_.data() + own * nb, nb, DType::u8}, Buf{blocks_.data(), wire_bytes, DType::u8});
  for (std::size_t j = 0; j < c.world; ++j) quantize_decode(wire(blocks_, j), codec, block, part(data, j));

  ReducerStats stats;
  stats.calls = 1;
  stats.input_bytes = data.size_bytes();
  const std::size_t scale = quantize_scale_bytes(codec, block, c.chunk);
  stats.scale_bytes = (c.world + 1) * scale;
  stats.value_bytes = (c.world + 1) * (nb - scale);
  account(stats);
}

std::string QuantizedReducer::describe() const {
  std::ostringstream os;
  os << name_of(opts_.codec);
  if (opts_.codec != Codec::fp32) os << " in blocks of " << opts_.block << " with an fp32 scale";
  os << " (two-phase all-reduce" << (opts_.error_feedback ? ", error feedback" : "") << ")";
  return os.str();
}

std::vector<StateTensor> QuantizedReducer::state() {
  std::vector<StateTensor> out;
  for (std::size_t id = 0; id < residuals_.size(); ++id) {
    Residuals& r = residuals_[id];
    if (r.worker.empty()) continue;
    out.push_back({"quantize.worker_error." + std::to_string(id), r.worker, Device::cpu});
    out.push_back({"quantize.server_error." + std::to_string(id), r.server, Device::cpu});
  }
  return out;
}

}  // namespace laconic
