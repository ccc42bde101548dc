// SPDX-License-Identifier: Apache-2.0
// Filling device memory with one value (a grid-stride loop), for the .cu
// files only.

#ifndef TF_TRANSDUCER_CC_KERNELS_GPU_FILL_H_
#define TF_TRANSDUCER_CC_KERNELS_GPU_FILL_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"

namespace tf_transducer {
namespace gpu {

template <typename T>
__global__ void Fill(T* x, int64_t n, T value) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    x[i] = value;
  }
}

// Enqueues x[0, n) = value on `stream` (nothing for n = 0).
template <typename T>
LaunchStatus LaunchFill(T* x, int64_t n, T value, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>(4096, (n + 255) / 256);
  if (blocks > 0) TT_LAUNCH(blocks, 256, 0, stream, Fill<T>)(x, n, value);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_GPU_FILL_H_
