// SPDX-License-Identifier: Apache-2.0
// 16-bit floating-point logits (IEEE binary16 "half" and bfloat16) as the
// kernels read and write them: storage types with the same bits as
// TensorFlow's Eigen::half / Eigen::bfloat16 and CUDA's __half /
// __nv_bfloat16, converted to and from float by bit manipulation, so that
// the same code runs on the host and the device with no library's half type.
//
//   Widen(x):     the exact float (or double) value of x.
//   Narrow<L>(f): f rounded to the nearest L, ties to even; NaN stays NaN,
//                 beyond L's range gives +-inf.

#ifndef TF_TRANSDUCER_CC_KERNELS_HALF_TYPES_H_
#define TF_TRANSDUCER_CC_KERNELS_HALF_TYPES_H_

#include <cstdint>

#include "cc/kernels/device.h"

namespace tf_transducer {

struct Half {
  uint16_t bits;
};

struct BFloat16 {
  uint16_t bits;
};

TT_HOST_DEVICE inline float Widen(float x) { return x; }
TT_HOST_DEVICE inline double Widen(double x) { return x; }

TT_HOST_DEVICE inline float Widen(BFloat16 x) {
  return BitCast<float>(static_cast<uint32_t>(x.bits) << 16);
}

TT_HOST_DEVICE inline float Widen(Half x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x8000u) << 16;
  const uint32_t exponent = (x.bits >> 10) & 0x1fu;
  const uint32_t mantissa = x.bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf and NaN
    return BitCast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero and subnormals: mantissa * 2^-24, exact
    const float magnitude =
        static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return BitCast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// The float type the maths of logits of type L runs in.
template <typename L>
using WideOf = decltype(Widen(L{}));

template <typename L>
TT_HOST_DEVICE inline L Narrow(WideOf<L> x);

template <>
TT_HOST_DEVICE inline float Narrow<float>(float x) {
  return x;
}

template <>
TT_HOST_DEVICE inline double Narrow<double>(double x) {
  return x;
}

template <>
TT_HOST_DEVICE inline BFloat16 Narrow<BFloat16>(float x) {
  uint32_t u = BitCast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet
    return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

template <>
TT_HOST_DEVICE inline Half Narrow<Half>(float x) {
  uint32_t u = BitCast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t out;
  if (u >= 0x47800000u) {  // |x| >= 2^16 (or inf, NaN): inf or NaN
    out = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {
    // Below 2^-14, half's smallest normal: adding 0.5 puts x's rounded
    // multiple of 2^-24 (ties to even, by the float addition) in the low
    // mantissa bits.
    const float shifted = BitCast<float>(u) + 0.5f;
    out = BitCast<uint32_t>(shifted) - 0x3f000000u;
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd;  // rebias the exponent by 15 - 127, and round
    out = u >> 13;
  }
  return Half{static_cast<uint16_t>(out | (sign >> 16))};
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_HALF_TYPES_H_
