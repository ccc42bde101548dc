// SPDX-License-Identifier: Apache-2.0
// CUDA's 16-bit floating-point types for the CPU emulator (cuda_fp16.h and
// cuda_bf16.h include this): __half (IEEE binary16) and __nv_bfloat16 as
// storage, with CUDA's round-to-nearest-even conversions.  The rounding is
// rounding.h's, computed from the values rather than from bit tricks, so
// that it checks the kernels' own conversions (cc/kernels/half_types.h)
// instead of repeating them.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_SMALL_FLOATS_H_
#define TF_TRANSDUCER_CC_GPU_EMU_SMALL_FLOATS_H_

#include "cc/gpu_emu/rounding.h"

struct __half {
  unsigned short __x;
};

struct __nv_bfloat16 {
  unsigned short __x;
};

namespace tf_transducer {
namespace gpu_emu {
// Exponent and mantissa bits of the two.
constexpr int kHalfBits[2] = {5, 10};
constexpr int kBFloat16Bits[2] = {8, 7};
}  // namespace gpu_emu
}  // namespace tf_transducer

inline __half __float2half_rn(float f) {
  namespace e = tf_transducer::gpu_emu;
  return __half{e::RoundToBits(f, e::kHalfBits[0], e::kHalfBits[1])};
}
inline float __half2float(__half h) {
  namespace e = tf_transducer::gpu_emu;
  return e::ValueOfBits(h.__x, e::kHalfBits[0], e::kHalfBits[1]);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  namespace e = tf_transducer::gpu_emu;
  return __nv_bfloat16{
      e::RoundToBits(f, e::kBFloat16Bits[0], e::kBFloat16Bits[1])};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  namespace e = tf_transducer::gpu_emu;
  return e::ValueOfBits(h.__x, e::kBFloat16Bits[0], e::kBFloat16Bits[1]);
}

#endif  // TF_TRANSDUCER_CC_GPU_EMU_SMALL_FLOATS_H_
