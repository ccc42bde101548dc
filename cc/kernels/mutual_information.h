// SPDX-License-Identifier: Apache-2.0
// The MI recursion (mutual_information_cell.h) on the CPU.
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
#include "cc/kernels/mutual_information_cell.h"

namespace tf_transducer {

namespace mi_internal {

// The diagonals [k_lo, k_hi] that cross the tile.
inline void TileDiagonals(const MutualInformationTile& tile, int64_t r,
                          int64_t* k_lo, int64_t* k_hi) {
  *k_lo = tile.t0 + r * tile.s0;
  *k_hi = tile.t1 - 1 + r * (tile.s1 - 1);
}

// The arithmetic of one diagonal: on entry a[i] = x_in and e[i] = y_in of n
// cells; on exit alpha and signed e (CombineCell on each; the loop
// vectorises).
template <typename T>
inline void CombineDiagonalImpl(int64_t n, T* __restrict a, T* __restrict e) {
  for (int64_t i = 0; i < n; ++i) CombineCell(a[i], e[i], a + i, e + i);
}

// The weights of n cells from their signed e: wx[i] = P(x-step in),
// wy[i] = P(y-step in).
template <typename T>
inline void DecodeWeightsImpl(int64_t n, const T* __restrict e,
                              T* __restrict wx, T* __restrict wy) {
  for (int64_t i = 0; i < n; ++i) DecodeCell(e[i], wx + i, wy + i);
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
