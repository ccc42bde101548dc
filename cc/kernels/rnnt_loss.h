// SPDX-License-Identifier: Apache-2.0
// The fused RNN-T loss (rnnt_loss_op.cc has the formulas): the maths of one
// row of logits, shared by the CPU kernels and the CUDA kernels
// (gpu/rnnt_loss.cu).  A "row" is logits[b, t, j, :]: symbol position
// s = j, or s = ranges[b, t, j] for pruned logits.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_LOSS_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_LOSS_H_

#include <cstdint>
#include <limits>

#include "cc/kernels/device.h"
#include "cc/kernels/half_types.h"
#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

enum class RnntType { kRegular, kModified, kConstrained };

// One batch of the loss's first pass and its px / py, as the kernels see it:
// logits of type L (half_types.h), the maths in T.
template <typename T, typename L = T>
struct RnntProblem {
  int64_t B, T_len, S, C, R, T1;
  const L* logits;          // [B, T, R, C]
  const int64_t* symbols;   // [B, S]
  const int64_t* ranges;    // [B, T, R], or null: row j is position j
  const int64_t* boundary;  // [B, 4]
  T* px;                    // [B, S, T1], -inf where no row provides a step
  T* py;                    // [B, S + 1, T]
  T* norms;                 // [B, T, R]
  int blank;
  RnntType type;
  T delay_penalty;

  // The symbol position of a row.
  TT_HOST_DEVICE int64_t PositionOf(int64_t row) const {
    return ranges ? ranges[row] : row % R;
  }

  // Whether row (b, t, s) of the logits takes part in sequence b's lattice.
  TT_HOST_DEVICE bool RowUsed(int64_t b, int64_t t, int64_t s) const {
    const int64_t* bnd = boundary + 4 * b;
    return s >= bnd[0] && s <= bnd[2] && t >= bnd[1] && t < bnd[3];
  }

  // Pass 1 for one used row, from the row's largest logit m and
  // log_sum = log(sum(exp(l - m))) (NaN when a logit is NaN): its
  // normaliser n = m + log_sum, px = l[y_s] - n and py = l[blank] - n.
  TT_HOST_DEVICE void WriteRow(int64_t b, int64_t t, int64_t row, int64_t s,
                               T m, T log_sum) const {
    WriteRowOf(logits + row * C, b, t, row, s, m, log_sum);
  }

  // WriteRow for the row's logits l held elsewhere (the joint loss computes
  // them into a tile: rnnt_joint.h).
  template <typename P>
  TT_HOST_DEVICE void WriteRowOf(const P* l, int64_t b, int64_t t, int64_t row,
                                 int64_t s, T m, T log_sum) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    norms[row] = m + log_sum;  // -inf for a row of -inf logits
    const bool empty = m == kNegInf && log_sum == T(0);
    py[(b * (S + 1) + s) * T_len + t] =
        empty ? kNegInf : (T(Widen(l[blank])) - m) - log_sum;
    if (s < S) {
      px[(b * S + s) * T1 + t] =
          empty ? kNegInf : (T(Widen(l[symbols[b * S + s]])) - m) - log_sum;
    }
  }

  // After pass 1, for px[b, s, :]: the -inf column of regular px (and -inf
  // at t_end: no symbol after the last frame), the constrained blank of the
  // next row, and the delay penalty ((t_end - 1) / 2 - t) * delay_penalty.
  TT_HOST_DEVICE void FinishPxRow(int64_t b, int64_t s) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t t_end = boundary[4 * b + 3];
    T* row = px + (b * S + s) * T1;
    if (type == RnntType::kRegular) {
      row[T_len] = kNegInf;
      row[t_end] = kNegInf;
    } else if (type == RnntType::kConstrained) {
      const T* py_next = py + (b * (S + 1) + s + 1) * T_len;
      for (int64_t t = 0; t < T_len; ++t) row[t] += py_next[t];
    }
    if (delay_penalty > 0) {
      const T offset = T(t_end - 1) / 2;
      for (int64_t t = 0; t < T1; ++t)
        row[t] += (offset - T(t)) * delay_penalty;
    }
  }
};

