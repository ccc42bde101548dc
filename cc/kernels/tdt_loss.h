// SPDX-License-Identifier: Apache-2.0
// The Token-and-Duration Transducer lattice of one utterance (Xu et al.,
// arXiv 2304.06795): its forward and backward recursions and the
// occupations of its steps, shared by the CPU kernel (tdt_loss_op.cc) and
// written for the GPU's too.  From node (t, u), 0 <= t < T_b, 0 <= u <= U_b,
// for each duration d_k:
//
//   label y_u (u < U_b):  to (t + d_k, u + 1) if t + d_k < T_b,
//                         weight lab[b, u, t] + dur[b, t, u, k]
//   blank (d_k >= 1):     to (t + d_k, u) if t + d_k < T_b, or to the end
//                         if u = U_b and t + d_k = T_b;
//                         weight blk[b, u, t] + dur[b, t, u, k]
//
// alpha(0, 0) = 0; the score is log P(y | x) = the log-sum of every path.

#ifndef TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_
#define TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_

#include <cstdint>
#include <limits>

#include "cc/kernels/device.h"
#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

// log(exp(a) + exp(b)); -inf for two -inf, NaN for a NaN.
template <typename T>
TT_HOST_DEVICE inline T LogAdd(T a, T b) {
  const T hi = a < b ? b : a;
  const T lo = a < b ? a : b;
  // hi = -inf: lo is -inf too, or NaN (a < NaN is false).
  if (hi == -std::numeric_limits<T>::infinity()) return lo;
  const T diff = lo - hi;  // <= 0, or NaN
  if (diff != diff) return diff;
  return hi + log_space_math::Log1pUnit(log_space_math::ExpNonPositive(diff));
}

// One batch of the TDT lattice after its log-softmaxes, as the kernels see
// it, all in T.  Every array is dense over the padded sizes; what lies
// outside an utterance's lengths is never read.
template <typename T>
struct TdtLattice {
  int64_t B, T_len, S, K;
  const int64_t* frames;     // [B], T_b in [1, T]
  const int64_t* labels;     // [B], U_b in [0, S]
  const int64_t* durations;  // [K], sorted, distinct, with 0 and 1
  const T* lab;              // [B, S, T], the label's log-prob (- sigma)
  const T* blk;              // [B, S + 1, T], the blank's (- sigma)
  const T* dur;              // [B, T, S + 1, K], log-softmaxed durations
  T emit;                    // 1 + fastemit_lambda
  T clamp;                   // <= 0: no clamp

  TT_HOST_DEVICE T LabelWeight(int64_t b, int64_t t, int64_t u,
                               int64_t k) const {
    return lab[(b * S + u) * T_len + t] +
           dur[((b * T_len + t) * (S + 1) + u) * K + k];
  }
  TT_HOST_DEVICE T BlankWeight(int64_t b, int64_t t, int64_t u,
                               int64_t k) const {
    return blk[(b * (S + 1) + u) * T_len + t] +
           dur[((b * T_len + t) * (S + 1) + u) * K + k];
  }
  // Node (t, u) of utterance b in a [B, T, S + 1] buffer.
  TT_HOST_DEVICE int64_t Node(int64_t b, int64_t t, int64_t u) const {
    return (b * T_len + t) * (S + 1) + u;
  }

