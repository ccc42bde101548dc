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
// to full relative precision.  The backward pass then needs no exp or log and
// never reads px or py.  A cell that no path reaches gets wx = wy = 0, so
// g = 0 there and no NaN can arise.
//
// Both recursions depend only on the previous (forward) or next (backward)
// "diagonal" k = t + r * s: an x-step and a y-step both raise k by one.  The
// kernel stores alpha (later g), wx and wy diagonal-major, as [K + 1, S + 3]
// with K = T + r * S + 1 diagonals plus one row of zeros, and column
// j = s + 1 between a padding column on each side, so that every neighbour
// read is in bounds.  All cells of one diagonal are independent, so the
// arithmetic of a diagonal is one vectorisable loop (log_space_math.h).
// Work is split into tiles of (k, s); the tile (kb, sb) depends on
// (kb - 1, sb - 1), (kb - 1, sb) and (kb, sb - 1) only, so tiles with the
// same kb + sb (one "wave") run in parallel, and the backward waves run in
// reverse.

#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

// One batch of MI problems, in the layout the CPU kernel uses.  Pointers are
// to row-major buffers; `alpha`, `wx` and `wy` are scratch of size
// buffer_size() = B * (K + 1) * (S + 3).
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
  T* alpha;                 // alpha in the forward pass, g in the backward
  T* wx;                    // P(arrived by the x-step) of every cell
  T* wy;                    // P(arrived by the y-step) of every cell

  int64_t r() const { return T1 == T_len + 1 ? 1 : 0; }
  int64_t width() const { return S + 1; }
  int64_t num_diagonals() const { return T_len + r() * S + 1; }
  int64_t num_rows() const { return num_diagonals() + 1; }
  int64_t row_stride() const { return S + 3; }
  int64_t buffer_size() const { return batch * num_rows() * row_stride(); }
};

namespace mi_internal {

struct Rect {
  int64_t s_begin, t_begin, s_end, t_end;
};

// The cells s in [lo, hi] of diagonal k that lie in the rectangle and in the
// tile's [s0, s1); lo > hi when there are none.
inline void DiagonalRange(const Rect& rc, int64_t r, int64_t k, int64_t s0,
                          int64_t s1, int64_t* lo, int64_t* hi) {
  *lo = std::max(rc.s_begin, s0);
  *hi = std::min(rc.s_end, s1 - 1);
  if (r == 1) {
    *lo = std::max(*lo, k - rc.t_end);
    *hi = std::min(*hi, k - rc.t_begin);
  } else if (k < rc.t_begin || k > rc.t_end) {
    *hi = *lo - 1;
  }
}

template <typename T>
inline Rect RectOf(const MutualInformationProblem<T>& p, int64_t b) {
  const int64_t* row = p.boundary + 4 * b;
  return {row[0], row[1], row[2], row[3]};
}

}  // namespace mi_internal

// Fills the padding of sequence b's scratch and zeroes its gradients; runs
// before any tile of b.
template <typename T>
void MutualInformationPrepare(const MutualInformationProblem<T>& p, int64_t b) {
  const int64_t rows = p.num_rows(), stride = p.row_stride();
  const int64_t offset = b * rows * stride;
  T* alpha = p.alpha + offset;
  for (int64_t k = 0; k < rows; ++k) {
    alpha[k * stride] = -std::numeric_limits<T>::infinity();  // s = -1
    alpha[k * stride + stride - 1] = T(0);                    // s = S + 1
    p.wx[offset + k * stride + stride - 1] = T(0);
    p.wy[offset + k * stride + stride - 1] = T(0);
  }
  // The row after the last diagonal: g = 0 for the backward pass.
  const int64_t last = offset + (rows - 1) * stride;
  std::fill(p.alpha + last, p.alpha + last + stride, T(0));
  std::fill(p.wx + last, p.wx + last + stride, T(0));
  std::fill(p.wy + last, p.wy + last + stride, T(0));
  std::fill(p.px_grad + b * p.S * p.T1, p.px_grad + (b + 1) * p.S * p.T1, T(0));
  std::fill(p.py_grad + b * p.width() * p.T_len,
            p.py_grad + (b + 1) * p.width() * p.T_len, T(0));
}

