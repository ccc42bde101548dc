// The mutual-information (MI) recursion behind the k2 / fast_rnnt RNN-T
// losses, on the CPU.
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
// Both recursions depend only on the previous (forward) or next (backward)
// "diagonal" k = t + r * s: an x-step and a y-step both raise k by one.  The
// kernel stores alpha (later g) and e diagonal-major, as [K, S + 1] with
// K = T + r * S + 1 (rows padded to cache lines), so all cells of one diagonal
// are independent and contiguous, and the arithmetic of a diagonal is one
// vectorised loop (log_space_math.h).  Only cells inside the rectangle are ever
// written or read.  Work comes in tiles of the (s, t) grid, s in [s0, s1) and t
// in [t0, t1), each computed diagonal by diagonal; a forward tile needs the
// tiles before it in s and in t, a backward tile those after it.

#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

// One batch of MI problems, in the layout the CPU kernel uses.  Pointers are
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

  int64_t r() const { return T1 == T_len + 1 ? 1 : 0; }
  int64_t width() const { return S + 1; }
  int64_t num_diagonals() const { return T_len + r() * S + 1; }
  // Rows padded to whole cache lines: threads that work on neighbouring
  // ranges of s then never write to the same line (when the ranges start at
  // multiples of kCellsPerLine).
  static constexpr int64_t kCellsPerLine = 64 / sizeof(T);
  int64_t row_stride() const {
    return (width() + kCellsPerLine - 1) / kCellsPerLine * kCellsPerLine;
  }
  int64_t buffer_size() const { return batch * num_diagonals() * row_stride(); }
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
inline Rect RectOf(const MutualInformationProblem<T>& p, int64_t b) {
  const int64_t* row = p.boundary + 4 * b;
  return {row[0], row[1], row[2], row[3]};
}

// The cells s in [lo, hi] of diagonal k that lie in the rectangle and in the
// tile; lo > hi when there are none.
inline void DiagonalRange(const Rect& rc, const MutualInformationTile& tile,
                          int64_t r, int64_t k, int64_t* lo, int64_t* hi) {
  const int64_t t_lo = std::max(rc.t_begin, tile.t0);
  const int64_t t_hi = std::min(rc.t_end, tile.t1 - 1);
  *lo = std::max(rc.s_begin, tile.s0);
  *hi = std::min(rc.s_end, tile.s1 - 1);
  if (r == 1) {  // t = k - s
    *lo = std::max(*lo, k - t_hi);
    *hi = std::min(*hi, k - t_lo);
  } else if (k < t_lo || k > t_hi) {  // t = k
    *hi = *lo - 1;
  }
}

// The diagonals [k_lo, k_hi] that cross the tile.
inline void TileDiagonals(const MutualInformationTile& tile, int64_t r,
                          int64_t* k_lo, int64_t* k_hi) {
  *k_lo = tile.t0 + r * tile.s0;
  *k_hi = tile.t1 - 1 + r * (tile.s1 - 1);
}

// The arithmetic of one diagonal: on entry a[i] = x_in and e[i] = y_in of n
// cells; on exit alpha and signed e (see the top of this file).
template <typename T>
inline void CombineDiagonalImpl(int64_t n, T* __restrict a, T* __restrict e) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  constexpr T kInf = std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    // A term is NaN only as +inf + -inf: a score that overflowed, plus a
    // step that does not exist; it counts as no step.
    const T x_in = a[i] == a[i] ? a[i] : kNegInf;
    const T y_in = e[i] == e[i] ? e[i] : kNegInf;
    const bool x_larger = x_in >= y_in;
    const T larger = x_larger ? x_in : y_in;
    const T smaller = x_larger ? y_in : x_in;
    // Unreached (larger = -inf): ratio 0; overflowed (larger = +inf):
    // alpha stays +inf.  Every operation runs for every lane (no -inf - -inf
    // or inf - inf), so the loop vectorises.
    const T shift = larger > kNegInf && larger < kInf ? larger : T(0);
    const T diff = smaller - shift;
    const T ratio = log_space_math::ExpNonPositive(diff < T(0) ? diff : T(0));
    a[i] = larger + log_space_math::Log1pUnit(ratio);
    e[i] = x_larger ? ratio : -ratio;
  }
}

// The weights of n cells from their signed e: wx[i] = P(x-step in),
// wy[i] = P(y-step in).
template <typename T>
inline void DecodeWeightsImpl(int64_t n, const T* __restrict e,
                              T* __restrict wx, T* __restrict wy) {
  for (int64_t i = 0; i < n; ++i) {
    const T ratio = std::abs(e[i]);
    const T inv = T(1) / (T(1) + ratio);
    const bool x_larger = !std::signbit(e[i]);
    wx[i] = x_larger ? inv : ratio * inv;
    wy[i] = x_larger ? ratio * inv : inv;
  }
}

