// SPDX-License-Identifier: Apache-2.0
// Input checks shared by the op kernels (mutual_information_op.cc,
// rnnt_loss_op.cc, rnnt_joint_op.cc and tdt_loss_op.cc).  Each returns
// OkStatus, or an InvalidArgument that names the input, the offending entry and
// the rule it breaks.  The values are read on the host (the GPU kernels
// register these inputs as HostMemory).

#ifndef TF_TRANSDUCER_CC_KERNELS_INPUT_CHECKS_H_
#define TF_TRANSDUCER_CC_KERNELS_INPUT_CHECKS_H_

#include <cstdint>

#include "cc/kernels/rnnt_loss.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"

namespace tf_transducer {

// boundary: int64 [B, 4], rows (s_begin, t_begin, s_end, t_end) with
// 0 <= s_begin <= s_end <= S and 0 <= t_begin <= t_end <= T.
inline absl::Status CheckBoundary(const tensorflow::Tensor& boundary, int64_t B,
                                  int64_t S, int64_t T) {
  if (boundary.dims() != 2 || boundary.dim_size(0) != B ||
      boundary.dim_size(1) != 4) {
    return tensorflow::errors::InvalidArgument(
        "boundary must have shape [B, 4] = [", B, ", 4], got ",
        boundary.shape().DebugString());
  }
  const auto bnd = boundary.matrix<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s_begin = bnd(b, 0), t_begin = bnd(b, 1), s_end = bnd(b, 2),
                  t_end = bnd(b, 3);
    if (!(0 <= s_begin && s_begin <= s_end && s_end <= S && 0 <= t_begin &&
          t_begin <= t_end && t_end <= T)) {
      return tensorflow::errors::InvalidArgument(
          "boundary[", b, "] = [", s_begin, ", ", t_begin, ", ", s_end, ", ",
          t_end, "] must satisfy 0 <= s_begin <= s_end <= S = ", S,
          " and 0 <= t_begin <= t_end <= T = ", T);
    }
  }
  return absl::OkStatus();
}

// ranges: int64 [B, T, R], each row R consecutive symbol positions within
// [0, S] (pruned logits: row j of frame t is position ranges[b, t, j]).
inline absl::Status CheckRanges(const tensorflow::Tensor& ranges_in, int64_t B,
                                int64_t T, int64_t R, int64_t S) {
  if (ranges_in.shape() != tensorflow::TensorShape({B, T, R})) {
    return tensorflow::errors::InvalidArgument(
        "ranges must have shape [B, T, s_range] = [", B, ", ", T, ", ", R,
        "], got ", ranges_in.shape().DebugString());
  }
  const int64_t* ranges = ranges_in.flat<int64_t>().data();
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t* row = ranges + i * R;
    bool ok = row[0] >= 0 && row[0] <= S - (R - 1);  // no overflow
    for (int64_t j = 1; j < R; ++j) ok &= row[j] == row[0] + j;
    if (!ok) {
      return tensorflow::errors::InvalidArgument(
          "ranges[", i / T, ", ", i % T,
          "] must be consecutive symbol positions within [0, S = ", S,
          "], starting at ", row[0]);
    }
  }
  return absl::OkStatus();
}

// symbols: B * S int64 values (row-major [B, S]), each in [0, C).
inline absl::Status CheckSymbols(const int64_t* symbols, int64_t B, int64_t S,
                                 int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t y = symbols[b * S + s];
      if (y < 0 || y >= C) {
        return tensorflow::errors::InvalidArgument(
            "symbols must lie in [0, C) with C = ", C, ", got symbols[", b,
            ", ", s, "] = ", y);
      }
    }
  }
  return absl::OkStatus();
}

// delay_penalty: a scalar >= 0 of the maths' type, into *value.
template <typename Scalar>
absl::Status ReadDelayPenalty(const tensorflow::Tensor& penalty,
                              Scalar* value) {
  if (penalty.dims() != 0) {
    return tensorflow::errors::InvalidArgument(
        "delay_penalty must be a scalar, got shape ",
        penalty.shape().DebugString());
  }
  *value = penalty.scalar<Scalar>()();
  if (!(*value >= 0)) {
    return tensorflow::errors::InvalidArgument(
        "delay_penalty must be >= 0, got ", *value);
  }
  return absl::OkStatus();
}

// The termination symbol (blank) in [0, C); `source` names where C comes
// from.
inline absl::Status CheckTerminationSymbol(int blank, int64_t C,
                                           const char* source) {
  if (blank >= 0 && blank < C) return absl::OkStatus();
  return tensorflow::errors::InvalidArgument(
      "termination_symbol must lie in [0, C) with C = ", C, " (from ", source,
      "), got ", blank);
}

// The modified and constrained lattices take a frame per symbol: T >= S.
inline absl::Status CheckFramesForType(RnntType type, int64_t T, int64_t S) {
  if (type == RnntType::kRegular || T >= S) return absl::OkStatus();
  return tensorflow::errors::InvalidArgument(
      "modified and constrained RNN-T need T >= S, got T = ", T, ", S = ", S);
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_INPUT_CHECKS_H_