namespace mi_internal {

// The arithmetic of one diagonal: on entry a[i] = x_in and wx[i] = y_in of n
// cells; on exit alpha, wx and wy (see the top of this file).  Compiled for
// several instruction sets; the loader picks the best one the CPU has.
template <typename T>
inline void CombineDiagonalImpl(int64_t n, T* __restrict a, T* __restrict wx,
                                T* __restrict wy) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const T x_in = a[i], y_in = wx[i];
    const bool x_larger = x_in >= y_in;
    const T larger = x_larger ? x_in : y_in;
    const T smaller = x_larger ? y_in : x_in;
    const bool reached = larger > kNegInf;
    const T e =
        log_space_math::ExpNonPositive(reached ? smaller - larger : kNegInf);
    const T inv = reached ? T(1) / (T(1) + e) : T(0);
    a[i] = larger + log_space_math::Log1pUnit(e);
    wx[i] = x_larger ? inv : e * inv;
    wy[i] = x_larger ? e * inv : inv;
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TF_TRANSDUCER_CLONES \
  __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TF_TRANSDUCER_CLONES
#endif

TF_TRANSDUCER_CLONES inline void CombineDiagonal(int64_t n, float* a, float* wx,
                                                 float* wy) {
  CombineDiagonalImpl(n, a, wx, wy);
}
TF_TRANSDUCER_CLONES inline void CombineDiagonal(int64_t n, double* a,
                                                 double* wx, double* wy) {
  CombineDiagonalImpl(n, a, wx, wy);
}
#undef TF_TRANSDUCER_CLONES

}  // namespace mi_internal

// Computes alpha, wx and wy for sequence b's cells with k in [k0, k1) and s
// in [s0, s1), diagonal by diagonal.  Every cell of the tile is written.
template <typename T>
void MutualInformationForwardTile(const MutualInformationProblem<T>& p,
                                  int64_t b, int64_t k0, int64_t k1, int64_t s0,
                                  int64_t s1) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t r = p.r(), stride = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_begin = rc.t_begin + r * rc.s_begin;
  const T* px = p.px + b * p.S * T1;
  const T* py = p.py + b * p.width() * Tl;
  const int64_t offset = b * p.num_rows() * stride + 1;  // column j = s + 1
  // Short loops would spend most of their time in a scalar remainder, so
  // every diagonal is computed in whole vectors of kLanes cells.
  constexpr int64_t kLanes = 64 / sizeof(T);
  std::vector<T> scratch(3 * ((s1 - s0 + kLanes - 1) / kLanes * kLanes));
  for (int64_t k = k0; k < k1; ++k) {
    T* a_cur = p.alpha + offset + k * stride;
    T* wx_cur = p.wx + offset + k * stride;
    T* wy_cur = p.wy + offset + k * stride;
    int64_t lo, hi;
    mi_internal::DiagonalRange(rc, r, k, s0, s1, &lo, &hi);
    if (k <= k_begin) hi = lo - 1;  // nothing to compute up to the start
    // Cells of the tile outside [lo, hi]: unreachable.
    const int64_t fill_end = std::min(lo > hi ? s1 : lo, s1);
    const int64_t fill_begin = std::max(lo > hi ? s0 : hi + 1, fill_end);
    for (auto [begin, end] :
         {std::pair{s0, fill_end}, std::pair{fill_begin, s1}}) {
      std::fill(a_cur + begin, a_cur + end, kNegInf);
      std::fill(wx_cur + begin, wx_cur + end, T(0));
      std::fill(wy_cur + begin, wy_cur + end, T(0));
    }
    if (k == k_begin && rc.s_begin >= s0 && rc.s_begin < s1) {
      a_cur[rc.s_begin] = T(0);
    }
    if (lo > hi) continue;
    // Gather the two incoming terms (strided reads of px and py) into
    // contiguous scratch padded to whole vectors with -inf (which the
    // combine step maps to alpha = -inf, wx = wy = 0) ...
    const int64_t n = hi - lo + 1;
    const int64_t n_padded = (n + kLanes - 1) / kLanes * kLanes;
    T* x_in = scratch.data();
    T* y_in = x_in + n_padded;
    T* w_y = y_in + n_padded;
    const T* a_prev = a_cur - stride;
    auto gather = [&](int64_t s) {  // any cell, with the edge checks
      const int64_t t = k - r * s;
      const int64_t tx = t - 1 + r;  // column of the x-step into (s, t)
      x_in[s - lo] = (s > rc.s_begin && tx >= rc.t_begin)
                         ? a_prev[s - 1] + px[(s - 1) * T1 + tx]
                         : kNegInf;
      y_in[s - lo] = t > rc.t_begin ? a_prev[s] + py[s * Tl + t - 1] : kNegInf;
    };
    // Only the first cell can lack its x-step and only the last its y-step
    // (k > k_begin here); the cells between need no checks.
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
    mi_internal::CombineDiagonal(n_padded, x_in, y_in, w_y);
    std::copy(x_in, x_in + n, a_cur + lo);
    std::copy(y_in, y_in + n, wx_cur + lo);
    std::copy(w_y, w_y + n, wy_cur + lo);
  }
}