// Compiled for several instruction sets (TF_TRANSDUCER_CLONES).
TF_TRANSDUCER_CLONES inline void CombineDiagonal(int64_t n, float* a,
                                                 float* e) {
  CombineDiagonalImpl(n, a, e);
}
TF_TRANSDUCER_CLONES inline void CombineDiagonal(int64_t n, double* a,
                                                 double* e) {
  CombineDiagonalImpl(n, a, e);
}
TF_TRANSDUCER_CLONES inline void DecodeWeights(int64_t n, const float* e,
                                               float* wx, float* wy) {
  DecodeWeightsImpl(n, e, wx, wy);
}
TF_TRANSDUCER_CLONES inline void DecodeWeights(int64_t n, const double* e,
                                               double* wx, double* wy) {
  DecodeWeightsImpl(n, e, wx, wy);
}

}  // namespace mi_internal

// Computes alpha and e of sequence b's cells in `tile`, diagonal by
// diagonal, and zeroes the tile's part of px_grad and py_grad (the backward
// pass writes only the steps inside the rectangle).
template <typename T>
void MutualInformationForwardTile(const MutualInformationProblem<T>& p,
                                  int64_t b,
                                  const MutualInformationTile& tile) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t r = p.r(), W = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_begin = rc.t_begin + r * rc.s_begin;
  const T* px = p.px + b * p.S * T1;
  const T* py = p.py + b * p.width() * Tl;
  const int64_t offset = b * p.num_diagonals() * W;
  // Short loops would spend most of their time in a scalar remainder, so
  // every diagonal is computed in whole vectors of kLanes cells.
  constexpr int64_t kLanes = 64 / sizeof(T);
  const int64_t max_cells = tile.s1 - tile.s0;
  std::vector<T> scratch(2 * ((max_cells + kLanes - 1) / kLanes * kLanes));
  for (int64_t s = tile.s0; s < tile.s1; ++s) {
    if (s < p.S) {
      T* row = p.px_grad + (b * p.S + s) * T1;
      std::fill(row + tile.t0, row + std::min(tile.t1, T1), T(0));
    }
    T* row = p.py_grad + (b * p.width() + s) * Tl;
    std::fill(row + tile.t0, row + std::min(tile.t1, Tl), T(0));
  }
  int64_t k_lo, k_hi;
  mi_internal::TileDiagonals(tile, r, &k_lo, &k_hi);
  for (int64_t k = std::max(k_lo, k_begin); k <= k_hi; ++k) {
    int64_t lo, hi;
    mi_internal::DiagonalRange(rc, tile, r, k, &lo, &hi);
    if (lo > hi) continue;
    T* a_cur = p.alpha + offset + k * W;
    T* e_cur = p.e + offset + k * W;
    if (k == k_begin) {
      // The start; for modified px also the rest of its column, which no
      // path reaches (every x-step takes a frame).
      std::fill(a_cur + lo, a_cur + hi + 1, kNegInf);
      std::fill(e_cur + lo, e_cur + hi + 1, T(0));
      if (rc.s_begin >= lo && rc.s_begin <= hi) a_cur[rc.s_begin] = T(0);
      continue;
    }
    // Gather the two incoming terms (strided reads of px and py) into
    // contiguous scratch padded to whole vectors with -inf (which the
    // combine step maps to alpha = -inf, e = +0) ...
    const int64_t n = hi - lo + 1;
    const int64_t n_padded = (n + kLanes - 1) / kLanes * kLanes;
    T* x_in = scratch.data();
    T* y_in = x_in + n_padded;
    const T* a_prev = a_cur - W;
    auto gather = [&](int64_t s) {  // any cell, with the edge checks
      const int64_t t = k - r * s;
      const int64_t tx = t - 1 + r;  // column of the x-step into (s, t)
      x_in[s - lo] = (s > rc.s_begin && tx >= rc.t_begin)
                         ? a_prev[s - 1] + px[(s - 1) * T1 + tx]
                         : kNegInf;
      y_in[s - lo] = t > rc.t_begin ? a_prev[s] + py[s * Tl + t - 1] : kNegInf;
    };
    // Past the start, only the first cell can lack its x-step and only the
    // last its y-step; the cells between need no checks.
    gather(lo);
    if (hi > lo) gather(hi);
    {
      const int64_t s = lo + 1, t = k - r * s;
      const T* px_at = px + (s - 1) * T1 + (t - 1 + r);
      const T* py_at = py + s * Tl + (t - 1);
      const int64_t px_step = T1 - r, py_step = Tl - r;
      for (int64_t i = 1; i < n - 1; ++i) {
        x_in[i] = a_prev[lo + i - 1] + *px_at;
        y_in[i] = a_prev[lo + i] + *py_at;
        px_at += px_step;
        py_at += py_step;
      }
    }
    std::fill(x_in + n, x_in + n_padded, kNegInf);
    std::fill(y_in + n, y_in + n_padded, kNegInf);
    // ... combine them, vectorised, and store the n real cells.
    mi_internal::CombineDiagonal(n_padded, x_in, y_in);
    std::copy(x_in, x_in + n, a_cur + lo);
    std::copy(y_in, y_in + n, e_cur + lo);
  }
}

