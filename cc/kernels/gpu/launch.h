// SPDX-License-Identifier: Apache-2.0
// TT_LAUNCH(grid, block, shared_bytes, stream, Kernel<T>)(args...) launches
// a kernel: Kernel<T><<<grid, block, shared_bytes, stream>>>(args...) under
// nvcc, and the same launch on the CPU emulator of cc/gpu_emu when the .cu
// files are compiled by g++ against it (-I cc/gpu_emu; cuda_runtime.h there
// defines TT_GPU_EMU_LAUNCH).  The kernel comes last so that template
// arguments may hold commas.

#ifndef TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCH_H_
#define TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCH_H_

#include <cuda_runtime.h>

#if defined(__CUDACC__)
#define TT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#elif defined(TT_GPU_EMU_LAUNCH)
#define TT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  TT_GPU_EMU_LAUNCH(grid, block, shared_bytes, stream, __VA_ARGS__)
#else
#error "cc/kernels/gpu/*.cu compile with nvcc, or with g++ -I cc/gpu_emu"
#endif

#endif  // TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCH_H_
