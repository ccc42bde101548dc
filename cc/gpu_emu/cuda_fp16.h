// SPDX-License-Identifier: Apache-2.0
// __half for the CPU emulator (cuda_runtime.h): IEEE binary16 storage and
// its round-to-nearest-even conversions, written from the values (scaling
// by powers of two) rather than from bit tricks, so that they check the
// kernels' own conversions (cc/kernels/half_types.h) instead of repeating
// them.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_CUDA_FP16_H_
#define TF_TRANSDUCER_CC_GPU_EMU_CUDA_FP16_H_

#include <cmath>
#include <cstdint>

#include "cc/gpu_emu/rounding.h"

struct __half {
  unsigned short __x;
};

inline __half __float2half_rn(float f) {
  return __half{tf_transducer::gpu_emu::RoundToBits(f, 5, 10)};
}

inline float __half2float(__half h) {
  return tf_transducer::gpu_emu::ValueOfBits(h.__x, 5, 10);
}

#endif  // TF_TRANSDUCER_CC_GPU_EMU_CUDA_FP16_H_
