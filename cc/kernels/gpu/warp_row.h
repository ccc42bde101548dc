// SPDX-License-Identifier: Apache-2.0
// A warp per row of logits, as the fused RNN-T loss's kernels
// (rnnt_loss.cu) and the joint loss's (rnnt_joint.cu) take them: each lane
// reads every 32nd class of the row, and the row's max and exp-sum are
// reduced by warp shuffles.  Included by the .cu files only.

#ifndef TF_TRANSDUCER_CC_KERNELS_GPU_WARP_ROW_H_
#define TF_TRANSDUCER_CC_KERNELS_GPU_WARP_ROW_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "cc/kernels/rnnt_loss.h"

namespace tf_transducer {
namespace gpu {

constexpr int kWarp = 32;
constexpr int kRowThreads = 256;  // 8 rows per block
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks of kRowThreads for a warp per row.
inline unsigned RowBlocks(int64_t rows) {
  return unsigned((rows * kWarp + kRowThreads - 1) / kRowThreads);
}

// The row x[0, C) reduced by the whole warp (every lane calls it, `lane`
// its index): returns log(sum(exp(x - m))) (rnnt_loss.h's LogSumOf: NaN
// when a logit is NaN) and sets *m to the row's max, both on every lane.
template <typename L>
__device__ inline WideOf<L> WarpLogSum(const L* x, int64_t C, int lane,
                                       WideOf<L>* m) {
  using T = WideOf<L>;
  bool nan;
  T max = LaneMax(x, C, lane, kWarp, &nan);
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const T other = __shfl_xor_sync(kFullMask, max, offset);
    max = other > max ? other : max;
  }
  nan = __any_sync(kFullMask, nan);
  T sum = LaneExpSum(x, C, lane, kWarp, max);
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(kFullMask, sum, offset);
  }
  *m = max;
  return LogSumOf(max, nan, sum);
}

}  // namespace gpu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_GPU_WARP_ROW_H_
