// SPDX-License-Identifier: Apache-2.0
// Kernels of TfTransducerTdtLoss, TfTransducerTdtLossPruned and
// TfTransducerTdtLattice, CPU and (built with GOOGLE_CUDA) GPU: the
// Token-and-Duration Transducer loss (tdt_loss.h has the lattice), fused.
// For token logits z[b, t, u, :] and duration logits w[b, t, u, :]:
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
// columns; its pruned form for pruned logits) computes it from
// px_grad = gx, py_grad = gy and n when a gradient is asked for.  The
// duration logits' gradient (K per node) is computed here.  Nothing of the
// token logits' size is allocated.
//
// The pruned op takes R rows of logits a frame, at positions ranges[b, t, :]
// (the nodes outside them take no step); the lattice op takes the token
// log-probs px [B, S, T] and py [B, S + 1, T] instead of logits (the
// simple and the joint TDT losses form them without the logits).

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

namespace functor {

template <typename Device, typename T, typename L>
struct TdtLoss;

template <typename T, typename L>
struct TdtLoss<CpuDevice, T, L> {
  // Both passes; (*illegal)[b] is set for an utterance whose score is NaN
  // or +inf (a NaN or +inf input it reads), whose gradient stays zero.
  absl::Status operator()(OpKernelContext* ctx, const TdtProblem<T, L>& p,
                          std::vector<char>* illegal) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const TdtLattice<T>& g = p.lattice;
    const int64_t B = g.B, T_len = g.T_len, S = g.S, K = g.K;
    const int64_t nodes = B * T_len * (S + 1);
    std::fill(p.label_occ, p.label_occ + B * S * T_len, T(0));
    std::fill(p.blank_occ, p.blank_occ + B * (S + 1) * T_len, T(0));
    std::fill(p.d_dur, p.d_dur + nodes * K, T(0));
    if (p.ranges != nullptr) {  // nodes that no row provides take no step
      std::fill(p.lab, p.lab + nodes, kNegInf);
      std::fill(p.blk, p.blk + nodes, kNegInf);
      std::fill(p.dur, p.dur + nodes * K, kNegInf);
    }
    ThreadPool* pool = CpuWorkers(ctx);
    pool->ParallelFor(B * T_len,
                      ThreadPool::SchedulingParams::Adaptive(p.R * p.C * 8),
                      [&](int64_t begin, int64_t end) {
                        std::vector<T> wide(p.C);
                        for (int64_t i = begin; i < end; ++i) {
                          FirstPass(p, i, &wide);
                        }
                      });
    illegal->assign(B, 0);
    char* bad = illegal->data();
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
    return absl::OkStatus();
  }

  // Pass 1 for frame `frame` (b * T + t): its used rows' normalisers and
  // their nodes' log-probs.
  static void FirstPass(const TdtProblem<T, L>& p, int64_t frame,
                        std::vector<T>* wide) {
    const int64_t C = p.C;
    for (int64_t row = frame * p.R; row < (frame + 1) * p.R; ++row) {
      int64_t b, t, u;
      p.Locate(row, &b, &t, &u);
      if (!p.RowUsed(b, t, u)) {
        if (p.token_logits != nullptr) p.norms[row] = T(0);
        continue;
      }
      if (p.token_logits == nullptr) {
        p.WriteLogProbs(b, t, u);
        continue;
      }
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
      p.WriteRow(row, b, t, u, m, log_sum);
    }
  }
};

#if GOOGLE_CUDA
template <typename T, typename L>
struct TdtLoss<GpuDevice, T, L> {
  absl::Status operator()(OpKernelContext* ctx, const TdtProblem<T, L>& p,
                          std::vector<char>* illegal) {
    Tensor flags;
    TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DT_INT8,
                                          TensorShape({p.lattice.B}), &flags));
    char* device_flags = reinterpret_cast<char*>(flags.flat<int8_t>().data());
    void* stream = GpuStream(ctx);
    TF_RETURN_IF_ERROR(
        LaunchResult(gpu::TdtLoss(p, device_flags, stream), "the TDT loss"));
    // The flags decide between a result and an error: wait for them.
    illegal->resize(p.lattice.B);
    return LaunchResult(
        gpu::CopyToHost(illegal->data(), device_flags, p.lattice.B, stream),
        "a copy from the GPU");
  }
};
#endif  // GOOGLE_CUDA

}  // namespace functor

