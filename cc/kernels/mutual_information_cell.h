// SPDX-License-Identifier: Apache-2.0
// The mutual-information (MI) recursion behind the k2 / fast_rnnt RNN-T
// losses: the maths of one cell, shared by the CPU kernel
// (mutual_information.h) and the CUDA kernel (gpu/mutual_information.cu).
//
// Inputs, for one sequence b (b is dropped below):
//   px: [S, T1], T1 = T + 1 ("regular") or T1 = T ("modified")
//   py: [S + 1, T]
//   a rectangle (s_begin, t_begin, s_end, t_end) with
//   0 <= s_begin <= s_end <= S and 0 <= t_begin <= t_end <= T.
//
// With r = 1 for regular and r = 0 for modified, an x-step leaves (s, t) for
// (s + 1, t + 1 - r) with weight px[s, t], and a y-step leaves (s, t) for
// (s, t + 1) with weight py[s, t].  Forward log-scores over the rectangle:
//
//   alpha[s_begin, t_begin] = 0
//   alpha[s, t] = log_add(x_in, y_in),
//     x_in = alpha[s - 1, t - 1 + r] + px[s - 1, t - 1 + r]
//     y_in = alpha[s, t - 1]         + py[s, t - 1]
//
// where a term whose source lies outside the rectangle is -inf.  The score is
// alpha[s_end, t_end], the log-sum over all monotonic paths.
//
// The gradient of the score is the occupation probability of each step.  A
// path through (s, t) arrived by its x-step with probability
// wx[s, t] = exp(x_in - alpha[s, t]) and by its y-step with
// wy[s, t] = exp(y_in - alpha[s, t]).  With g[s, t] the probability that a
// path passes through (s, t):
//
//   g[s_end, t_end] = 1                  (0 when no path exists)
//   px_grad[s, t]   = g[s + 1, t + 1 - r] * wx[s + 1, t + 1 - r]
//   py_grad[s, t]   = g[s, t + 1]         * wy[s, t + 1]
//   g[s, t]         = px_grad[s, t] + py_grad[s, t]
//
// for every step that stays inside the rectangle; every other entry is 0.
// The forward pass gets wx and wy almost for free: with hi = max(x_in, y_in)
// and e = exp(min(x_in, y_in) - hi), alpha = hi + log1p(e), and the weights
// are 1 / (1 + e) for the larger term and e / (1 + e) for the smaller, both
// to full relative precision.  The kernel stores e with the sign of "x_in >=
// y_in" (+e: x is the larger, -e: y is; the sign of zero counts), one number
// per cell, and the backward pass decodes the weights from it: it needs no
// exp or log and never reads px or py.  A cell that no path reaches gets
// e = +0; its own g is 0 and every reached successor gives it weight 0, so
// no NaN can arise.
//
#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CELL_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CELL_H_

#include <cstdint>
#include <limits>

#include "cc/kernels/device.h"
#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

// One batch of MI problems, in the layout the kernels use.  Pointers are
// to row-major buffers; `alpha` and `e` are scratch of buffer_size()
// elements.
template <typename T>
struct MutualInformationProblem {
  int64_t batch;  // B
  int64_t S;
  int64_t T_len;            // T
  int64_t T1;               // T + 1 (regular) or T (modified)
  const T* px;              // [B, S, T1]
  const T* py;              // [B, S + 1, T]
  const int64_t* boundary;  // [B, 4]: s_begin, t_begin, s_end, t_end
  T* scores;                // [B]
  T* px_grad;               // [B, S, T1]
  T* py_grad;               // [B, S + 1, T]
  T* alpha;                 // [B, K, row_stride()]: alpha, then g
  T* e;                     // [B, K, row_stride()]: signed e