// The score of sequence b, read after its forward pass (before the backward
// pass overwrites alpha).
template <typename T>
T MutualInformationScore(const MutualInformationProblem<T>& p, int64_t b) {
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_end = rc.t_end + p.r() * rc.s_end;
  return p.alpha[(b * p.num_rows() + k_end) * p.row_stride() + rc.s_end + 1];
}

// Computes g, px_grad and py_grad for sequence b's cells with k in [k0, k1)
// (descending) and s in [s0, s1).  Overwrites alpha with g; needs wx, wy and
// g of diagonal k + 1.  px_grad and py_grad must be zero beforehand (Prepare).
template <typename T>
void MutualInformationBackwardTile(const MutualInformationProblem<T>& p,
                                   int64_t b, int64_t k0, int64_t k1,
                                   int64_t s0, int64_t s1) {
  const int64_t r = p.r(), stride = p.row_stride(), T1 = p.T1, Tl = p.T_len;
  const mi_internal::Rect rc = mi_internal::RectOf(p, b);
  const int64_t k_end = rc.t_end + r * rc.s_end;
  const int64_t offset = b * p.num_rows() * stride + 1;
  T* px_grad = p.px_grad + b * p.S * T1;
  T* py_grad = p.py_grad + b * p.width() * Tl;
  for (int64_t k = k1 - 1; k >= k0; --k) {
    T* g_cur = p.alpha + offset + k * stride;
    const T* g_next = g_cur + stride;
    const T* wx_next = p.wx + offset + (k + 1) * stride;
    const T* wy_next = p.wy + offset + (k + 1) * stride;
    int64_t lo, hi;
    mi_internal::DiagonalRange(rc, r, k, s0, s1, &lo, &hi);
    // Cells of the tile outside [lo, hi]: no path through them.
    const int64_t fill_end = std::min(lo > hi ? s1 : lo, s1);
    const int64_t fill_begin = std::max(lo > hi ? s0 : hi + 1, fill_end);
    std::fill(g_cur + s0, g_cur + fill_end, T(0));
    std::fill(g_cur + fill_begin, g_cur + s1, T(0));
    if (k == k_end && rc.s_end >= lo && rc.s_end <= hi) {
      // The end cell still holds alpha, the score.
      g_cur[rc.s_end] = std::isfinite(g_cur[rc.s_end]) ? T(1) : T(0);
      hi = rc.s_end - 1;  // the end cell is the last in-range cell of k_end
    }
    auto cell = [&](int64_t s) {  // any cell, with the edge checks
      const int64_t t = k - r * s;
      const T gx = g_next[s + 1] * wx_next[s + 1];
      const T gy = g_next[s] * wy_next[s];
      if (s < rc.s_end && t + 1 - r <= rc.t_end) px_grad[s * T1 + t] = gx;
      if (t < rc.t_end) py_grad[s * Tl + t] = gy;
      g_cur[s] = gx + gy;
    };
    if (lo > hi) continue;
    if (r == 0 && k == rc.t_end) {  // modified: the last column, all edges
      for (int64_t s = lo; s <= hi; ++s) cell(s);
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
      const T gx = g_next[s + 1] * wx_next[s + 1];
      const T gy = g_next[s] * wy_next[s];
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