// The gradient op's inputs (pass 3), as the kernels see them: logits and
// their gradient of type L, the maths in T.
template <typename T, typename L = T>
struct RnntGradientProblem {
  int64_t B, T_len, S, C, R, T1;
  const L* logits;         // [B, T, R, C]
  const int64_t* symbols;  // [B, S]
  const int64_t* ranges;   // [B, T, R], or null for full logits
  const T* px_grad;        // [B, S, T1]
  const T* py_grad;        // [B, S + 1, T]
  const T* norms;          // [B, T, R]
  const T* scale;          // [B]
  L* grad;                 // [B, T, R, C]; may be `logits` itself
  int blank;
  bool constrained;
  T emit;   // 1 + fastemit_lambda
  T clamp;  // <= 0: no clamp
};

// logsumexp of a row split over `lanes` workers, lane i taking elements i,
// i + lanes, ... (a warp's 32 lanes on the GPU, one lane on the CPU): each
// lane's LaneMax, reduced by max; then each lane's LaneExpSum at that max,
// reduced by sum; then LogSumOf.  Same results as the CPU's vectorised
// LogSumExpParts up to the order of the sum.  A NaN is skipped by the max,
// then makes the sum NaN (a row of NaN and -inf too, through `nan`).
// Logits of type L are read as WideOf<L>.
template <typename L>
TT_HOST_DEVICE inline WideOf<L> LaneMax(const L* x, int64_t n, int lane,
                                        int lanes, bool* nan) {
  using T = WideOf<L>;
  T m = -std::numeric_limits<T>::infinity();
  bool bad = false;
  for (int64_t c = lane; c < n; c += lanes) {
    const T v = Widen(x[c]);
    m = v > m ? v : m;
    bad |= v != v;
  }
  *nan = bad;
  return m;
}

template <typename L>
TT_HOST_DEVICE inline WideOf<L> LaneExpSum(const L* x, int64_t n, int lane,
                                           int lanes, WideOf<L> m) {
  using T = WideOf<L>;
  T sum = T(0);
  for (int64_t c = lane; c < n; c += lanes) {
    sum += log_space_math::ExpNonPositive(T(Widen(x[c])) - m);
  }
  return sum;
}

// log(sum(exp(x - m))) from the row's max, NaN flag and LaneExpSum total.
template <typename T>
TT_HOST_DEVICE inline T LogSumOf(T m, bool nan, T sum) {
  if (m == -std::numeric_limits<T>::infinity()) {
    return nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
  }
  return Log(sum);
}

// Pass 3 (the gradient op) for one row: the occupations of its symbol step
// gx and blank step gy, times the incoming gradient d unless the row is
// clamped (then d scales after the clamp).
template <typename T>
struct RnntGradientRow {
  T gx, gy, scale_after;

  // FastEmit: every symbol step counts (1 + fastemit_lambda) times.
  TT_HOST_DEVICE static RnntGradientRow Of(const T* px_grad, const T* py_grad,
                                           int64_t b, int64_t t, int64_t s,
                                           int64_t S, int64_t T_len, int64_t T1,
                                           bool constrained, T emit, T clamp,
                                           T d) {
    RnntGradientRow g;
    g.gx = s < S ? emit * px_grad[(b * S + s) * T1 + t] : T(0);
    g.gy = py_grad[(b * (S + 1) + s) * T_len + t];
    if (constrained && s > 0) g.gy += emit * px_grad[(b * S + s - 1) * T1 + t];
    const T scale_now = clamp > 0 ? T(1) : d;
    g.gx *= scale_now;
    g.gy *= scale_now;
    g.scale_after = clamp > 0 ? d : T(1);
    return g;
  }

  // A gradient element clamped to [-clamp, clamp], then scaled.
  TT_HOST_DEVICE T Clamped(T g, T clamp) const {
    return scale_after * Min(clamp, Max(-clamp, g));
  }

  // The gradient of logit c of the row, from the row's softmax term
  // -(gx + gy) exp(l - n); symbol is y_s, or -1 for s = S.
  TT_HOST_DEVICE T Element(T softmax_term, int64_t c, int64_t symbol, int blank,
                           T clamp) const {
    T g = softmax_term;
    if (c == symbol) g += gx;
    if (c == blank) g += gy;
    return clamp > 0 ? Clamped(g, clamp) : g;
  }

  // Element c of a row whose normaliser is `norm`; zero for a row that no
  // path uses (gx + gy = 0).
  TT_HOST_DEVICE T ElementOfRow(T logit, T norm, int64_t c, int64_t symbol,
                                int blank, T clamp) const {
    const T g = gx + gy;
    if (g == T(0)) return T(0);
    return Element(-g * log_space_math::ExpNonPositive(logit - norm), c, symbol,
                   blank, clamp);
  }
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_LOSS_H_
