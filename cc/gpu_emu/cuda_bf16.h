// SPDX-License-Identifier: Apache-2.0
// __nv_bfloat16 for the CPU emulator (cuda_runtime.h): bfloat16 storage and
// its round-to-nearest-even conversions (rounding.h).

#ifndef TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_
#define TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_

#include "cc/gpu_emu/rounding.h"

struct __nv_bfloat16 {
  unsigned short __x;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{tf_transducer::gpu_emu::RoundToBits(f, 8, 7)};
}

inline float __bfloat162float(__nv_bfloat16 h) {
  return tf_transducer::gpu_emu::ValueOfBits(h.__x, 8, 7);
}

#endif  // TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_