  TT_HOST_DEVICE int64_t r() const { return T1 == T_len + 1 ? 1 : 0; }
  TT_HOST_DEVICE int64_t width() const { return S + 1; }
  TT_HOST_DEVICE int64_t num_diagonals() const { return T_len + r() * S + 1; }
  // Rows padded to whole cache lines: threads that work on neighbouring
  // ranges of s then never write to the same line (when the ranges start at
  // multiples of kCellsPerLine).
  static constexpr int64_t kCellsPerLine = 64 / sizeof(T);
  TT_HOST_DEVICE int64_t row_stride() const {
    return (width() + kCellsPerLine - 1) / kCellsPerLine * kCellsPerLine;
  }
  TT_HOST_DEVICE int64_t buffer_size() const {
    return batch * num_diagonals() * row_stride();
  }
};

// A tile of the grid: s in [s0, s1), t in [t0, t1).
struct MutualInformationTile {
  int64_t s0, s1, t0, t1;
};

namespace mi_internal {

struct Rect {
  int64_t s_begin, t_begin, s_end, t_end;
};

template <typename T>
TT_HOST_DEVICE inline Rect RectOf(const MutualInformationProblem<T>& p,
                                  int64_t b) {
  const int64_t* row = p.boundary + 4 * b;
  return {row[0], row[1], row[2], row[3]};
}

// The cells s in [lo, hi] of diagonal k that lie in the rectangle and in the
// tile; lo > hi when there are none.
TT_HOST_DEVICE inline void DiagonalRange(const Rect& rc,
                                         const MutualInformationTile& tile,
                                         int64_t r, int64_t k, int64_t* lo,
                                         int64_t* hi) {
  const int64_t t_lo = Max(rc.t_begin, tile.t0);
  const int64_t t_hi = Min(rc.t_end, tile.t1 - 1);
  *lo = Max(rc.s_begin, tile.s0);
  *hi = Min(rc.s_end, tile.s1 - 1);
  if (r == 1) {  // t = k - s
    *lo = Max(*lo, k - t_hi);
    *hi = Min(*hi, k - t_lo);
  } else if (k < t_lo || k > t_hi) {  // t = k
    *hi = *lo - 1;
  }
}

// One cell of the forward recursion: on entry x_in and y_in (the two
// incoming terms), on exit alpha and the signed e of the cell (see the top of
// this file).  Branch-free, so a loop of it vectorises.
template <typename T>
TT_HOST_DEVICE inline void CombineCell(T x_in, T y_in, T* alpha, T* e) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  constexpr T kInf = std::numeric_limits<T>::infinity();
  // A term is NaN only as +inf + -inf: a score that overflowed, plus a
  // step that does not exist; it counts as no step.
  x_in = x_in == x_in ? x_in : kNegInf;
  y_in = y_in == y_in ? y_in : kNegInf;
  const bool x_larger = x_in >= y_in;
  const T larger = x_larger ? x_in : y_in;
  const T smaller = x_larger ? y_in : x_in;
  // Unreached (larger = -inf): ratio 0; overflowed (larger = +inf): alpha
  // stays +inf.  Every operation runs for every lane (no -inf - -inf or
  // inf - inf).
  const T shift = larger > kNegInf && larger < kInf ? larger : T(0);
  const T diff = smaller - shift;
  const T ratio = log_space_math::ExpNonPositive(diff < T(0) ? diff : T(0));
  *alpha = larger + log_space_math::Log1pUnit(ratio);
  *e = x_larger ? ratio : -ratio;
}

// The weights of a cell from its signed e: wx = P(x-step in), wy = P(y-step
// in).
template <typename T>
TT_HOST_DEVICE inline void DecodeCell(T e, T* wx, T* wy) {
  const T ratio = Abs(e);
  const T inv = T(1) / (T(1) + ratio);
  const bool x_larger = !SignBit(e);
  *wx = x_larger ? inv : ratio * inv;
  *wy = x_larger ? ratio * inv : inv;
}

// True for NaN and +inf, the values px and py may not hold.
template <typename T>
TT_HOST_DEVICE inline bool IsIllegal(T x) {
  return !(x < std::numeric_limits<T>::infinity());
}

