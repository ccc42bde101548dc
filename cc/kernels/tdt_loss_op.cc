// SPDX-License-Identifier: Apache-2.0
// Kernel of TfTransducerTdtLoss on the CPU: the Token-and-Duration
// Transducer loss (tdt_loss.h has the lattice), fused.  For token logits
// z[b, t, u, :] and duration logits w[b, t, u, :]:
//
//   n[b, t, u]      = logsumexp_c z[b, t, u, c]                   (pass 1)
//   lab[b, t, u]    = z[b, t, u, y_u] - n[b, t, u] - sigma
//   blk[b, t, u]    = z[b, t, u, blank] - n[b, t, u] - sigma
//   dur[b, t, u, k] = log_softmax(w[b, t, u, :])[k]
//
// then, per utterance, alpha, beta and the occupations of every step
// (pass 2).  The token logits' gradient is the RNN-T loss's:
//
//   d score / d z[b, t, u, c] = gx [c == y_u] + gy [c == blank]
//                               - (gx + gy) exp(z[b, t, u, c] - n[b, t, u])
//
// with gx, gy the occupations of the label and blank steps leaving node
// (t, u): TfTransducerRnntLossGrad (rnnt_type "modified", whose px has T
// columns) computes it from px_grad = gx, py_grad = gy and n when a
// gradient is asked for.  The duration logits' gradient (K per node) is
// computed here.  Nothing of the token logits' size is allocated.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"
#include "cc/kernels/half_types.h"
#include "cc/kernels/input_checks.h"
#include "cc/kernels/kernel_names.h"
#include "cc/kernels/op_device.h"
#include "cc/kernels/row_math.h"
#include "cc/kernels/tdt_loss.h"

namespace tf_transducer {

// A TDT batch as pass 1 reads it and pass 2 writes it.
template <typename T, typename L>
struct TdtProblem {
  TdtLattice<T> lattice;  // lab, blk and dur point into the buffers below
  int64_t C;
  const L* token_logits;     // [B, T, S + 1, C]
  const L* duration_logits;  // [B, T, S + 1, K]
  const int64_t* symbols;    // [B, S]
  int blank;
  T sigma;
  T* lab;        // [B, T, S + 1]
  T* blk;        // [B, T, S + 1]
  T* dur;        // [B, T, S + 1, K]
  T* norms;      // [B, T, S + 1]
  T* alpha;      // [B, T, S + 1]
  T* beta;       // [B, T, S + 1]
  T* scores;     // [B]
  T* label_occ;  // [B, S, T]
  T* blank_occ;  // [B, S + 1, T]
  T* d_dur;      // [B, T, S + 1, K]
};

namespace functor {

template <typename Device, typename T, typename L>
struct TdtLoss;

template <typename T, typename L>
struct TdtLoss<CpuDevice, T, L> {
  // Both passes; *illegal is the first utterance whose score is NaN or
  // +inf (a NaN or +inf logit it reads), or -1.
  absl::Status operator()(OpKernelContext* ctx, const TdtProblem<T, L>& p,
                          int64_t* illegal) {
    const TdtLattice<T>& g = p.lattice;
    const int64_t B = g.B, T_len = g.T_len, S = g.S, K = g.K, C = p.C;
    std::fill(p.label_occ, p.label_occ + B * S * T_len, T(0));
    std::fill(p.blank_occ, p.blank_occ + B * (S + 1) * T_len, T(0));
    std::fill(p.d_dur, p.d_dur + B * T_len * (S + 1) * K, T(0));
    std::fill(p.norms, p.norms + B * T_len * (S + 1), T(0));
    ThreadPool* pool = CpuWorkers(ctx);
    pool->ParallelFor(B * T_len,
                      ThreadPool::SchedulingParams::Adaptive((S + 1) * C * 8),
                      [&](int64_t begin, int64_t end) {
                        std::vector<T> wide(std::max(C, K));
                        for (int64_t i = begin; i < end; ++i) {
                          FirstPass(p, i / T_len, i % T_len, &wide);
                        }
                      });
    std::vector<char> bad(B, 0);
    pool->ParallelFor(
        B, ThreadPool::SchedulingParams::Adaptive(T_len * (S + 1) * K * 60),
        [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; ++b) {
            const T score = g.Forward(b, p.alpha);
            p.scores[b] = score;
            if (score != score || score == std::numeric_limits<T>::infinity()) {
              bad[b] = 1;
              continue;
            }
            g.Backward(b, p.alpha, score, p.beta, p.label_occ, p.blank_occ,
                       p.d_dur);
          }
        });
    const auto first = std::find(bad.begin(), bad.end(), 1);
    *illegal = first == bad.end() ? -1 : first - bad.begin();
    return absl::OkStatus();
  }

