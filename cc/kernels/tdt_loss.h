// SPDX-License-Identifier: Apache-2.0
// The Token-and-Duration Transducer lattice of one utterance (Xu et al.,
// arXiv 2304.06795): its forward and backward recursions and the
// occupations of its steps, shared by the CPU kernel (tdt_loss_op.cc) and
// written for the GPU's too.  From node (t, u), 0 <= t < T_b, 0 <= u <= U_b,
// for each duration d_k:
//
//   label y_u (u < U_b):  to (t + d_k, u + 1) if t + d_k < T_b,
//                         weight lab[b, t, u] + dur[b, t, u, k]
//   blank (d_k >= 1):     to (t + d_k, u) if t + d_k < T_b, or to the end
//                         if u = U_b and t + d_k = T_b;
//                         weight blk[b, t, u] + dur[b, t, u, k]
//
// alpha(0, 0) = 0; the score is log P(y | x) = the log-sum of every path.

#ifndef TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_
#define TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_

#include <cstdint>
#include <limits>

#include "cc/kernels/device.h"
#include "cc/kernels/log_space_math.h"

namespace tf_transducer {

// A log-sum-exp accumulated one term at a time in two rounds: Max(x) over
// the terms, then Add(x) over the same terms; Log() is the result (-inf for
// no finite term, NaN when a term was NaN).  One log per sum, one exp per
// term.
template <typename T>
struct LogSum {
  T max = -std::numeric_limits<T>::infinity();
  T sum = T(0);
  bool nan = false;

  TT_HOST_DEVICE void Max(T x) {
    nan |= x != x;
    max = x > max ? x : max;
  }
  TT_HOST_DEVICE void Add(T x) {
    if (x > -std::numeric_limits<T>::infinity()) {
      sum += log_space_math::ExpNonPositive(Min(x - max, T(0)));
    }
  }
  TT_HOST_DEVICE T Log() const {
    if (nan) return std::numeric_limits<T>::quiet_NaN();
    if (!(max > -std::numeric_limits<T>::infinity())) return max;
    return max + tf_transducer::Log(sum);
  }
};

// The most durations the kernels take (their steps' terms live in arrays of
// this size).
constexpr int kMaxDurations = 32;

// One batch of the TDT lattice after its log-softmaxes, as the kernels see
// it, all in T.  Every array is dense over the padded sizes; what lies
// outside an utterance's lengths is never read.  Nodes (b, t, u) are laid
// out [B, T, S + 1].
template <typename T>
struct TdtLattice {
  int64_t B, T_len, S, K;
  const int64_t* frames;     // [B], T_b in [1, T]
  const int64_t* labels;     // [B], U_b in [0, S]
  const int64_t* durations;  // [K], sorted, distinct, with 0 and 1
  const T* lab;              // [B, T, S + 1], the label's log-prob (- sigma)
  const T* blk;              // [B, T, S + 1], the blank's (- sigma)
  const T* dur;              // [B, T, S + 1, K], log-softmaxed durations
  T emit;                    // 1 + fastemit_lambda
  T clamp;                   // <= 0: no clamp

  // Node (t, u) of utterance b in a [B, T, S + 1] buffer.
  TT_HOST_DEVICE int64_t Node(int64_t b, int64_t t, int64_t u) const {
    return (b * T_len + t) * (S + 1) + u;
  }
  TT_HOST_DEVICE T LabelWeight(int64_t node, int64_t k) const {
    return lab[node] + dur[node * K + k];
  }
  TT_HOST_DEVICE T BlankWeight(int64_t node, int64_t k) const {
    return blk[node] + dur[node * K + k];
  }

