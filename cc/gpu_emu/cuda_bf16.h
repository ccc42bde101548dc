// SPDX-License-Identifier: Apache-2.0
// __nv_bfloat16 for the CPU emulator (cuda_runtime.h): small_floats.h has
// it.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_
#define TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_

#include "cc/gpu_emu/small_floats.h"

#endif  // TF_TRANSDUCER_CC_GPU_EMU_CUDA_BF16_H_
