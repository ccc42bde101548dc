// SPDX-License-Identifier: Apache-2.0
// Kernels of TfTransducerRnntLoss and TfTransducerRnntLossGrad (and their
// pruned forms), CPU and (built with GOOGLE_CUDA) GPU: the RNN-T loss on
// joiner logits, fused.  For logits l[b, t, s, :] (S + 1
// rows per frame, C classes):
//
//   n[b, t, s]   = logsumexp_c l[b, t, s, c]                    (pass 1)
//   px[b, s, t]  = l[b, t, s, y_s] - n[b, t, s]          (s < S; regular:
//                  px[:, :, T] = -inf, and -inf at t = t_end)
//   py[b, s, t]  = l[b, t, s, blank] - n[b, t, s]
//   constrained: px[b, s, t] += py[b, s + 1, t]
//   delay penalty: px[b, s, t] += ((t_end - 1) / 2 - t) * delay_penalty
//
// then the MI recursion gives the score and the occupations px_grad, py_grad
// (pass 2, mutual_information.h), and the gradient of the score is
//
//   d score / d l[b, t, s, c] = gx [c == y_s] + gy [c == blank]
//                               - (gx + gy) exp(l[b, t, s, c] - n[b, t, s])
//
// with gx = px_grad[b, s, t] and gy = py_grad[b, s, t] (+ px_grad[b, s - 1, t]
// for constrained, whose x-steps also pay the blank of the next row).  The
// loss op does passes 1 and 2 and returns n, px_grad and py_grad (all
// O(B T S)); the gradient op does pass 3, times the incoming gradient, when
// (and only when) a gradient is asked for.  Each logit is read and
// exponentiated once per pass; nothing of the logits' size is allocated but
// the gradient itself.  Rows outside a sequence's boundary are skipped in
// pass 1 and zero in the gradient.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/input_checks.h"
#include "cc/kernels/kernel_names.h"
#include "cc/kernels/log_space_math.h"
#include "cc/kernels/mutual_information_functor.h"
#include "cc/kernels/op_device.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/rnnt_recursion.h"
#include "cc/kernels/row_math.h"

