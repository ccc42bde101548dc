// SPDX-License-Identifier: Apache-2.0
// The fused RNN-T loss's row passes on the GPU (the recursion between them
// is mutual_information.cu's): a warp per row of logits, each lane taking
// every 32nd class, with rnnt_loss.h's functions for the maths.  Pass 1
// reduces a row to its max and exp-sum by warp shuffles (warp_row.h); pass
// 3 reads each
// logit once and writes each gradient element once (in place when the
// gradient took the logits' buffer).

#include <cuda_runtime.h>

#include <algorithm>
#include <limits>

#include "cc/kernels/gpu/fill.h"
#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"
#include "cc/kernels/gpu/warp_row.h"
#include "cc/kernels/rnnt_loss.h"

namespace tf_transducer {
namespace gpu {
namespace {

template <typename T, typename L>
__global__ void LogProbsKernel(RnntProblem<T, L> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (row >= p.B * p.T_len * p.R) return;  // a whole warp
  const int64_t b = row / (p.T_len * p.R), t = row / p.R % p.T_len;
  const int64_t s = p.PositionOf(row);
  if (!p.RowUsed(b, t, s)) {
    if (lane == 0) p.norms[row] = T(0);
    return;
  }
  T m;
  const T log_sum = WarpLogSum(p.logits + row * p.C, p.C, lane, &m);
  if (lane == 0) p.WriteRow(b, t, row, s, m, log_sum);
}

template <typename T, typename L>
__global__ void FinishPxKernel(RnntProblem<T, L> p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < p.B * p.S) p.FinishPxRow(i / p.S, i % p.S);
}

template <typename T, typename L>
__global__ void GradientKernel(RnntGradientProblem<T, L> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (row >= p.B * p.T_len * p.R) return;
  const int64_t b = row / (p.T_len * p.R), t = row / p.R % p.T_len;
  const int64_t s = p.ranges ? p.ranges[row] : row % p.R;
  const auto g =
      RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, p.S, p.T_len, p.T1,
                             p.constrained, p.emit, p.clamp, p.scale[b]);
  L* out = p.grad + row * p.C;
  if (g.gx + g.gy == T(0)) {  // no path uses the row: padding, pruned away
    for (int64_t c = lane; c < p.C; c += kWarp) out[c] = Narrow<L>(T(0));
    return;
  }
  const int64_t symbol = s < p.S ? p.symbols[b * p.S + s] : -1;
  const T norm = p.norms[row];
  const L* l = p.logits + row * p.C;
  for (int64_t c = lane; c < p.C; c += kWarp) {
    out[c] = Narrow<L>(
        g.ElementOfRow(Widen(l[c]), norm, c, symbol, p.blank, p.clamp));
  }
}

}  // namespace

template <typename T, typename L>
LaunchStatus RnntLogProbs(const RnntProblem<T, L>& p, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  // Steps that no row provides (outside the boundary, or pruned away) stay
  // -inf.
  LaunchStatus status = LaunchFill(p.px, p.B * p.S * p.T1, kNegInf, st);
  if (status == cudaSuccess) {
    status = LaunchFill(p.py, p.B * (p.S + 1) * p.T_len, kNegInf, st);
  }
  if (status != cudaSuccess) return status;
  TT_LAUNCH(RowBlocks(p.B * p.T_len * p.R), kRowThreads, 0, st,
            LogProbsKernel<T, L>)(p);
  // No px rows for S = 0 (every transcript empty): nothing to finish.
  if (p.B * p.S > 0) {
    TT_LAUNCH((p.B * p.S + 255) / 256, 256, 0, st, FinishPxKernel<T, L>)(p);
  }
  return cudaGetLastError();
}

template <typename T, typename L>
LaunchStatus RnntGradient(const RnntGradientProblem<T, L>& p, void* stream) {
  TT_LAUNCH(RowBlocks(p.B * p.T_len * p.R), kRowThreads, 0,
            static_cast<cudaStream_t>(stream), GradientKernel<T, L>)(p);
  return cudaGetLastError();
}

#define TF_TRANSDUCER_INSTANTIATE(T, L)                                      \
  template LaunchStatus RnntLogProbs<T, L>(const RnntProblem<T, L>&, void*); \
  template LaunchStatus RnntGradient<T, L>(const RnntGradientProblem<T, L>&, \
                                           void*)

TF_TRANSDUCER_GPU_LOSS_TYPES(TF_TRANSDUCER_INSTANTIATE);
#undef TF_TRANSDUCER_INSTANTIATE

}  // namespace gpu
}  // namespace tf_transducer