  // The rows of frame t of utterance b that its lattice uses: normaliser,
  // label and blank log-probs, log-softmaxed durations.
  static void FirstPass(const TdtProblem<T, L>& p, int64_t b, int64_t t,
                        std::vector<T>* wide) {
    const TdtLattice<T>& g = p.lattice;
    const int64_t S = g.S, K = g.K, C = p.C, T_len = g.T_len;
    if (t >= g.frames[b]) return;
    for (int64_t u = 0; u <= g.labels[b]; ++u) {
      const int64_t row = (b * T_len + t) * (S + 1) + u;
      const L* z = p.token_logits + row * C;
      const T* zw;
      if constexpr (std::is_same_v<T, L>) {
        zw = z;
      } else {
        for (int64_t c = 0; c < C; ++c) (*wide)[c] = Widen(z[c]);
        zw = wide->data();
      }
      T m, log_sum;
      LogSumExpParts(zw, C, &m, &log_sum);
      const T norm = m + log_sum;
      p.norms[row] = norm;
      p.blk[row] = zw[p.blank] - norm - p.sigma;
      if (u < g.labels[b])
        p.lab[row] = zw[p.symbols[b * S + u]] - norm - p.sigma;
      const L* w = p.duration_logits + row * K;
      T w_max = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < K; ++k) w_max = std::max(w_max, T(Widen(w[k])));
      T sum = T(0);
      for (int64_t k = 0; k < K; ++k) sum += std::exp(T(Widen(w[k])) - w_max);
      const T w_norm = w_max + std::log(sum);
      for (int64_t k = 0; k < K; ++k) {
        p.dur[row * K + k] = T(Widen(w[k])) - w_norm;
      }
    }
  }
};

}  // namespace functor

// The attributes of the TDT loss op, read and checked once.
struct TdtAttrs {
  int blank;
  std::vector<int64_t> durations;
  float sigma, clamp, fastemit_lambda;

  explicit TdtAttrs(OpKernelConstruction* ctx) {
    std::vector<int> values;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("blank", &blank));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("durations", &values));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("sigma", &sigma));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clamp", &clamp));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fastemit_lambda", &fastemit_lambda));
    bool ok = values.size() >= 2 && values[0] == 0 && values[1] == 1 &&
              values.size() <= kMaxDurations;
    for (size_t k = 1; ok && k < values.size(); ++k) {
      ok = values[k] > values[k - 1];
    }
    OP_REQUIRES(ctx, ok,
                InvalidArgument("durations must be sorted, distinct, >= 0, "
                                "hold 0 and 1, and at most ",
                                kMaxDurations, " values, got [",
                                absl::StrJoin(values, ", "), "]"));
    OP_REQUIRES(ctx, sigma >= 0 && fastemit_lambda >= 0,
                InvalidArgument("sigma and fastemit_lambda must be >= 0, got ",
                                sigma, " and ", fastemit_lambda));
    durations.assign(values.begin(), values.end());
  }
};

template <typename Device, typename TfL, typename Scalar>
class TdtLossOp : public OpKernel {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit TdtLossOp(OpKernelConstruction* ctx) : OpKernel(ctx), attrs_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tokens = ctx->input(0);
    const Tensor& durations = ctx->input(1);
    const Tensor& symbols = ctx->input(2);
    const Tensor& frames = ctx->input(3);
    const Tensor& labels = ctx->input(4);
    OP_REQUIRES(ctx, tokens.dims() == 4 && durations.dims() == 4,
                InvalidArgument("token_logits [B, T, S + 1, C] and "
                                "duration_logits [B, T, S + 1, K] must have "
                                "rank 4, got ",
                                tokens.shape().DebugString(), " and ",
                                durations.shape().DebugString()));
    const int64_t B = tokens.dim_size(0), T = tokens.dim_size(1),
                  S = tokens.dim_size(2) - 1, C = tokens.dim_size(3),
                  K = durations.dim_size(3);
    OP_REQUIRES(ctx, B > 0 && T > 0 && S >= 0 && C > 0,
                InvalidArgument("token_logits [B, T, S + 1, C] must have B, "
                                "T, S + 1 and C positive, got ",
                                tokens.shape().DebugString()));
    OP_REQUIRES(
        ctx,
        durations.dim_size(0) == B && durations.dim_size(1) == T &&
            durations.dim_size(2) == S + 1,
        InvalidArgument("duration_logits ", durations.shape().DebugString(),
                        " must share [B, T, S + 1] with token_logits ",
                        tokens.shape().DebugString()));
    OP_REQUIRES(ctx, K == static_cast<int64_t>(attrs_.durations.size()),
                InvalidArgument(
                    "duration_logits must have K = ", attrs_.durations.size(),
                    " classes (one per duration), got ", K));
    OP_REQUIRES(ctx, symbols.shape() == TensorShape({B, S}),
                InvalidArgument("symbols must have shape [B, S] = [", B, ", ",
                                S, "], got ", symbols.shape().DebugString()));
    OP_REQUIRES(ctx, attrs_.blank >= 0 && attrs_.blank < C,
                InvalidArgument("blank must lie in [0, C) with C = ", C,
                                ", got ", attrs_.blank));
    OP_REQUIRES_OK(ctx, CheckSymbols(symbols.flat<int64_t>().data(), B, S, C));
    OP_REQUIRES_OK(ctx, CheckLengths(frames, "logit_lengths", B, 1, T));
    OP_REQUIRES_OK(ctx, CheckLengths(labels, "label_lengths", B, 0, S));