namespace tf_transducer {

namespace {

// A row of C logits as the maths reads it: the row itself (L = T), or its
// values widened into `buffer` (16-bit logits).
template <typename T, typename L>
const T* WideRow(const L* row, int64_t C, std::vector<T>* buffer) {
  if constexpr (std::is_same_v<T, L>) {
    return row;
  } else {
    buffer->resize(C);
    for (int64_t c = 0; c < C; ++c) (*buffer)[c] = Widen(row[c]);
    return buffer->data();
  }
}

// Pass 1 for frame t of sequence b on the CPU: n, px and py of its R rows.
// Rows outside the boundary are skipped (their px and py stay -inf).
template <typename T, typename L>
void LogProbsOfFrame(const RnntProblem<T, L>& pr, int64_t b, int64_t t,
                     std::vector<T>* buffer) {
  for (int64_t j = 0; j < pr.R; ++j) {
    const int64_t row = (b * pr.T_len + t) * pr.R + j;
    const int64_t s = pr.PositionOf(row);
    if (!pr.RowUsed(b, t, s)) {
      pr.norms[row] = T(0);
      continue;
    }
    T m, log_sum;
    LogSumExpParts(WideRow(pr.logits + row * pr.C, pr.C, buffer), pr.C, &m,
                   &log_sum);
    pr.WriteRow(b, t, row, s, m, log_sum);
  }
}

}  // namespace

namespace functor {

// Pass 1: normalisers, px and py (px and py filled with -inf first: steps
// that no row provides stay so), then the px rows finished.
template <typename Device, typename T, typename L>
struct RnntLogProbs;

template <typename T, typename L>
struct RnntLogProbs<CpuDevice, T, L> {
  absl::Status operator()(OpKernelContext* ctx, const RnntProblem<T, L>& pr) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    std::fill(pr.px, pr.px + pr.B * pr.S * pr.T1, kNegInf);
    std::fill(pr.py, pr.py + pr.B * (pr.S + 1) * pr.T_len, kNegInf);
    ThreadPool* pool = CpuWorkers(ctx);
    const int64_t frames = pr.T_len;
    pool->ParallelFor(pr.B * frames,
                      ThreadPool::SchedulingParams::Adaptive(pr.R * pr.C * 8),
                      [&](int64_t begin, int64_t end) {
                        std::vector<T> buffer;
                        for (int64_t i = begin; i < end; ++i) {
                          LogProbsOfFrame(pr, i / frames, i % frames, &buffer);
                        }
                      });
    for (int64_t b = 0; b < pr.B; ++b) {
      for (int64_t s = 0; s < pr.S; ++s) pr.FinishPxRow(b, s);
    }
    return absl::OkStatus();
  }
};

// Pass 3, the gradient.
template <typename Device, typename T, typename L>
struct RnntGradient;

template <typename T, typename L>
struct RnntGradient<CpuDevice, T, L> {
  absl::Status operator()(OpKernelContext* ctx,
                          const RnntGradientProblem<T, L>& p) {
    constexpr bool kWide = std::is_same_v<T, L>;
    const int64_t R = p.R, C = p.C, S = p.S;
    // 16-bit logits: each row widened, its gradient computed in T, then
    // narrowed into the output (which may be the logits' own buffer).
    auto frame = [&](int64_t b, int64_t t, std::vector<T>* in,
                     std::vector<T>* out) {
      for (int64_t j = 0; j < R; ++j) {
        const int64_t row = (b * p.T_len + t) * R + j;
        const int64_t s = p.ranges ? p.ranges[row] : j;
        L* l_out = p.grad + row * C;
        const auto g = RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, S,
                                              p.T_len, p.T1, p.constrained,
                                              p.emit, p.clamp, p.scale[b]);
        if (g.gx + g.gy == T(0)) {  // no path uses this row
          std::fill(l_out, l_out + C, Narrow<L>(T(0)));
          continue;
        }
        const T* l = WideRow(p.logits + row * C, C, in);
        T* g_row;
        if constexpr (kWide) {
          g_row = l_out;
        } else {
          out->resize(C);
          g_row = out->data();
        }
        // RnntGradientRow::ElementOfRow, with its softmax term vectorised.
        ScaledNegativeSoftmax(l, C, p.norms[row], g.gx + g.gy, g_row);
        if (s < S) g_row[p.symbols[b * S + s]] += g.gx;
        g_row[p.blank] += g.gy;
        if (p.clamp > 0) {
          for (int64_t c = 0; c < C; ++c) {
            g_row[c] = g.Clamped(g_row[c], p.clamp);
          }
        }
        if constexpr (!kWide) {
          for (int64_t c = 0; c < C; ++c) l_out[c] = Narrow<L>(g_row[c]);
        }
      }
    };
    ThreadPool* pool = CpuWorkers(ctx);
    const int64_t frames = p.T_len;
    pool->ParallelFor(p.B * frames,
                      ThreadPool::SchedulingParams::Adaptive(R * C * 4),
                      [&](int64_t begin, int64_t end) {
                        std::vector<T> in, out;
                        for (int64_t i = begin; i < end; ++i) {
                          frame(i / frames, i % frames, &in, &out);
                        }
                      });
    return absl::OkStatus();
  }
};

#if GOOGLE_CUDA
template <typename T, typename L>
struct RnntLogProbs<GpuDevice, T, L> {
  absl::Status operator()(OpKernelContext* ctx, const RnntProblem<T, L>& pr) {
    return LaunchResult(gpu::RnntLogProbs(pr, GpuStream(ctx)),
                        "the RNN-T loss's first pass");
  }
};

template <typename T, typename L>
struct RnntGradient<GpuDevice, T, L> {
  absl::Status operator()(OpKernelContext* ctx,
                          const RnntGradientProblem<T, L>& p) {
    return LaunchResult(gpu::RnntGradient(p, GpuStream(ctx)),
                        "the RNN-T loss's gradient");
  }
};
#endif  // GOOGLE_CUDA

}  // namespace functor

// Full logits [B, T, S + 1, C] (kPruned = false: row j of a frame is symbol
// position s = j) or pruned logits [B, T, R, C] with ranges [B, T, R]
// (kPruned: row j is position s = ranges[b, t, j]).
// Logits of TensorFlow type TfL; the maths (and every other float input and
// output) in Scalar: float for half, bfloat16 and float logits, double for
// double.
template <typename Device, typename TfL, typename Scalar, bool kPruned>
class RnntLossOp : public RnntOpKernel<> {
  using L = typename StorageOf<TfL>::type;

 public:
  using RnntOpKernel::RnntOpKernel;