  // alpha [B, T, S + 1] of utterance b (its nodes only); returns the score.
  TT_HOST_DEVICE T Forward(int64_t b, T* alpha) const {
    const int64_t Tb = frames[b], Ub = labels[b];
    T terms[2 * kMaxDurations + 1];
    for (int64_t t = 0; t < Tb; ++t) {
      for (int64_t u = 0; u <= Ub; ++u) {
        int n = 0;
        if (t == 0 && u == 0) terms[n++] = T(0);
        for (int64_t k = 0; k < K; ++k) {  // the steps that arrive at (t, u)
          const int64_t d = durations[k];
          if (d == 0) {
            if (u > 0) {
              const int64_t from = Node(b, t, u - 1);
              terms[n++] = alpha[from] + LabelWeight(from, k);
            }
          } else if (t >= d) {
            const int64_t from = Node(b, t - d, u);
            terms[n++] = alpha[from] + BlankWeight(from, k);
            if (u > 0) terms[n++] = alpha[from - 1] + LabelWeight(from - 1, k);
          }
        }
        alpha[Node(b, t, u)] = LogSumOfTerms(terms, n);
      }
    }
    int n = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = Tb - durations[k];
      if (durations[k] >= 1 && t >= 0) {
        const int64_t node = Node(b, t, Ub);
        terms[n++] = alpha[node] + BlankWeight(node, k);
      }
    }
    return LogSumOfTerms(terms, n);
  }

  // beta [B, T, S + 1] of utterance b (the log-sum from each node to the
  // end) and, from alpha and the score, the gradient of its score:
  // label_occ [B, S, T] and blank_occ [B, S + 1, T], the occupations of
  // each node's label and blank steps summed over durations (the token
  // logits' gradient follows from them as in the RNN-T loss), and d_dur
  // [B, T, S + 1, K], the gradient of the duration logits (FastEmit:
  // label steps count emit times; clamped).  Nodes of utterance b only;
  // with no path (score -inf) the gradient stays as it is (zero).
  TT_HOST_DEVICE void Backward(int64_t b, const T* alpha, T score, T* beta,
                               T* label_occ, T* blank_occ, T* d_dur) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t Tb = frames[b], Ub = labels[b];
    const bool has_path = score > kNegInf;
    T label_terms[kMaxDurations], blank_terms[kMaxDurations];
    for (int64_t t = Tb - 1; t >= 0; --t) {
      for (int64_t u = Ub; u >= 0; --u) {
        const int64_t node = Node(b, t, u);
        // The steps that leave (t, u), each with the rest of its paths.
        for (int64_t k = 0; k < K; ++k) {
          const int64_t d = durations[k];
          T x = kNegInf, y = kNegInf;
          if (u < Ub && t + d < Tb) {
            x = LabelWeight(node, k) + beta[Node(b, t + d, u + 1)];
          }
          if (d >= 1 && t + d < Tb) {
            y = BlankWeight(node, k) + beta[node + d * (S + 1)];
          } else if (d >= 1 && t + d == Tb && u == Ub) {
            y = BlankWeight(node, k);  // the end
          }
          label_terms[k] = x;
          blank_terms[k] = y;
        }
        LogSum<T> sum;
        for (int64_t k = 0; k < K; ++k) {
          sum.Max(label_terms[k]);
          sum.Max(blank_terms[k]);
        }
        for (int64_t k = 0; k < K; ++k) {
          sum.Add(label_terms[k]);
          sum.Add(blank_terms[k]);
        }
        beta[node] = sum.Log();
        if (!has_path) continue;
        // Occupation of a step: exp(alpha + weight + rest - score).
        const T a = alpha[node] - score;
        T* g = d_dur + node * K;
        T gx = T(0), gy = T(0), total = T(0);
        for (int64_t k = 0; k < K; ++k) {
          const T ex = Occupation(a + label_terms[k]);
          const T ey = Occupation(a + blank_terms[k]);
          gx += ex;
          gy += ey;
          g[k] = emit * ex + ey;
          total += g[k];
        }
        const T* lp = dur + node * K;
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

  // log(sum(exp(terms[0, n)))): -inf for none, NaN for a NaN.
  TT_HOST_DEVICE static T LogSumOfTerms(const T* terms, int n) {
    LogSum<T> sum;
    for (int i = 0; i < n; ++i) sum.Max(terms[i]);
    for (int i = 0; i < n; ++i) sum.Add(terms[i]);
    return sum.Log();
  }

  // exp(x) for a log-occupation x <= 0 (up to rounding); 0 for -inf or NaN.
  TT_HOST_DEVICE static T Occupation(T x) {
    if (!(x > -std::numeric_limits<T>::infinity())) return T(0);
    return log_space_math::ExpNonPositive(x < T(0) ? x : T(0));
  }
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_
