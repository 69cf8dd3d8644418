// Counter-based random numbers: the value at (key, counter) is a pure function, so any rank can
// regenerate any stream at any step without carrying generator state, and runs are bitwise
// reproducible. Keys are derived from (seed, rank, step, purpose) with key(); the generator is a
// SplitMix64-style finaliser over key ^ counter (Steele, Lea & Flood 2014, "Fast splittable
// pseudorandom number generators"), strong enough for initialisation, dropout and shuffling.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

// Usable from CUDA kernels too (dropout masks must match bit for bit on CPU and GPU).
#ifdef __CUDACC__
#define LC_HD __host__ __device__
#else
#define LC_HD
#endif

namespace laconic::rng {

LC_HD inline constexpr std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Combines several 64-bit words (seed, rank, step, a purpose tag...) into one stream key.
inline constexpr std::uint64_t key(std::initializer_list<std::uint64_t> words) {
  std::uint64_t h = 0x6a09e667f3bcc909ULL;
  for (auto w : words) h = mix(h ^ mix(w));
  return h;
}

LC_HD inline constexpr std::uint64_t bits(std::uint64_t key, std::uint64_t counter) {
  return mix(key ^ mix(counter + 0x632be59bd9b4e019ULL));
}

// Uniform in [0, 1) with 24 bits of resolution (exactly representable as float).
LC_HD inline float uniform(std::uint64_t key, std::uint64_t counter) {
  return static_cast<float>(bits(key, counter) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller on two independent uniforms derived from one counter.
LC_HD inline float normal(std::uint64_t key, std::uint64_t counter) {
  const std::uint64_t b = bits(key, counter);
  const double u1 = (static_cast<double>(b >> 40) + 1.0) * (1.0 / 16777217.0);  // (0, 1]
  const double u2 = static_cast<double>(b & 0xffffffULL) * (1.0 / 16777216.0);  // [0, 1)
  return static_cast<float>(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2));
}

// Uniform integer in [0, n) (n > 0), via 128-bit multiply (Lemire); bias below 2^-40 for n < 2^24.
LC_HD inline std::uint64_t below(std::uint64_t key, std::uint64_t counter, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits(key, counter)) * n) >> 64);
}

// Stream purposes, so that e.g. dropout and init never share a key.
enum Purpose : std::uint64_t { kInit = 1, kDropout = 2, kShuffle = 3, kData = 4, kTest = 5 };

}  // namespace laconic::rng