  void Compute(OpKernelContext* ctx) override {
    Inputs in;
    OP_REQUIRES_OK(ctx, CheckInputs(ctx, &in));
    Tensor* out[4];  // scores, px_grad, py_grad, normalizers
    OP_REQUIRES_OK(
        ctx, AllocateLossOutputs(ctx, in.B, in.S, in.T, in.T1, in.R, out));
    FirstPassState first;
    OP_REQUIRES_OK(ctx, FirstPass(ctx, in, out[3], &first));
    OP_REQUIRES_OK(ctx,
                   SecondPass(ctx, in, first.problem, out[0], out[1], out[2]));
  }

 private:
  // The inputs of one call, checked, and their sizes.
  struct Inputs {
    const Tensor* logits = nullptr;
    const Tensor* symbols = nullptr;
    const Tensor* boundary = nullptr;
    const Tensor* ranges = nullptr;  // kPruned only
    Scalar delay_penalty = 0;
    int64_t B = 0, T = 0, R = 0, C = 0, S = 0, T1 = 0;
  };

  // Pass 1's problem and the buffers it points into, which pass 2 reads.
  struct FirstPassState {
    RnntProblem<Scalar, L> problem;
    Tensor px, py, symbols, boundary, ranges;
  };

  // Reads the inputs into `in` and checks their shapes and values.
  absl::Status CheckInputs(OpKernelContext* ctx, Inputs* in) const {
    const Tensor* penalty;
    TF_RETURN_IF_ERROR(ctx->input("logits", &in->logits));
    TF_RETURN_IF_ERROR(ctx->input("symbols", &in->symbols));
    TF_RETURN_IF_ERROR(ctx->input("boundary", &in->boundary));
    TF_RETURN_IF_ERROR(ctx->input("delay_penalty", &penalty));
    const Tensor& logits = *in->logits;
    const Tensor& symbols = *in->symbols;
    TF_RETURN_IF_ERROR(ReadDelayPenalty(*penalty, &in->delay_penalty));
    if (logits.dims() != 4) {
      return InvalidArgument("logits must have rank 4 [B, T, ",
                             kPruned ? "s_range" : "S + 1", ", C], got ",
                             logits.shape().DebugString());
    }
    if (symbols.dims() != 2) {
      return InvalidArgument("symbols must have rank 2 [B, S], got ",
                             symbols.shape().DebugString());
    }
    const int64_t B = logits.dim_size(0), T = logits.dim_size(1),
                  R = logits.dim_size(2), C = logits.dim_size(3),
                  S = symbols.dim_size(1);
    // S = 0 (every transcript empty) is legal: each frame emits a blank.
    if (!(B > 0 && T > 0 && S >= 0 && C > 0)) {
      return InvalidArgument(
          "B, T and C must be positive (S may be 0), got logits ",
          logits.shape().DebugString(), " and symbols ",
          symbols.shape().DebugString());
    }
    if (symbols.dim_size(0) != B ||
        !(kPruned ? R >= 1 && R <= S + 1 : R == S + 1)) {
      return InvalidArgument("symbols [B, S] = ", symbols.shape().DebugString(),
                             " does not fit logits ",
                             logits.shape().DebugString(),
                             kPruned ? " (need 1 <= s_range <= S + 1)"
                                     : " (need logits [B, T, S + 1, C])");
    }
    if (kPruned) {
      TF_RETURN_IF_ERROR(ctx->input("ranges", &in->ranges));
      TF_RETURN_IF_ERROR(CheckRanges(*in->ranges, B, T, R, S));
    }
    TF_RETURN_IF_ERROR(CheckTerminationSymbol(attrs_.blank, C, "logits"));
    TF_RETURN_IF_ERROR(CheckFramesForType(attrs_.type, T, S));
    TF_RETURN_IF_ERROR(CheckSymbols(symbols.flat<int64_t>().data(), B, S, C));
    TF_RETURN_IF_ERROR(CheckBoundary(*in->boundary, B, S, T));
    in->B = B;
    in->T = T;
    in->R = R;
    in->C = C;
    in->S = S;
    in->T1 = attrs_.T1(T);
    return absl::OkStatus();
  }

