// Fresh inputs and output fingerprints for timed calls (docs/measurement.md).
//
// Every timed call gets inputs no earlier call had: each element is taken from one of two
// verified seeds' inputs, chosen by a key the runner draws for that call (mix_takes_a). Right
// after the call, outside the clock, its outputs are fingerprinted (output_digest): a hash of
// their bytes and how many elements still hold the poison pattern written before the call.
//
// Header-only and dependency-free: the worker (built for riscv64 too), device kernels and the
// runner compute the same numbers. A device implementation must match these bit for bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace mblast {

inline constexpr uint64_t kGolden64 = 0x9E3779B97F4A7C15ull;

// SplitMix64's finaliser: a bijection of 64-bit words with good avalanche.
inline constexpr uint64_t splitmix64(uint64_t x) {
  x += kGolden64;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Whether element E of a call keyed KEY comes from seed A (else from seed B). One SplitMix64
// word per 64 elements, so a device thread handling 64 elements computes it once.
inline constexpr bool mix_takes_a(uint64_t key, uint64_t e) {
  return ((splitmix64(key ^ ((e >> 6) * kGolden64)) >> (e & 63)) & 1u) != 0;
}

// dst = the elementwise mix of a and b (all three the same size, a multiple of elem_bytes).
// Branch-free for 4-byte elements (the common case): the seeds' choice is random, so a branch
// per element would be mispredicted half the time.
inline void mix_host(std::span<std::byte> dst, std::span<const std::byte> a, std::span<const std::byte> b,
                     size_t elem_bytes, uint64_t key) {
  const size_t n = elem_bytes ? dst.size() / elem_bytes : 0;
  for (size_t block = 0; block * 64 < n; ++block) {
    const uint64_t bits = splitmix64(key ^ (block * kGolden64));
    const size_t begin = block * 64, count = std::min<size_t>(64, n - begin);
    if (elem_bytes == 4) {
      uint32_t va[64], vb[64], out[64];
      std::memcpy(va, a.data() + 4 * begin, 4 * count);
      std::memcpy(vb, b.data() + 4 * begin, 4 * count);
      for (size_t j = 0; j < count; ++j) {
        const uint32_t m = 0u - static_cast<uint32_t>((bits >> j) & 1u);
        out[j] = (va[j] & m) | (vb[j] & ~m);
      }
      std::memcpy(dst.data() + 4 * begin, out, 4 * count);
      continue;
    }
    for (size_t j = 0; j < count; ++j) {
      const size_t at = (begin + j) * elem_bytes;
      std::memcpy(dst.data() + at, (((bits >> j) & 1u) ? a : b).data() + at, elem_bytes);
    }
  }
}

// One term of the fingerprint: word W at index I (a cheap, position-dependent bijection of W).
inline constexpr uint64_t digest_term(uint32_t w, uint64_t i) {
  uint64_t x = (static_cast<uint64_t>(w) ^ (i * kGolden64)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 31);
}

struct OutputDigest {
  uint64_t hash = 0;      // sum over the 32-bit words w_i of digest_term(w_i, i), mod 2^64
  uint64_t poisoned = 0;  // elements whose every byte is still the poison byte
  bool operator==(const OutputDigest&) const = default;
};

// The sum makes the hash independent of the order in which parallel threads add their parts;
// the index inside each term makes it depend on where every word is. A trailing partial word
// counts as zero-padded.
inline OutputDigest output_digest(std::span<const std::byte> bytes, size_t elem_bytes, std::byte poison) {
  OutputDigest d;
  const size_t full = bytes.size() / 4;
  for (size_t i = 0; i < full; ++i) {
    uint32_t w;
    std::memcpy(&w, bytes.data() + 4 * i, 4);
    d.hash += digest_term(w, i);
  }
  if (bytes.size() % 4) {
    uint32_t w = 0;
    std::memcpy(&w, bytes.data() + 4 * full, bytes.size() % 4);
    d.hash += digest_term(w, full);
  }
  if (elem_bytes == 0) return d;
  const size_t n = bytes.size() / elem_bytes;
  if (elem_bytes == 4) {
    const uint32_t p = 0x01010101u * static_cast<uint32_t>(poison);
    for (size_t e = 0; e < n; ++e) {
      uint32_t w;
      std::memcpy(&w, bytes.data() + 4 * e, 4);
      d.poisoned += w == p;
    }
    return d;
  }
  for (size_t e = 0; e < n; ++e) {
    size_t k = 0;
    while (k < elem_bytes && bytes[e * elem_bytes + k] == poison) ++k;
    if (k == elem_bytes) ++d.poisoned;
  }
  return d;
}

}  // namespace mblast
