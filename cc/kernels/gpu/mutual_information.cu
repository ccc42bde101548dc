// SPDX-License-Identifier: Apache-2.0
// The MI recursion on the GPU (k2's scheme): one thread block per sequence
// walks the diagonals k = t + r * s of its rectangle, a thread per cell,
// with a barrier between diagonals; forward, then backward.  The cell maths
// is mutual_information_cell.h's ForwardCell / BackwardCell, the same
// functions the CPU tiles compute.

#include <cuda_runtime.h>

#include <algorithm>

#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"
#include "cc/kernels/mutual_information_cell.h"

namespace tf_transducer {
namespace gpu {
namespace {

constexpr int kCheckThreads = 256;
constexpr int kMaxRecursionThreads = 512;

// illegal[b] = 1 when sequence b's px or py holds a NaN or +inf.  Grid:
// (B, blocks per sequence).
template <typename T>
__global__ void FindIllegalValues(const T* px, const T* py, int64_t nx,
                                  int64_t ny, char* illegal) {
  const int64_t b = blockIdx.x;
  bool bad = false;
  const int64_t step = int64_t(gridDim.y) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; i < nx + ny;
       i += step) {
    bad |=
        mi_internal::IsIllegal(i < nx ? px[b * nx + i] : py[b * ny + i - nx]);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) illegal[b] = 1;
}

template <typename T>
__global__ void MutualInformationKernel(MutualInformationProblem<T> p,
                                        const char* illegal) {
  const int64_t b = blockIdx.x;
  if (illegal[b]) return;  // the whole block returns
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const MutualInformationTile whole{0, p.width(), 0, p.T_len + 1};
  const int64_t r = p.r();
  int64_t k_begin, k_end, lo, hi;
  mi_internal::DiagonalSpan(p, b, &k_begin, &k_end);
  for (int64_t k = k_begin; k <= k_end; ++k) {
    mi_internal::DiagonalRange(rc, whole, r, k, &lo, &hi);
    for (int64_t s = lo + threadIdx.x; s <= hi; s += blockDim.x) {
      mi_internal::ForwardCell(p, b, k, s);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) p.scores[b] = MutualInformationScore(p, b);
  __syncthreads();
  for (int64_t k = k_end; k >= k_begin; --k) {
    mi_internal::DiagonalRange(rc, whole, r, k, &lo, &hi);
    for (int64_t s = lo + threadIdx.x; s <= hi; s += blockDim.x) {
      mi_internal::BackwardCell(p, b, k, s);
    }
    __syncthreads();
  }
}

}  // namespace

template <typename T>
LaunchStatus MutualInformation(const MutualInformationProblem<T>& p,
                               char* illegal, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t nx = p.S * p.T1, ny = p.width() * p.T_len;
  cudaError_t status = cudaMemsetAsync(illegal, 0, p.batch, st);
  if (status == cudaSuccess && nx > 0) {  // S = 0: no px
    status = cudaMemsetAsync(p.px_grad, 0, p.batch * nx * sizeof(T), st);
  }
  if (status == cudaSuccess) {
    status = cudaMemsetAsync(p.py_grad, 0, p.batch * ny * sizeof(T), st);
  }
  if (status != cudaSuccess) return status;
  const int64_t check_blocks = std::min<int64_t>(
      65535, (nx + ny + kCheckThreads * 8 - 1) / (kCheckThreads * 8));
  TT_LAUNCH(dim3(p.batch, check_blocks), kCheckThreads, 0, st,
            FindIllegalValues<T>)(p.px, p.py, nx, ny, illegal);
  // Enough threads for the longest diagonal (S + 1 cells), in whole warps.
  const int threads = static_cast<int>(
      std::min<int64_t>(kMaxRecursionThreads, (p.width() + 31) / 32 * 32));
  TT_LAUNCH(p.batch, threads, 0, st, MutualInformationKernel<T>)(p, illegal);
  return cudaGetLastError();
}

template LaunchStatus MutualInformation<float>(
    const MutualInformationProblem<float>&, char*, void*);
template LaunchStatus MutualInformation<double>(
    const MutualInformationProblem<double>&, char*, void*);

}  // namespace gpu
}  // namespace tf_transducer