  // Pass 1: the normalisers (into `norms`), px and py.
  absl::Status FirstPass(OpKernelContext* ctx, const Inputs& in, Tensor* norms,
                         FirstPassState* state) const {
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    TF_RETURN_IF_ERROR(
        ctx->allocate_temp(dt, TensorShape({in.B, in.S, in.T1}), &state->px));
    TF_RETURN_IF_ERROR(ctx->allocate_temp(
        dt, TensorShape({in.B, in.S + 1, in.T}), &state->py));
    RnntProblem<Scalar, L>& pr = state->problem;
    pr = {in.B, in.T, in.S, in.C, in.R, in.T1};
    TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(
        ctx, in.symbols->template flat<int64_t>().data(), in.B * in.S,
        &state->symbols, &pr.symbols));
    TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(
        ctx, in.boundary->template flat<int64_t>().data(), in.B * 4,
        &state->boundary, &pr.boundary));
    pr.ranges = nullptr;
    if (kPruned) {
      TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(
          ctx, in.ranges->template flat<int64_t>().data(), in.B * in.T * in.R,
          &state->ranges, &pr.ranges));
    }
    pr.logits = TensorData<TfL>(*in.logits);
    pr.px = state->px.template flat<Scalar>().data();
    pr.py = state->py.template flat<Scalar>().data();
    pr.norms = norms->flat<Scalar>().data();
    pr.blank = attrs_.blank;
    pr.type = attrs_.type;
    pr.delay_penalty = in.delay_penalty;
    return functor::RnntLogProbs<Device, Scalar, L>()(ctx, pr);
  }

  // Pass 2: the recursion over pass 1's px and py, into the scores and the
  // occupations.
  absl::Status SecondPass(OpKernelContext* ctx, const Inputs& in,
                          const RnntProblem<Scalar, L>& pr, Tensor* scores,
                          Tensor* px_grad, Tensor* py_grad) const {
    int64_t illegal;
    TF_RETURN_IF_ERROR((RnntRecursion<Device, Scalar>(ctx, pr, scores, px_grad,
                                                      py_grad, &illegal)));
    if (illegal < 0) return absl::OkStatus();
    return InvalidArgument("logits must be finite or -inf; sequence ", illegal,
                           " of logits ", in.logits->shape().DebugString(),
                           " has a NaN or +inf");
  }
};

// Pass 3: scale[b] * d scores[b] / d logits, for full or pruned logits.
template <typename Device, typename TfL, typename Scalar, bool kPruned>
class RnntLossGradOp : public RnntOpKernel<> {
  using L = typename StorageOf<TfL>::type;

 public:
  using RnntOpKernel::RnntOpKernel;

  void Compute(OpKernelContext* ctx) override {
    const Tensor* in[6];
    const char* names[6] = {"logits",  "symbols",     "px_grad",
                            "py_grad", "normalizers", "scale"};
    for (int i = 0; i < 6; ++i)
      OP_REQUIRES_OK(ctx, ctx->input(names[i], &in[i]));
    const Tensor& logits = *in[0];
    const Tensor& symbols = *in[1];
    const Tensor& px_grad = *in[2];
    const Tensor& py_grad = *in[3];
    const Tensor& norms = *in[4];
    const Tensor& scale = *in[5];
    OP_REQUIRES(ctx, logits.dims() == 4 && symbols.dims() == 2,
                InvalidArgument("logits must have rank 4 and symbols rank 2, "
                                "got ",
                                logits.shape().DebugString(), " and ",
                                symbols.shape().DebugString()));
    const int64_t B = logits.dim_size(0), T = logits.dim_size(1),
                  R = logits.dim_size(2), C = logits.dim_size(3),
                  S = symbols.dim_size(1);
    const int64_t T1 = attrs_.T1(T);
    const int64_t* ranges = nullptr;
    bool ranges_ok = !kPruned && R == S + 1;
    if (kPruned) {
      const Tensor* ranges_in;
      OP_REQUIRES_OK(ctx, ctx->input("ranges", &ranges_in));
      ranges_ok = ranges_in->shape() == TensorShape({B, T, R});
      ranges = ranges_in->flat<int64_t>().data();
      for (int64_t i = 0; ranges_ok && i < B * T * R; ++i) {
        ranges_ok = ranges[i] >= 0 && ranges[i] <= S;
      }
    }
    // Inputs come from the loss op; check them all the same.
    OP_REQUIRES(
        ctx,
        ranges_ok && symbols.dim_size(0) == B &&
            px_grad.shape() == TensorShape({B, S, T1}) &&
            py_grad.shape() == TensorShape({B, S + 1, T}) &&
            norms.shape() == TensorShape({B, T, R}) &&
            scale.shape() == TensorShape({B}),
        InvalidArgument("the RNN-T gradient op got inconsistent inputs: "
                        "logits ",
                        logits.shape().DebugString(), ", symbols ",
                        symbols.shape().DebugString(), ", px_grad ",
                        px_grad.shape().DebugString(), ", py_grad ",
                        py_grad.shape().DebugString(), ", normalizers ",
                        norms.shape().DebugString(), ", scale ",
                        scale.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckTerminationSymbol(attrs_.blank, C, "logits"));
    const int64_t* sym = symbols.flat<int64_t>().data();
    OP_REQUIRES_OK(ctx, CheckSymbols(sym, B, S, C));
    // The gradient takes the logits' buffer when nothing else holds it (in a
    // graph the logits usually die here): no new memory, no page faults.
    // Each row is read before it is written.
    Tensor* grad = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(
                            {0}, 0, logits.shape(), &grad));
    RnntGradientProblem<Scalar, L> p{B, T, S, C, R, T1};
    Tensor symbols_copy, ranges_copy;
    OP_REQUIRES_OK(ctx, functor::Int64Input<Device>()(
                            ctx, sym, B * S, &symbols_copy, &p.symbols));
    p.ranges = nullptr;
    if (kPruned) {
      OP_REQUIRES_OK(ctx, functor::Int64Input<Device>()(
                              ctx, ranges, B * T * R, &ranges_copy, &p.ranges));
    }
    p.logits = TensorData<TfL>(logits);
    p.px_grad = px_grad.flat<Scalar>().data();
    p.py_grad = py_grad.flat<Scalar>().data();
    p.norms = norms.flat<Scalar>().data();
    p.scale = scale.flat<Scalar>().data();
    p.grad = const_cast<L*>(TensorData<TfL>(*grad));
    p.blank = attrs_.blank;
    p.constrained = attrs_.type == RnntType::kConstrained;
    p.emit = Scalar(1) + static_cast<Scalar>(attrs_.fastemit_lambda);
    p.clamp = static_cast<Scalar>(attrs_.clamp);
    OP_REQUIRES_OK(ctx, functor::RnntGradient<Device, Scalar, L>()(ctx, p));
  }
};