namespace {

// lengths: int64 [B], each in [lo, hi].
absl::Status CheckLengths(const Tensor& lengths, const char* name, int64_t B,
                          int64_t lo, int64_t hi) {
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

}  // namespace

// The attributes and the shared steps of the TDT ops: the attributes read
// and checked once; then, from a problem whose inputs are set, the scratch,
// the outputs and both passes.
template <typename Device, typename Scalar, typename L>
class TdtOpKernel : public OpKernel {
 public:
  explicit TdtOpKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::vector<int> values;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("durations", &values));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("sigma", &sigma_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clamp", &clamp_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fastemit_lambda", &fastemit_lambda_));
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
    OP_REQUIRES(ctx, sigma_ >= 0 && fastemit_lambda_ >= 0,
                InvalidArgument("sigma and fastemit_lambda must be >= 0, got ",
                                sigma_, " and ", fastemit_lambda_));
    durations_.assign(values.begin(), values.end());
  }

 protected:
  // Checks the lengths and the duration logits' K, and sets the lattice's
  // sizes, options and lengths (copies on the GPU, in copies[0, 2)).
  absl::Status SetLattice(OpKernelContext* ctx, int64_t B, int64_t T, int64_t S,
                          const Tensor& duration_logits, Tensor* copies,
                          TdtProblem<Scalar, L>* p) const {
    const Tensor* frames_in;
    const Tensor* labels_in;
    TF_RETURN_IF_ERROR(ctx->input("logit_lengths", &frames_in));
    TF_RETURN_IF_ERROR(ctx->input("label_lengths", &labels_in));
    const Tensor &frames = *frames_in, &labels = *labels_in;
    const int64_t K = durations_.size();
    if (duration_logits.dims() != 4 || duration_logits.dim_size(3) != K) {
      return InvalidArgument(
          "duration_logits must have shape [B, T, rows, K] "
          "with K = ",
          K, " (one class per duration), got ",
          duration_logits.shape().DebugString());
    }
    TF_RETURN_IF_ERROR(CheckLengths(frames, "logit_lengths", B, 1, T));
    TF_RETURN_IF_ERROR(CheckLengths(labels, "label_lengths", B, 0, S));
    TdtLattice<Scalar>& g = p->lattice;
    g.B = B, g.T_len = T, g.S = S, g.K = K;
    std::copy(durations_.begin(), durations_.end(), g.durations);
    g.emit = Scalar(1) + static_cast<Scalar>(fastemit_lambda_);
    g.clamp = static_cast<Scalar>(clamp_);
    p->sigma = static_cast<Scalar>(sigma_);
    TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(
        ctx, frames.flat<int64_t>().data(), B, &copies[0], &g.frames));
    return functor::Int64Input<Device>()(ctx, labels.flat<int64_t>().data(), B,
                                         &copies[1], &g.labels);
  }

  // Allocates the scratch and the outputs scores [B], px_grad [B, S, T],
  // py_grad [B, S + 1, T] and duration_grad [B, T, S + 1, K] (outputs
  // 0, 1, 2 and `duration_grad_output`), and runs both passes; `inputs`
  // names the float inputs for the error of a NaN or +inf in them.
  void Run(OpKernelContext* ctx, int duration_grad_output, const char* inputs,
           TdtProblem<Scalar, L>* p) {
    TdtLattice<Scalar>& g = p->lattice;
    const int64_t B = g.B, T = g.T_len, S = g.S, K = g.K;
    const TensorShape nodes({B, T, S + 1}), per_duration({B, T, S + 1, K});
    Tensor* scores;
    Tensor* px_grad;
    Tensor* py_grad;
    Tensor* d_dur;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({B}), &scores));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, TensorShape({B, S, T}), &px_grad));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(2, TensorShape({B, S + 1, T}), &py_grad));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(duration_grad_output, per_duration, &d_dur));
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    Tensor lab, blk, dur, alpha, beta;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &lab));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &blk));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, per_duration, &dur));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &alpha));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, nodes, &beta));
    g.lab = p->lab = lab.flat<Scalar>().data();
    g.blk = p->blk = blk.flat<Scalar>().data();
    g.dur = p->dur = dur.flat<Scalar>().data();
    p->alpha = alpha.flat<Scalar>().data();
    p->beta = beta.flat<Scalar>().data();
    p->scores = scores->flat<Scalar>().data();
    p->label_occ = px_grad->flat<Scalar>().data();
    p->blank_occ = py_grad->flat<Scalar>().data();
    p->d_dur = d_dur->flat<Scalar>().data();
    std::vector<char> illegal;
    OP_REQUIRES_OK(ctx,
                   (functor::TdtLoss<Device, Scalar, L>()(ctx, *p, &illegal)));
    const auto first = std::find(illegal.begin(), illegal.end(), 1);
    OP_REQUIRES(ctx, first == illegal.end(),
                InvalidArgument(inputs, " must be finite or -inf; utterance ",
                                first - illegal.begin(), " has a NaN or +inf"));
  }

 private:
  std::vector<int64_t> durations_;
  float sigma_, clamp_, fastemit_lambda_;
};