// The score of sequence b, read after its forward pass (before the backward
// pass overwrites alpha).
template <typename T>
T MutualInformationScore(const MutualInformationProblem<T>& p, int64_t b) {
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_end = rc.t_end + p.r() * rc.s_end;
  return p.alpha[(b * p.num_diagonals() + k_end) * p.row_stride() + rc.s_end];
}

// Computes g, px_grad and py_grad for sequence b's cells in `tile`, diagonal
// by diagonal from the last.  Overwrites alpha with g.  Writes only steps
// inside the rectangle; the forward pass zeroed the rest.
template <typename T>
void MutualInformationBackwardTile(const MutualInformationProblem<T>& p,
                                   int64_t b,
                                   const MutualInformationTile& tile) {
  const int64_t r = p.r(), W = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_end = rc.t_end + r * rc.s_end;
  const int64_t offset = b * p.num_diagonals() * W;
  T* px_grad = p.px_grad + b * p.S * T1;
  T* py_grad = p.py_grad + b * p.width() * Tl;
  // The weights of the successors' diagonal, decoded (vectorised) for cells
  // s in [lo, hi + 1] at index s - lo.
  const int64_t max_cells = tile.s1 - tile.s0 + 1;
  std::vector<T> weights(2 * max_cells);
  T* wx_next = weights.data();
  T* wy_next = wx_next + max_cells;
  int64_t k_lo, k_hi;
  mi_internal::TileDiagonals(tile, r, &k_lo, &k_hi);
  for (int64_t k = std::min(k_hi, k_end); k >= k_lo; --k) {
    int64_t lo, hi;
    mi_internal::DiagonalRange(rc, tile, r, k, &lo, &hi);
    if (lo > hi) continue;
    T* g_cur = p.alpha + offset + k * W;
    const T* g_next = g_cur + W;
    // Any cell, reading only successors inside the rectangle.
    auto cell = [&](int64_t s) {
      const int64_t t = k - r * s;
      T gx = T(0), gy = T(0);
      if (s < rc.s_end && t + 1 - r <= rc.t_end) {
        gx = g_next[s + 1] * wx_next[s + 1 - lo];
        px_grad[s * T1 + t] = gx;
      }
      if (t < rc.t_end) {
        gy = g_next[s] * wy_next[s - lo];
        py_grad[s * Tl + t] = gy;
      }
      g_cur[s] = gx + gy;
    };
    if (k < k_end) {  // e of diagonal k + 1 (may include unused cells)
      const int64_t n = std::min(hi + 1, p.width() - 1) - lo + 1;
      mi_internal::DecodeWeights(n, p.e + offset + (k + 1) * W + lo, wx_next,
                                 wy_next);
    }
    if (k == k_end) {
      // The end cell still holds alpha, the score; for modified px the rest
      // of the last column has no step left inside the rectangle.
      for (int64_t s = lo; s <= hi; ++s) {
        g_cur[s] = s == rc.s_end && std::isfinite(g_cur[s]) ? T(1) : T(0);
      }
      continue;
    }
    // Only the first cell can lack its y-step and only the last its x-step;
    // the cells between need no checks.
    cell(lo);
    if (hi > lo) cell(hi);
    const int64_t t = k - r * (lo + 1);
    T* px_at = px_grad + (lo + 1) * T1 + t;
    T* py_at = py_grad + (lo + 1) * Tl + t;
    const int64_t px_step = T1 - r, py_step = Tl - r;
    for (int64_t s = lo + 1; s < hi; ++s) {
      const T gx = g_next[s + 1] * wx_next[s + 1 - lo];
      const T gy = g_next[s] * wy_next[s - lo];
      *px_at = gx;
      *py_at = gy;
      g_cur[s] = gx + gy;
      px_at += px_step;
      py_at += py_step;
    }
  }
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_
