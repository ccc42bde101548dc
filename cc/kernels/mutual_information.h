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
//   alpha[s, t] = log_add(alpha[s - 1, t - 1 + r] + px[s - 1, t - 1 + r],
//                         alpha[s, t - 1]         + py[s, t - 1])
//
// where a term whose source lies outside the rectangle is -inf.  The score is
// alpha[s_end, t_end], the log-sum over all monotonic paths.
//
// The gradient of the score is the occupation probability of each step.  With
// g[s, t] the probability that a path passes through (s, t),
//
//   g[s_end, t_end] = 1                  (0 when no path exists)
//   px_grad[s, t]   = g[s + 1, t + 1 - r] * exp(alpha[s, t] + px[s, t]
//                                               - alpha[s + 1, t + 1 - r])
//   py_grad[s, t]   = g[s, t + 1] * exp(alpha[s, t] + py[s, t]
//                                       - alpha[s, t + 1])
//   g[s, t]         = px_grad[s, t] + py_grad[s, t]
//
// for every step that stays inside the rectangle; every other entry is 0.  A
// successor with g = 0 contributes 0, so a -inf alpha never meets a -inf alpha
// in a subtraction and the result has no NaN wherever any path survives.
//
// Both recursions depend only on the previous (forward) or next (backward)
// "diagonal" k = t + r * s: an x-step and a y-step both raise k by one.  The
// kernel therefore stores alpha and g diagonal-major, as [K, S + 1] with
// K = T + r * S + 1 and t = k - r * s, so that all cells of one diagonal are
// independent.  Work is split into tiles of (k, s); the tile (kb, sb) depends
// on (kb - 1, sb - 1), (kb - 1, sb) and (kb, sb - 1) only, so the tiles with
// the same kb + sb (one "wave") run in parallel.

#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_

#include <cmath>
#include <cstdint>
#include <limits>

namespace tf_transducer {

// log(exp(a) + exp(b)), exact at -inf: log_add(-inf, -inf) = -inf.
template <typename T>
inline T LogAdd(T a, T b) {
  const T hi = a > b ? a : b;
  const T lo = a > b ? b : a;
  if (hi == -std::numeric_limits<T>::infinity()) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

// One batch of MI problems, in the layout the CPU kernel uses.  Pointers are
// to row-major buffers; alpha and g are scratch of size B * K * (S + 1).
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
  T* alpha;                 // [B, K, S + 1]
  T* g;                     // [B, K, S + 1]

  int64_t r() const { return T1 == T_len + 1 ? 1 : 0; }
  int64_t width() const { return S + 1; }
  int64_t num_diagonals() const { return T_len + r() * S + 1; }
};

// Computes alpha for the cells of sequence b with k in [k0, k1) and s in
// [s0, s1), diagonal by diagonal.  Every cell of the tile is written (-inf
// outside the rectangle), so no buffer needs filling beforehand.
template <typename T>
void MutualInformationForwardTile(const MutualInformationProblem<T>& p,
                                  int64_t b, int64_t k0, int64_t k1, int64_t s0,
                                  int64_t s1) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t r = p.r(), W = p.width();
  const int64_t* bnd = p.boundary + 4 * b;
  const int64_t s_begin = bnd[0], t_begin = bnd[1], s_end = bnd[2],
                t_end = bnd[3];
  const T* px = p.px + b * p.S * p.T1;
  const T* py = p.py + b * W * p.T_len;
  T* alpha = p.alpha + b * p.num_diagonals() * W;
  for (int64_t k = k0; k < k1; ++k) {
    T* cur = alpha + k * W;
    const T* prev = alpha + (k - 1) * W;  // only read when k > k_begin
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t t = k - r * s;
      if (s < s_begin || s > s_end || t < t_begin || t > t_end) {
        cur[s] = kNegInf;
      } else if (s == s_begin && t == t_begin) {
        cur[s] = T(0);
      } else {
        const int64_t tx = t - 1 + r;  // column of the x-step into (s, t)
        const T from_x = (s > s_begin && tx >= t_begin)
                             ? prev[s - 1] + px[(s - 1) * p.T1 + tx]
                             : kNegInf;
        const T from_y =
            t > t_begin ? prev[s] + py[s * p.T_len + t - 1] : kNegInf;
        cur[s] = LogAdd(from_x, from_y);
      }
    }
  }
}

// Computes g, px_grad and py_grad for the cells of sequence b with k in
// [k0, k1) (descending) and s in [s0, s1).  Needs the whole of alpha, and g
// on diagonal k + 1.  Writes every px_grad / py_grad entry of its cells.
template <typename T>
void MutualInformationBackwardTile(const MutualInformationProblem<T>& p,
                                   int64_t b, int64_t k0, int64_t k1,
                                   int64_t s0, int64_t s1) {
  const int64_t r = p.r(), W = p.width(), K = p.num_diagonals();
  const int64_t* bnd = p.boundary + 4 * b;
  const int64_t s_begin = bnd[0], t_begin = bnd[1], s_end = bnd[2],
                t_end = bnd[3];
  const T* px = p.px + b * p.S * p.T1;
  const T* py = p.py + b * W * p.T_len;
  const T* alpha = p.alpha + b * K * W;
  T* g = p.g + b * K * W;
  T* px_grad = p.px_grad + b * p.S * p.T1;
  T* py_grad = p.py_grad + b * W * p.T_len;
  for (int64_t k = k1 - 1; k >= k0; --k) {
    const T* a_cur = alpha + k * W;
    const T* a_next = alpha + (k + 1) * W;  // only read for in-rect steps
    const T* g_next = g + (k + 1) * W;
    T* g_cur = g + k * W;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t t = k - r * s;
      if (t < 0 || t > p.T_len) continue;  // not a cell of the grid
      const bool inside =
          s >= s_begin && s <= s_end && t >= t_begin && t <= t_end;
      T gx = T(0), gy = T(0);
      if (inside && s < s_end && t + 1 - r <= t_end) {
        const T gn = g_next[s + 1];
        if (gn > T(0)) {
          gx = gn * std::exp(a_cur[s] + px[s * p.T1 + t] - a_next[s + 1]);
        }
      }
      if (inside && t < t_end) {
        const T gn = g_next[s];
        if (gn > T(0)) {
          gy = gn * std::exp(a_cur[s] + py[s * p.T_len + t] - a_next[s]);
        }
      }
      if (s < p.S && t < p.T1) px_grad[s * p.T1 + t] = gx;
      if (t < p.T_len) py_grad[s * p.T_len + t] = gy;
      if (inside && s == s_end && t == t_end) {
        g_cur[s] = std::isfinite(a_cur[s]) ? T(1) : T(0);
      } else {
        g_cur[s] = gx + gy;
      }
    }
  }
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_H_