    const TensorShape nodes({B, T, S + 1});
    Tensor* out[5];
    const TensorShape shapes[5] = {TensorShape({B}), TensorShape({B, S, T}),
                                   TensorShape({B, S + 1, T}), nodes,
                                   TensorShape({B, T, S + 1, K})};
    for (int i = 0; i < 5; ++i) {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, shapes[i], &out[i]));
    }
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    Tensor lab, blk, dur, alpha, beta;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &lab));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &blk));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, shapes[4], &dur));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &alpha));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &beta));

    TdtProblem<Scalar, L> p;
    p.lab = lab.flat<Scalar>().data();
    p.blk = blk.flat<Scalar>().data();
    p.dur = dur.flat<Scalar>().data();
    p.lattice = {B,
                 T,
                 S,
                 K,
                 frames.flat<int64_t>().data(),
                 labels.flat<int64_t>().data(),
                 attrs_.durations.data(),
                 p.lab,
                 p.blk,
                 p.dur,
                 Scalar(1) + static_cast<Scalar>(attrs_.fastemit_lambda),
                 static_cast<Scalar>(attrs_.clamp)};
    p.C = C;
    p.token_logits = TensorData<TfL>(tokens);
    p.duration_logits = TensorData<TfL>(durations);
    p.symbols = symbols.flat<int64_t>().data();
    p.blank = attrs_.blank;
    p.sigma = static_cast<Scalar>(attrs_.sigma);
    p.alpha = alpha.flat<Scalar>().data();
    p.beta = beta.flat<Scalar>().data();
    p.scores = out[0]->flat<Scalar>().data();
    p.label_occ = out[1]->flat<Scalar>().data();
    p.blank_occ = out[2]->flat<Scalar>().data();
    p.norms = out[3]->flat<Scalar>().data();
    p.d_dur = out[4]->flat<Scalar>().data();
    int64_t illegal;
    OP_REQUIRES_OK(ctx,
                   (functor::TdtLoss<Device, Scalar, L>()(ctx, p, &illegal)));
    OP_REQUIRES(ctx, illegal < 0,
                InvalidArgument("token_logits and duration_logits must be "
                                "finite or -inf; utterance ",
                                illegal, " has a NaN or +inf"));
  }

 private:
  // lengths: int64 [B], each in [lo, hi].
  static absl::Status CheckLengths(const Tensor& lengths, const char* name,
                                   int64_t B, int64_t lo, int64_t hi) {
    if (lengths.shape() != TensorShape({B})) {
      return InvalidArgument(name, " must have shape [B] = [", B, "], got ",
                             lengths.shape().DebugString());
    }
    const int64_t* x = lengths.flat<int64_t>().data();
    for (int64_t b = 0; b < B; ++b) {
      if (x[b] < lo || x[b] > hi) {
        return InvalidArgument(name, " must lie in [", lo, ", ", hi, "], got ",
                               x[b], " at index ", b);
      }
    }
    return absl::OkStatus();
  }

  const TdtAttrs attrs_;
};

#define TF_TRANSDUCER_REGISTER_TDT(TL, T)                                     \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL("TfTransducerTdtLoss", DEVICE_CPU, , TL, \
                                     T, TdtLossOp<functor::CpuDevice, TL, T>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_TDT);
#undef TF_TRANSDUCER_REGISTER_TDT

}  // namespace tf_transducer