// TfTransducerTdtLoss (full logits) and TfTransducerTdtLossPruned (kPruned).
template <typename Device, typename TfL, typename Scalar, bool kPruned>
class TdtLossOp
    : public TdtOpKernel<Device, Scalar, typename StorageOf<TfL>::type> {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit TdtLossOp(OpKernelConstruction* ctx)
      : TdtOpKernel<Device, Scalar, L>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("blank", &blank_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tokens = ctx->input(0);
    const Tensor& durations = ctx->input(1);
    const Tensor& symbols = ctx->input(2);
    OP_REQUIRES(ctx, tokens.dims() == 4 && durations.dims() == 4,
                InvalidArgument("token_logits [B, T, rows, C] and "
                                "duration_logits [B, T, rows, K] must have "
                                "rank 4, got ",
                                tokens.shape().DebugString(), " and ",
                                durations.shape().DebugString()));
    OP_REQUIRES(ctx, symbols.dims() == 2,
                InvalidArgument("symbols must have shape [B, S], got ",
                                symbols.shape().DebugString()));
    const int64_t B = tokens.dim_size(0), T = tokens.dim_size(1),
                  R = tokens.dim_size(2), C = tokens.dim_size(3);
    const int64_t S = kPruned ? symbols.dim_size(1) : R - 1;
    OP_REQUIRES(ctx, B > 0 && T > 0 && R > 0 && C > 0,
                InvalidArgument("token_logits [B, T, rows, C] must have B, "
                                "T, rows and C positive, got ",
                                tokens.shape().DebugString()));
    OP_REQUIRES(
        ctx,
        durations.dim_size(0) == B && durations.dim_size(1) == T &&
            durations.dim_size(2) == R,
        InvalidArgument("duration_logits ", durations.shape().DebugString(),
                        " must share [B, T, rows] with token_logits ",
                        tokens.shape().DebugString()));
    OP_REQUIRES(ctx, symbols.shape() == TensorShape({B, S}),
                InvalidArgument("symbols must have shape [B, S] = [", B, ", ",
                                S, "], got ", symbols.shape().DebugString()));
    OP_REQUIRES(ctx, blank_ >= 0 && blank_ < C,
                InvalidArgument("blank must lie in [0, C) with C = ", C,
                                ", got ", blank_));
    OP_REQUIRES_OK(ctx, CheckSymbols(symbols.flat<int64_t>().data(), B, S, C));
    TdtProblem<Scalar, L> p{};
    Tensor copies[4];
    OP_REQUIRES_OK(ctx, this->SetLattice(ctx, B, T, S, durations, copies, &p));
    OP_REQUIRES_OK(
        ctx, functor::Int64Input<Device>()(ctx, symbols.flat<int64_t>().data(),
                                           B * S, &copies[2], &p.symbols));
    p.ranges = nullptr;
    if (kPruned) {
      const Tensor& ranges = ctx->input(3);
      OP_REQUIRES_OK(ctx, CheckRanges(ranges, B, T, R, S));
      OP_REQUIRES_OK(
          ctx, functor::Int64Input<Device>()(ctx, ranges.flat<int64_t>().data(),
                                             B * T * R, &copies[3], &p.ranges));
    }
    Tensor* norms;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(3, TensorShape({B, T, R}), &norms));
    p.C = C;
    p.R = R;
    p.token_logits = TensorData<TfL>(tokens);
    p.duration_logits = TensorData<TfL>(durations);
    p.blank = blank_;
    p.norms = norms->flat<Scalar>().data();
    this->Run(ctx, 4, "token_logits and duration_logits", &p);
  }

 private:
  int blank_;
};

