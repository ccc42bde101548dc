// SPDX-License-Identifier: Apache-2.0
// The Token-and-Duration Transducer lattice of one utterance (Xu et al.,
// arXiv 2304.06795): its forward and backward recursions and the
// occupations of its steps, and the rows of logits that feed it, shared by
// the CPU kernel (tdt_loss_op.cc) and the CUDA kernels (gpu/tdt_loss.cu).
// From node (t, u), 0 <= t < T_b, 0 <= u <= U_b,
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
#include "cc/kernels/half_types.h"
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
// out [B, T, S + 1].  durations[0] = 0 (the zero-duration label step,
// k = 0, is the one that stays in its frame).
template <typename T>
struct TdtLattice {
  int64_t B, T_len, S, K;
  const int64_t* frames;             // [B], T_b in [1, T]
  const int64_t* labels;             // [B], U_b in [0, S]
  int64_t durations[kMaxDurations];  // [K], sorted, distinct, with 0, 1
  const T* lab;                      // [B, T, S + 1], label log-prob
  const T* blk;                      // [B, T, S + 1], blank log-prob
  const T* dur;                      // [B, T, S + 1, K], log-softmaxed
  T emit;                            // 1 + fastemit_lambda
  T clamp;                           // <= 0: no clamp

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

  // The terms alpha(from) + weight of the steps that arrive at (t, u) of
  // utterance b (and 0 for the start, (0, 0)): those from earlier frames
  // and, with `same_frame`, the zero-duration label step from (t, u - 1).
  // Returns their number, at most 2 K + 1.
  TT_HOST_DEVICE int Arriving(int64_t b, int64_t t, int64_t u, const T* alpha,
                              bool same_frame, T* terms) const {
    int n = 0;
    if (t == 0 && u == 0) terms[n++] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t d = durations[k];
      if (d == 0) {
        if (same_frame && u > 0) {
          const int64_t from = Node(b, t, u - 1);
          terms[n++] = alpha[from] + LabelWeight(from, k);
        }
      } else if (t >= d) {
        const int64_t from = Node(b, t - d, u);
        terms[n++] = alpha[from] + BlankWeight(from, k);
        if (u > 0) terms[n++] = alpha[from - 1] + LabelWeight(from - 1, k);
      }
    }
    return n;
  }

  // log P(y | x) of utterance b from its alpha: the blank steps from
  // (T_b - d, U_b) that land on T_b.
  TT_HOST_DEVICE T Score(int64_t b, const T* alpha) const {
    T terms[kMaxDurations];
    int n = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = frames[b] - durations[k];
      if (durations[k] >= 1 && t >= 0) {
        const int64_t node = Node(b, t, labels[b]);
        terms[n++] = alpha[node] + BlankWeight(node, k);
      }
    }
    return LogSumOfTerms(terms, n);
  }

  // The steps that leave (t, u) of utterance b, each with the rest of its
  // paths: label_terms[k] = weight + beta(to) of the label step with
  // duration k, blank_terms[k] that of the blank step (-inf: no such step).
  // Without `same_frame` the zero-duration label step's term is -inf (its
  // beta, in the same frame, is not known yet).
  TT_HOST_DEVICE void Leaving(int64_t b, int64_t t, int64_t u, const T* beta,
                              bool same_frame, T* label_terms,
                              T* blank_terms) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t Tb = frames[b], Ub = labels[b];
    const int64_t node = Node(b, t, u);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t d = durations[k];
      T x = kNegInf, y = kNegInf;
      if (u < Ub && t + d < Tb && (d > 0 || same_frame)) {
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
  }

  // The log-sum of a node's leaving terms (Leaving's two arrays).
  TT_HOST_DEVICE T LogSumOfSteps(const T* label_terms,
                                 const T* blank_terms) const {
    LogSum<T> sum;
    for (int64_t k = 0; k < K; ++k) {
      sum.Max(label_terms[k]);
      sum.Max(blank_terms[k]);
    }
    for (int64_t k = 0; k < K; ++k) {
      sum.Add(label_terms[k]);
      sum.Add(blank_terms[k]);
    }
    return sum.Log();
  }

  // The gradient of the score at node (t, u) of utterance b, from
  // a = alpha(t, u) - score and its leaving terms (with same_frame): the
  // occupations of its label and blank steps summed over durations into
  // label_occ [B, S, T] and blank_occ [B, S + 1, T] (the token logits'
  // gradient follows from them as in the RNN-T loss), and d_dur
  // [B, T, S + 1, K], the duration logits' (FastEmit: label steps count
  // emit times; clamped).
  TT_HOST_DEVICE void Occupy(int64_t b, int64_t t, int64_t u, T a,
                             const T* label_terms, const T* blank_terms,
                             T* label_occ, T* blank_occ, T* d_dur) const {
    const int64_t node = Node(b, t, u);
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
    if (u < labels[b]) label_occ[(b * S + u) * T_len + t] = gx;
    blank_occ[(b * (S + 1) + u) * T_len + t] = gy;
  }

  // alpha [B, T, S + 1] of utterance b (its nodes only), node by node;
  // returns the score.
  TT_HOST_DEVICE T Forward(int64_t b, T* alpha) const {
    T terms[2 * kMaxDurations + 1];
    for (int64_t t = 0; t < frames[b]; ++t) {
      for (int64_t u = 0; u <= labels[b]; ++u) {
        const int n = Arriving(b, t, u, alpha, true, terms);
        alpha[Node(b, t, u)] = LogSumOfTerms(terms, n);
      }
    }
    return Score(b, alpha);
  }

  // beta [B, T, S + 1] of utterance b (the log-sum from each node to the
  // end) and, from alpha and the score, the gradient of its score (Occupy)
  // node by node.  With no path (score -inf) the gradient stays as it is
  // (zero).
  TT_HOST_DEVICE void Backward(int64_t b, const T* alpha, T score, T* beta,
                               T* label_occ, T* blank_occ, T* d_dur) const {
    const bool has_path = score > -std::numeric_limits<T>::infinity();
    T label_terms[kMaxDurations], blank_terms[kMaxDurations];
    for (int64_t t = frames[b] - 1; t >= 0; --t) {
      for (int64_t u = labels[b]; u >= 0; --u) {
        const int64_t node = Node(b, t, u);
        Leaving(b, t, u, beta, true, label_terms, blank_terms);
        beta[node] = LogSumOfSteps(label_terms, blank_terms);
        if (has_path) {
          Occupy(b, t, u, alpha[node] - score, label_terms, blank_terms,
                 label_occ, blank_occ, d_dur);
        }
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

// A TDT batch, its lattice and what the passes write, as the CPU ops and
// the CUDA kernels (gpu/tdt_loss.cu) see it: inputs of type L, the maths in
// T; device pointers on the GPU.  Pass 1 turns the inputs into each node's
// log-probs; pass 2 runs the lattice.  The inputs are one of:
//
//   - token logits [B, T, R, C] (rows of logits: WriteRow), R = S + 1, or
//     pruned, R rows a frame at positions ranges[b, t, :] (the nodes no row
//     provides take no step: their log-probs are -inf);
//   - token log-probs px [B, S, T] (label) and py [B, S + 1, T] (blank),
//     token_logits null, R = S + 1 (WriteLogProbs).
//
// with duration logits [B, T, R, K] beside either.
template <typename T, typename L>
struct TdtProblem {
  TdtLattice<T> lattice;  // lab, blk and dur point into the buffers below
  int64_t C, R;
  const L* token_logits;     // [B, T, R, C], or null: px and py
  const L* duration_logits;  // [B, T, R, K]
  const int64_t* ranges;     // [B, T, R], or null: row j is position j
  const T* px;               // [B, S, T], with null token_logits
  const T* py;               // [B, S + 1, T]
  const int64_t* symbols;    // [B, S]
  int blank;
  T sigma;
  T* lab;        // [B, T, S + 1]
  T* blk;        // [B, T, S + 1]
  T* dur;        // [B, T, S + 1, K]
  T* norms;      // [B, T, R] (token logits only)
  T* alpha;      // [B, T, S + 1]
  T* beta;       // [B, T, S + 1]
  T* scores;     // [B]
  T* label_occ;  // [B, S, T]
  T* blank_occ;  // [B, S + 1, T]
  T* d_dur;      // [B, T, S + 1, K]

  TT_HOST_DEVICE int64_t Rows() const { return lattice.B * lattice.T_len * R; }
  // The utterance, frame and symbol position of row `row` of the inputs.
  TT_HOST_DEVICE void Locate(int64_t row, int64_t* b, int64_t* t,
                             int64_t* u) const {
    *b = row / (lattice.T_len * R);
    *t = row / R % lattice.T_len;
    *u = ranges ? ranges[row] : row % R;
  }
  // Whether node (t, u) of utterance b exists (its row is read).
  TT_HOST_DEVICE bool RowUsed(int64_t b, int64_t t, int64_t u) const {
    return t < lattice.frames[b] && u <= lattice.labels[b];
  }

  // Pass 1 for a used row of token logits, from its largest m and
  // log_sum = log(sum(exp(z - m))) (LogSumOf; m = -inf and log_sum = 0 for
  // a row of -inf): its normaliser, its node's label and blank log-probs
  // minus sigma (-inf for a row of -inf) and log-softmaxed durations.
  TT_HOST_DEVICE void WriteRow(int64_t row, int64_t b, int64_t t, int64_t u,
                               T m, T log_sum) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t node = lattice.Node(b, t, u);
    const L* z = token_logits + row * C;
    const bool empty = m == kNegInf && log_sum == T(0);
    norms[row] = m + log_sum;
    blk[node] = empty ? kNegInf : T(Widen(z[blank])) - m - log_sum - sigma;
    if (u < lattice.labels[b]) {
      const int64_t y = symbols[b * lattice.S + u];
      lab[node] = empty ? kNegInf : T(Widen(z[y])) - m - log_sum - sigma;
    }
    WriteDurations(row, node);
  }

  // Pass 1 for the used node (b, t, u) of px and py.
  TT_HOST_DEVICE void WriteLogProbs(int64_t b, int64_t t, int64_t u) const {
    const TdtLattice<T>& g = lattice;
    const int64_t node = g.Node(b, t, u);
    blk[node] = py[(b * (g.S + 1) + u) * g.T_len + t] - sigma;
    if (u < g.labels[b]) lab[node] = px[(b * g.S + u) * g.T_len + t] - sigma;
    WriteDurations(node, node);
  }

  // dur of `node`: the log-softmax of row `row` of the duration logits
  // (-inf for a row of -inf; NaN for a NaN).
  TT_HOST_DEVICE void WriteDurations(int64_t row, int64_t node) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t K = lattice.K;
    const L* w = duration_logits + row * K;
    LogSum<T> sum;
    for (int64_t k = 0; k < K; ++k) sum.Max(T(Widen(w[k])));
    for (int64_t k = 0; k < K; ++k) sum.Add(T(Widen(w[k])));
    const T w_norm = sum.Log();
    for (int64_t k = 0; k < K; ++k) {
      dur[node * K + k] = w_norm == kNegInf ? kNegInf : T(Widen(w[k])) - w_norm;
    }
  }
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_TDT_LOSS_H_