// Kernels for logits of type TL with the maths in T
// (TF_TRANSDUCER_LOSS_TYPES).
#define TF_TRANSDUCER_REGISTER_RNNT(TL, T)                   \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                        \
      "TfTransducerRnntLoss", DEVICE_CPU, , TL, T,           \
      RnntLossOp<functor::CpuDevice, TL, T, false>);         \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                        \
      "TfTransducerRnntLossGrad", DEVICE_CPU, , TL, T,       \
      RnntLossGradOp<functor::CpuDevice, TL, T, false>);     \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                        \
      "TfTransducerRnntLossPruned", DEVICE_CPU, , TL, T,     \
      RnntLossOp<functor::CpuDevice, TL, T, true>);          \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                        \
      "TfTransducerRnntLossPrunedGrad", DEVICE_CPU, , TL, T, \
      RnntLossGradOp<functor::CpuDevice, TL, T, true>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_RNNT);
#undef TF_TRANSDUCER_REGISTER_RNNT

#if GOOGLE_CUDA
// The integer inputs and the delay penalty stay on the host, where they are
// checked before anything is launched (op_device.h).
#define TF_TRANSDUCER_REGISTER_RNNT_GPU(TL, T)                  \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                           \
      "TfTransducerRnntLoss", tensorflow::DEVICE_GPU,           \
      .HostMemory("symbols")                                    \
          .HostMemory("boundary")                               \
          .HostMemory("delay_penalty"),                         \
      TL, T, RnntLossOp<functor::GpuDevice, TL, T, false>);     \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                           \
      "TfTransducerRnntLossGrad", tensorflow::DEVICE_GPU,       \
      .HostMemory("symbols"), TL, T,                            \
      RnntLossGradOp<functor::GpuDevice, TL, T, false>);        \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                           \
      "TfTransducerRnntLossPruned", tensorflow::DEVICE_GPU,     \
      .HostMemory("symbols")                                    \
          .HostMemory("ranges")                                 \
          .HostMemory("boundary")                               \
          .HostMemory("delay_penalty"),                         \
      TL, T, RnntLossOp<functor::GpuDevice, TL, T, true>);      \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                           \
      "TfTransducerRnntLossPrunedGrad", tensorflow::DEVICE_GPU, \
      .HostMemory("symbols").HostMemory("ranges"), TL, T,       \
      RnntLossGradOp<functor::GpuDevice, TL, T, true>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_RNNT_GPU);
#undef TF_TRANSDUCER_REGISTER_RNNT_GPU
#endif  // GOOGLE_CUDA

}  // namespace tf_transducer
