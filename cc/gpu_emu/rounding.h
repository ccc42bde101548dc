// SPDX-License-Identifier: Apache-2.0
// Small binary floating-point formats for the CPU emulator: a float rounded
// to the nearest value with `exponent_bits` and `mantissa_bits` (ties to
// even; beyond the largest finite value, infinity; NaN stays a quiet NaN),
// as the bits of that format, and back.  Computed on the values in double
// (std::ldexp, std::nearbyint in the default rounding mode), not on float
// bits.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_ROUNDING_H_
#define TF_TRANSDUCER_CC_GPU_EMU_ROUNDING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tf_transducer {
namespace gpu_emu {

inline uint16_t RoundToBits(float f, int exponent_bits, int mantissa_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const uint16_t sign =
      std::signbit(f) ? uint16_t(1u << (exponent_bits + mantissa_bits)) : 0;
  const uint16_t inf = uint16_t(((1u << exponent_bits) - 1) << mantissa_bits);
  if (std::isnan(f)) return uint16_t(sign | inf | (1u << (mantissa_bits - 1)));
  const double x = std::fabs(double(f));
  const int min_exponent = 1 - bias;  // of the smallest normal
  // The spacing of the format's values around x.
  const int e = x == 0 ? min_exponent : std::max(std::ilogb(x), min_exponent);
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  const double rounded = std::nearbyint(x / quantum) * quantum;
  const double largest =
      std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), bias);
  if (rounded > largest) return uint16_t(sign | inf);
  if (rounded < std::ldexp(1.0, min_exponent)) {  // subnormal or zero
    return uint16_t(
        sign |
        uint16_t(rounded / std::ldexp(1.0, min_exponent - mantissa_bits)));
  }
  const int re = std::ilogb(rounded);
  const uint16_t mantissa = uint16_t(std::ldexp(rounded, mantissa_bits - re) -
                                     std::ldexp(1.0, mantissa_bits));
  return uint16_t(sign | uint16_t((re + bias) << mantissa_bits) | mantissa);
}

inline float ValueOfBits(uint16_t bits, int exponent_bits, int mantissa_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const bool negative = bits >> (exponent_bits + mantissa_bits) & 1u;
  const int e = bits >> mantissa_bits & ((1u << exponent_bits) - 1);
  const int m = bits & ((1u << mantissa_bits) - 1);
  double value;
  if (e == (1 << exponent_bits) - 1) {
    value = m ? NAN : INFINITY;
  } else if (e == 0) {
    value = std::ldexp(double(m), 1 - bias - mantissa_bits);
  } else {
    value =
        std::ldexp(double(m + (1 << mantissa_bits)), e - bias - mantissa_bits);
  }
  return float(negative ? -value : value);
}

// x with the low 13 bits of its float mantissa dropped: what a tensor core
// reads of a float that is not already TF32.
inline float TruncateToTf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  u &= 0xffffe000u;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

// x rounded to TF32 (10 mantissa bits), to nearest, ties away from zero, as
// CUDA's wmma::__float_to_tf32 (cvt.rna.tf32.f32).
inline float RoundToTf32(float x) {
  if (!std::isfinite(x)) return x;
  const double a = std::fabs(double(x));
  if (a == 0) return x;
  const double quantum = std::ldexp(1.0, std::max(std::ilogb(a), -126) - 10);
  const double r = std::floor(a / quantum + 0.5) * quantum;
  return float(std::signbit(x) ? -r : r);
}

}  // namespace gpu_emu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_GPU_EMU_ROUNDING_H_