  // alpha [B, T, S + 1] of utterance b (its nodes only); returns the score.
  TT_HOST_DEVICE T Forward(int64_t b, T* alpha) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t Tb = frames[b], Ub = labels[b];
    for (int64_t t = 0; t < Tb; ++t) {
      for (int64_t u = 0; u <= Ub; ++u) {
        T a = t == 0 && u == 0 ? T(0) : kNegInf;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t d = durations[k];
          if (d == 0) {
            if (u > 0) {
              a = LogAdd(
                  a, alpha[Node(b, t, u - 1)] + LabelWeight(b, t, u - 1, k));
            }
          } else if (t >= d) {
            a = LogAdd(a,
                       alpha[Node(b, t - d, u)] + BlankWeight(b, t - d, u, k));
            if (u > 0) {
              a = LogAdd(a, alpha[Node(b, t - d, u - 1)] +
                                LabelWeight(b, t - d, u - 1, k));
            }
          }
        }
        alpha[Node(b, t, u)] = a;
      }
    }
    T score = kNegInf;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = Tb - durations[k];
      if (durations[k] >= 1 && t >= 0) {
        score = LogAdd(score, alpha[Node(b, t, Ub)] + BlankWeight(b, t, Ub, k));
      }
    }
    return score;
  }

  // The log-weight of the rest of a path after step k from (t, u): beta of
  // its target, 0 for the end, -inf where the step leaves the lattice.
  TT_HOST_DEVICE T After(int64_t b, const T* beta, int64_t t, int64_t u,
                         int64_t k, bool label) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t d = durations[k], Tb = frames[b], Ub = labels[b];
    if (label)
      return u < Ub && t + d < Tb ? beta[Node(b, t + d, u + 1)] : kNegInf;
    if (d == 0) return kNegInf;
    if (t + d < Tb) return beta[Node(b, t + d, u)];
    return t + d == Tb && u == Ub ? T(0) : kNegInf;
  }

  // beta [B, T, S + 1] of utterance b: the log-sum from each node to the end.
  TT_HOST_DEVICE void Backward(int64_t b, T* beta) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t Tb = frames[b], Ub = labels[b];
    for (int64_t t = Tb - 1; t >= 0; --t) {
      for (int64_t u = Ub; u >= 0; --u) {
        T v = kNegInf;
        for (int64_t k = 0; k < K; ++k) {
          v = LogAdd(v,
                     BlankWeight(b, t, u, k) + After(b, beta, t, u, k, false));
          if (u < Ub) {
            v = LogAdd(v,
                       LabelWeight(b, t, u, k) + After(b, beta, t, u, k, true));
          }
        }
        beta[Node(b, t, u)] = v;
      }
    }
  }

  // The gradient of utterance b's score, from alpha, beta and the score:
  // label_occ [B, S, T] and blank_occ [B, S + 1, T], the occupations of
  // each node's label and blank steps summed over durations (the token
  // logits' gradient follows from them as in the RNN-T loss), and d_dur
  // [B, T, S + 1, K], the gradient of the duration logits (FastEmit:
  // label steps count emit times; clamped).  Nodes of utterance b only.
  TT_HOST_DEVICE void Gradient(int64_t b, const T* alpha, const T* beta,
                               T score, T* label_occ, T* blank_occ,
                               T* d_dur) const {
    const int64_t Tb = frames[b], Ub = labels[b];
    const bool no_path = !(score > -std::numeric_limits<T>::infinity());
    for (int64_t t = 0; t < Tb; ++t) {
      for (int64_t u = 0; u <= Ub; ++u) {
        const T a = alpha[Node(b, t, u)] - score;
        T* g = d_dur + Node(b, t, u) * K;
        T gx = T(0), gy = T(0), total = T(0);
        for (int64_t k = 0; k < K; ++k) {
          T ex = T(0), ey = T(0);
          if (!no_path) {
            if (u < Ub)
              ex = Occupation(a + LabelWeight(b, t, u, k) +
                              After(b, beta, t, u, k, true));
            ey = Occupation(a + BlankWeight(b, t, u, k) +
                            After(b, beta, t, u, k, false));
          }
          gx += ex;
          gy += ey;
          g[k] = emit * ex + ey;
          total += g[k];
        }
        const T* lp = dur + Node(b, t, u) * K;
        for (int64_t k = 0; k < K; ++k) {
          T v = g[k] - total * log_space_math::ExpNonPositive(Min(lp[k], T(0)));
          if (clamp > 0) v = Min(clamp, Max(-clamp, v));
          g[k] = v;
        }
        if (u < Ub) label_occ[(b * S + u) * T_len + t] = gx;
        blank_occ[(b * (S + 1) + u) * T_len + t] = gy;
      }
    }
  }

  // exp(x) for a log-occupation x <= 0 (up to rounding); 0 for -inf or NaN.
  TT_HOST_DEVICE static T Occupation(T x) {
    if (!(x > -std::numeric_limits<T>::infinity())) return T(0);
    return log_space_math::ExpNonPositive(x < T(0) ? x : T(0));
  }
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_