// The first diagonal of sequence b's rectangle and its last.
template <typename T>
TT_HOST_DEVICE inline void DiagonalSpan(const MutualInformationProblem<T>& p,
                                        int64_t b, int64_t* k_begin,
                                        int64_t* k_end) {
  const Rect rc = RectOf(p, b);
  *k_begin = rc.t_begin + p.r() * rc.s_begin;
  *k_end = rc.t_end + p.r() * rc.s_end;
}

// The forward recursion at cell s of diagonal k of sequence b: reads
// diagonal k - 1 of alpha only, so all cells of a diagonal may run at once
// (the GPU kernel runs a diagonal per step, a thread per cell).
template <typename T>
TT_HOST_DEVICE inline void ForwardCell(const MutualInformationProblem<T>& p,
                                       int64_t b, int64_t k, int64_t s) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t r = p.r(), W = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const Rect rc = RectOf(p, b);
  const int64_t offset = b * p.num_diagonals() * W;
  T* a_cur = p.alpha + offset + k * W;
  T* e_cur = p.e + offset + k * W;
  if (k == rc.t_begin + r * rc.s_begin) {
    // The start; for modified px also the rest of its column, which no path
    // reaches (every x-step takes a frame).
    a_cur[s] = s == rc.s_begin ? T(0) : kNegInf;
    e_cur[s] = T(0);
    return;
  }
  const T* a_prev = a_cur - W;
  const int64_t t = k - r * s;
  const int64_t tx = t - 1 + r;  // column of the x-step into (s, t)
  const T x_in = (s > rc.s_begin && tx >= rc.t_begin)
                     ? a_prev[s - 1] + p.px[(b * p.S + s - 1) * T1 + tx]
                     : kNegInf;
  const T y_in = t > rc.t_begin
                     ? a_prev[s] + p.py[(b * p.width() + s) * Tl + t - 1]
                     : kNegInf;
  CombineCell(x_in, y_in, a_cur + s, e_cur + s);
}

// The backward pass at cell s of diagonal k of sequence b: its occupation g
// (overwriting alpha) from diagonal k + 1 only, and the gradients of the
// steps that leave it inside the rectangle (px_grad and py_grad must be zero
// beforehand: nothing else is written).
template <typename T>
TT_HOST_DEVICE inline void BackwardCell(const MutualInformationProblem<T>& p,
                                        int64_t b, int64_t k, int64_t s) {
  const int64_t r = p.r(), W = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const Rect rc = RectOf(p, b);
  const int64_t offset = b * p.num_diagonals() * W;
  T* g_cur = p.alpha + offset + k * W;
  if (k == rc.t_end + r * rc.s_end) {
    // The end cell still holds alpha, the score; for modified px the rest of
    // the last column has no step left inside the rectangle.
    g_cur[s] = s == rc.s_end && IsFinite(g_cur[s]) ? T(1) : T(0);
    return;
  }
  const T* g_next = g_cur + W;
  const T* e_next = p.e + offset + (k + 1) * W;
  const int64_t t = k - r * s;
  T gx = T(0), gy = T(0), wx, wy;
  if (s < rc.s_end && t + 1 - r <= rc.t_end) {
    DecodeCell(e_next[s + 1], &wx, &wy);
    gx = g_next[s + 1] * wx;
    p.px_grad[(b * p.S + s) * T1 + t] = gx;
  }
  if (t < rc.t_end) {
    DecodeCell(e_next[s], &wx, &wy);
    gy = g_next[s] * wy;
    p.py_grad[(b * p.width() + s) * Tl + t] = gy;
  }
  g_cur[s] = gx + gy;
}

}  // namespace mi_internal

// The score of sequence b, read after its forward pass (before the backward
// pass overwrites alpha).
template <typename T>
TT_HOST_DEVICE inline T MutualInformationScore(
    const MutualInformationProblem<T>& p, int64_t b) {
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_end = rc.t_end + p.r() * rc.s_end;
  return p.alpha[(b * p.num_diagonals() + k_end) * p.row_stride() + rc.s_end];
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CELL_H_