// TfTransducerTdtLattice: the lattice of token log-probs px and py.
template <typename Device, typename Scalar>
class TdtLatticeOp : public TdtOpKernel<Device, Scalar, Scalar> {
 public:
  using TdtOpKernel<Device, Scalar, Scalar>::TdtOpKernel;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& px = ctx->input(0);
    const Tensor& py = ctx->input(1);
    const Tensor& durations = ctx->input(2);
    OP_REQUIRES(ctx,
                py.dims() == 3 && py.dim_size(0) > 0 && py.dim_size(1) > 0 &&
                    py.dim_size(2) > 0,
                InvalidArgument("py must have shape [B, S + 1, T] with B and "
                                "T positive, got ",
                                py.shape().DebugString()));
    const int64_t B = py.dim_size(0), S = py.dim_size(1) - 1,
                  T = py.dim_size(2);
    OP_REQUIRES(
        ctx, px.shape() == TensorShape({B, S, T}),
        InvalidArgument("px must have shape [B, S, T] = [", B, ", ", S, ", ", T,
                        "] to match py ", py.shape().DebugString(), ", got ",
                        px.shape().DebugString()));
    OP_REQUIRES(
        ctx,
        durations.dims() == 4 && durations.dim_size(0) == B &&
            durations.dim_size(1) == T && durations.dim_size(2) == S + 1,
        InvalidArgument("duration_logits must have shape [B, T, S + 1, K] "
                        "with [B, T, S + 1] = [",
                        B, ", ", T, ", ", S + 1, "] from py, got ",
                        durations.shape().DebugString()));
    TdtProblem<Scalar, Scalar> p{};
    Tensor copies[2];
    OP_REQUIRES_OK(ctx, this->SetLattice(ctx, B, T, S, durations, copies, &p));
    p.C = 0;
    p.R = S + 1;
    p.token_logits = nullptr;
    p.ranges = nullptr;
    p.px = px.flat<Scalar>().data();
    p.py = py.flat<Scalar>().data();
    p.duration_logits = durations.flat<Scalar>().data();
    this->Run(ctx, 3, "px, py and duration_logits", &p);
  }
};

#define TF_TRANSDUCER_REGISTER_TDT(TL, T)               \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                   \
      "TfTransducerTdtLoss", DEVICE_CPU, , TL, T,       \
      TdtLossOp<functor::CpuDevice, TL, T, false>);     \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                   \
      "TfTransducerTdtLossPruned", DEVICE_CPU, , TL, T, \
      TdtLossOp<functor::CpuDevice, TL, T, true>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_TDT);
#undef TF_TRANSDUCER_REGISTER_TDT

#define TF_TRANSDUCER_REGISTER_TDT_LATTICE(T)                 \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerTdtLattice")      \
                              .Device(tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T"),        \
                          TdtLatticeOp<functor::CpuDevice, T>)

TF_TRANSDUCER_REGISTER_TDT_LATTICE(float);
TF_TRANSDUCER_REGISTER_TDT_LATTICE(double);
#undef TF_TRANSDUCER_REGISTER_TDT_LATTICE

#if GOOGLE_CUDA
// The integer inputs stay on the host, where they are checked.
#define TF_TRANSDUCER_REGISTER_TDT_GPU(TL, T)              \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                      \
      "TfTransducerTdtLoss", tensorflow::DEVICE_GPU,       \
      .HostMemory("symbols")                               \
          .HostMemory("logit_lengths")                     \
          .HostMemory("label_lengths"),                    \
      TL, T, TdtLossOp<functor::GpuDevice, TL, T, false>); \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                      \
      "TfTransducerTdtLossPruned", tensorflow::DEVICE_GPU, \
      .HostMemory("symbols")                               \
          .HostMemory("ranges")                            \
          .HostMemory("logit_lengths")                     \
          .HostMemory("label_lengths"),                    \
      TL, T, TdtLossOp<functor::GpuDevice, TL, T, true>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_TDT_GPU);
#undef TF_TRANSDUCER_REGISTER_TDT_GPU

#define TF_TRANSDUCER_REGISTER_TDT_LATTICE_GPU(T)             \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerTdtLattice")      \
                              .Device(tensorflow::DEVICE_GPU) \
                              .HostMemory("logit_lengths")    \
                              .HostMemory("label_lengths")    \
                              .TypeConstraint<T>("T"),        \
                          TdtLatticeOp<functor::GpuDevice, T>)

TF_TRANSDUCER_REGISTER_TDT_LATTICE_GPU(float);
TF_TRANSDUCER_REGISTER_TDT_LATTICE_GPU(double);
#undef TF_TRANSDUCER_REGISTER_TDT_LATTICE_GPU
#endif  // GOOGLE_CUDA

}  // namespace tf_transducer
