// SPDX-License-Identifier: Apache-2.0
// Kernels of TfTransducerRnntJointLoss and TfTransducerRnntJointLossGrad,
// CPU and (built with GOOGLE_CUDA) GPU: the RNN-T loss fused with its joint
// network.  For encoder projections e[b, t] and prediction-network
// projections p[b, s] (J values each), output weights W [J, C] and bias c
// [C]:
//
//   h[b, t, s]   = act(e[b, t] + p[b, s])                       [J]
//   l[b, t, s]   = h[b, t, s] W + c                             [C]
//
// and then the loss of TfTransducerRnntLoss on l (rnnt_loss_op.cc has its
// formulas: normalisers n, px, py, the recursion, and the gradient G of the
// score with respect to l, clamp and FastEmit included).  Backwards:
//
//   dW  = sum over cells of h^T G          dc = sum over cells of G
//   dh  = G W^T,   da = dh * act'(h)       (act' from h: tanh' = 1 - h^2)
//   de[b, t] = sum_s da[b, t, s]           dp[b, s] = sum_t da[b, t, s]
//
// Neither l nor h is ever stored whole: the loss op keeps of each tile (CPU,
// rnnt_joint_cpu.h) or chunk (GPU, gpu/rnnt_joint.cu) of cells only its
// normalisers, px and py; the gradient op forms each again.  This file
// checks the inputs (symbols, boundary and delay_penalty are host memory on
// every device), allocates the outputs and O(B T S) buffers, and calls
// functor::RnntJointLoss / RnntJointLossGrad (rnnt_joint_functor.h) and the
// recursion.

#include <string>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/input_checks.h"
#include "cc/kernels/kernel_names.h"
#include "cc/kernels/op_device.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_joint_functor.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/rnnt_recursion.h"
#include "cc/kernels/tile_gemm.h"

namespace tf_transducer {

namespace {

// The joint's input tensors and their sizes.
struct JointTensors {
  const Tensor *encoder, *predictor, *weight, *bias, *symbols;
  int64_t B, T_len, S, C, J;
};

// Reads and checks the shapes of the joint's inputs: encoder [B, T, J],
// predictor [B, S + 1, J], weight [J, C], bias [C], symbols [B, S].
absl::Status GetJointTensors(OpKernelContext* ctx, JointTensors* x) {
  TF_RETURN_IF_ERROR(ctx->input("encoder", &x->encoder));
  TF_RETURN_IF_ERROR(ctx->input("predictor", &x->predictor));
  TF_RETURN_IF_ERROR(ctx->input("weight", &x->weight));
  TF_RETURN_IF_ERROR(ctx->input("bias", &x->bias));
  TF_RETURN_IF_ERROR(ctx->input("symbols", &x->symbols));
  const Tensor *encoder = x->encoder, *predictor = x->predictor,
               *weight = x->weight, *bias = x->bias, *symbols = x->symbols;
  const auto shape = [](const Tensor* t) { return t->shape().DebugString(); };
  if (encoder->dims() != 3 || predictor->dims() != 3 || weight->dims() != 2 ||
      bias->dims() != 1 || symbols->dims() != 2) {
    return InvalidArgument(
        "encoder [B, T, J], predictor [B, S + 1, J], weight [J, C], bias [C] "
        "and symbols [B, S] have the wrong ranks: encoder ",
        shape(encoder), ", predictor ", shape(predictor), ", weight ",
        shape(weight), ", bias ", shape(bias), ", symbols ", shape(symbols));
  }
  const int64_t B = encoder->dim_size(0), T_len = encoder->dim_size(1),
                J = encoder->dim_size(2), S = symbols->dim_size(1),
                C = weight->dim_size(1);
  // S = 0 (every transcript empty) is legal: each frame emits a blank.
  if (!(B > 0 && T_len > 0 && S >= 0 && C > 0 && J > 0)) {
    return InvalidArgument(
        "B, T, J and C must be positive (S may be 0), got encoder [B, T, J] = ",
        shape(encoder), ", symbols [B, S] = ", shape(symbols),
        " and weight [J, C] = ", shape(weight));
  }
  if (predictor->shape() != TensorShape({B, S + 1, J})) {
    return InvalidArgument("predictor must have shape [B, S + 1, J] = [", B,
                           ", ", S + 1, ", ", J, "] to match encoder ",
                           shape(encoder), " and symbols ", shape(symbols),
                           ", got ", shape(predictor));
  }
  if (weight->dim_size(0) != J || bias->dim_size(0) != C ||
      symbols->dim_size(0) != B) {
    return InvalidArgument("weight must be [J, C] with J = ", J,
                           " (from encoder), bias [C] and symbols [B, S] with "
                           "B = ",
                           B, "; got weight ", shape(weight), ", bias ",
                           shape(bias), ", symbols ", shape(symbols));
  }
  x->B = B;
  x->T_len = T_len;
  x->S = S;
  x->C = C;
  x->J = J;
  return absl::OkStatus();
}

// The joint's inputs as the functors read them (device pointers on the GPU).
template <typename TfL>
RnntJointInputs<typename StorageOf<TfL>::type> JointInputsOf(
    const JointTensors& x, JointActivation activation) {
  return {x.B,
          x.T_len,
          x.S,
          x.C,
          x.J,
          TensorData<TfL>(*x.encoder),
          TensorData<TfL>(*x.predictor),
          TensorData<TfL>(*x.weight),
          TensorData<TfL>(*x.bias),
          activation};
}

// The attributes both ops take: RnntAttrs', the activation and allow_tf32.
struct JointAttrs : RnntAttrs {
  JointActivation activation;
  bool allow_tf32;  // the GPU's float32 products in TF32 (the CPU ignores it)

  explicit JointAttrs(OpKernelConstruction* ctx) : RnntAttrs(ctx) {
    std::string activation_name;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("activation", &activation_name));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("allow_tf32", &allow_tf32));
    activation = ParseJointActivation(activation_name);
    // A TF_TRANSDUCER_CPU_GEMM this CPU cannot follow fails every joint op.
    const std::string gemm_error = tile_gemm::EnvironmentError();
    OP_REQUIRES(ctx, gemm_error.empty(),
                absl::InvalidArgumentError(gemm_error));
  }
};

// The loss op's checks beyond GetJointTensors: returns the boundary and the
// delay penalty.
template <typename Scalar>
absl::Status CheckLossInputs(OpKernelContext* ctx, const JointAttrs& attrs,
                             const JointTensors& x, const Tensor** boundary,
                             Scalar* delay_penalty) {
  const Tensor* penalty;
  TF_RETURN_IF_ERROR(ctx->input("boundary", boundary));
  TF_RETURN_IF_ERROR(ctx->input("delay_penalty", &penalty));
  TF_RETURN_IF_ERROR(ReadDelayPenalty(*penalty, delay_penalty));
  TF_RETURN_IF_ERROR(CheckTerminationSymbol(attrs.blank, x.C, "weight"));
  TF_RETURN_IF_ERROR(CheckFramesForType(attrs.type, x.T_len, x.S));
  TF_RETURN_IF_ERROR(
      CheckSymbols(x.symbols->flat<int64_t>().data(), x.B, x.S, x.C));
  return CheckBoundary(**boundary, x.B, x.S, x.T_len);
}

// The gradient op's inputs from the loss op: px_grad [B, S, T1], py_grad
// [B, S + 1, T], normalizers [B, T, S + 1] and scale [B], checked with the
// symbols and the blank.
struct JointGradTensors {
  const Tensor *px_grad, *py_grad, *norms, *scale;
};

absl::Status CheckGradInputs(OpKernelContext* ctx, const JointAttrs& attrs,
                             const JointTensors& x, JointGradTensors* g) {
  TF_RETURN_IF_ERROR(ctx->input("px_grad", &g->px_grad));
  TF_RETURN_IF_ERROR(ctx->input("py_grad", &g->py_grad));
  TF_RETURN_IF_ERROR(ctx->input("normalizers", &g->norms));
  TF_RETURN_IF_ERROR(ctx->input("scale", &g->scale));
  const int64_t B = x.B, T = x.T_len, S = x.S;
  // Inputs come from the loss op; check them all the same.
  if (!(g->px_grad->shape() == TensorShape({B, S, attrs.T1(T)}) &&
        g->py_grad->shape() == TensorShape({B, S + 1, T}) &&
        g->norms->shape() == TensorShape({B, T, S + 1}) &&
        g->scale->shape() == TensorShape({B}))) {
    return InvalidArgument(
        "the joint RNN-T gradient op got inconsistent inputs: px_grad ",
        g->px_grad->shape().DebugString(), ", py_grad ",
        g->py_grad->shape().DebugString(), ", normalizers ",
        g->norms->shape().DebugString(), ", scale ",
        g->scale->shape().DebugString());
  }
  TF_RETURN_IF_ERROR(CheckTerminationSymbol(attrs.blank, x.C, "weight"));
  return CheckSymbols(x.symbols->flat<int64_t>().data(), B, S, x.C);
}

}  // namespace

// Pass 1 of the joint loss: the cells' normalisers, px and py
// (functor::RnntJointLoss) into `norms`, `px` and `py`, which the caller
// allocated ([B, T, S + 1], [B, S, T1], [B, S + 1, T]).  On return `pr`
// holds the problem (its symbols and boundary in copies[0, 2)).
template <typename Device, typename TfL, typename Scalar>
absl::Status JointFirstPass(OpKernelContext* ctx, const JointAttrs& attrs,
                            const JointTensors& x, const Tensor& boundary,
                            Scalar delay_penalty, Tensor* norms, Tensor* px,
                            Tensor* py, Tensor* copies,
                            RnntProblem<Scalar, Scalar>* pr) {
  const int64_t B = x.B, T = x.T_len, S = x.S;
  // Each row of logits comes from a tile or chunk (no pr.logits).
  *pr = {B, T, S, x.C, S + 1, attrs.T1(T)};
  const int64_t* host_boundary = boundary.flat<int64_t>().data();
  TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(
      ctx, x.symbols->flat<int64_t>().data(), B * S, &copies[0], &pr->symbols));
  TF_RETURN_IF_ERROR(functor::Int64Input<Device>()(ctx, host_boundary, 4 * B,
                                                   &copies[1], &pr->boundary));
  pr->px = px->flat<Scalar>().data();
  pr->py = py->flat<Scalar>().data();
  pr->norms = norms->flat<Scalar>().data();
  pr->blank = attrs.blank;
  pr->type = attrs.type;
  pr->delay_penalty = delay_penalty;
  using L = typename StorageOf<TfL>::type;
  return functor::RnntJointLoss<Device, Scalar, L>()(
      ctx, JointInputsOf<TfL>(x, attrs.activation), attrs.allow_tf32,
      host_boundary, *pr);
}

// Passes 1 (JointFirstPass) and 2 (the recursion).
template <typename Device, typename TfL, typename Scalar>
class RnntJointLossOp : public RnntOpKernel<JointAttrs> {
 public:
  using RnntOpKernel::RnntOpKernel;

  void Compute(OpKernelContext* ctx) override {
    JointTensors x;
    const Tensor* boundary;
    Scalar delay_penalty;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx,
                   CheckLossInputs(ctx, attrs_, x, &boundary, &delay_penalty));
    const int64_t B = x.B, T = x.T_len, S = x.S, T1 = attrs_.T1(T);
    Tensor* out[4];  // scores, px_grad, py_grad, normalizers
    OP_REQUIRES_OK(ctx, AllocateLossOutputs(ctx, B, S, T, T1, S + 1, out));
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    Tensor px, py, copies[2];
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, TensorShape({B, S, T1}), &px));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_temp(dt, TensorShape({B, S + 1, T}), &py));
    RnntProblem<Scalar, Scalar> pr;
    OP_REQUIRES_OK(ctx, (JointFirstPass<Device, TfL, Scalar>(
                            ctx, attrs_, x, *boundary, delay_penalty, out[3],
                            &px, &py, copies, &pr)));
    int64_t illegal;
    OP_REQUIRES_OK(ctx, (RnntRecursion<Device, Scalar>(ctx, pr, out[0], out[1],
                                                       out[2], &illegal)));
    OP_REQUIRES(ctx, illegal < 0,
                InvalidArgument("encoder, predictor, weight and bias must be "
                                "finite: sequence ",
                                illegal, " has a NaN or infinite logit"));
  }
};

// TfTransducerRnntJointLogProbs: pass 1 alone, px, py and the normalisers
// as outputs (the TDT joint loss runs its own lattice on them).
template <typename Device, typename TfL, typename Scalar>
class RnntJointLogProbsOp : public RnntOpKernel<JointAttrs> {
 public:
  using RnntOpKernel::RnntOpKernel;

  void Compute(OpKernelContext* ctx) override {
    JointTensors x;
    const Tensor* boundary;
    Scalar delay_penalty;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx,
                   CheckLossInputs(ctx, attrs_, x, &boundary, &delay_penalty));
    const int64_t B = x.B, T = x.T_len, S = x.S;
    Tensor *px, *py, *norms;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(0, TensorShape({B, S, attrs_.T1(T)}), &px));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, TensorShape({B, S + 1, T}), &py));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(2, TensorShape({B, T, S + 1}), &norms));
    Tensor copies[2];
    RnntProblem<Scalar, Scalar> pr;
    OP_REQUIRES_OK(ctx, (JointFirstPass<Device, TfL, Scalar>(
                            ctx, attrs_, x, *boundary, delay_penalty, norms, px,
                            py, copies, &pr)));
  }
};

// Pass 3: the gradients of the four float inputs
// (functor::RnntJointLossGrad).
template <typename Device, typename TfL, typename Scalar>
class RnntJointLossGradOp : public RnntOpKernel<JointAttrs> {
  using L = typename StorageOf<TfL>::type;

 public:
  using RnntOpKernel::RnntOpKernel;

  void Compute(OpKernelContext* ctx) override {
    JointTensors x;
    JointGradTensors in;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx, CheckGradInputs(ctx, attrs_, x, &in));
    const int64_t B = x.B, T = x.T_len, S = x.S, C = x.C, J = x.J;
    const TensorShape shapes[4] = {TensorShape({B, T, J}),
                                   TensorShape({B, S + 1, J}),
                                   TensorShape({J, C}), TensorShape({C})};
    L* outputs[4];
    for (int i = 0; i < 4; ++i) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, shapes[i], &out));
      outputs[i] = const_cast<L*>(TensorData<TfL>(*out));
    }

    // Each row of logits comes from a tile or chunk (no logits, no grad).
    RnntGradientProblem<Scalar, Scalar> rows{B, T, S, C, S + 1, attrs_.T1(T)};
    Tensor symbols_copy;
    OP_REQUIRES_OK(ctx, functor::Int64Input<Device>()(
                            ctx, x.symbols->flat<int64_t>().data(), B * S,
                            &symbols_copy, &rows.symbols));
    rows.px_grad = in.px_grad->flat<Scalar>().data();
    rows.py_grad = in.py_grad->flat<Scalar>().data();
    rows.norms = in.norms->flat<Scalar>().data();
    rows.scale = in.scale->flat<Scalar>().data();
    rows.blank = attrs_.blank;
    rows.constrained = attrs_.type == RnntType::kConstrained;
    rows.emit = Scalar(1) + Scalar(attrs_.fastemit_lambda);
    rows.clamp = Scalar(attrs_.clamp);
    OP_REQUIRES_OK(ctx, (functor::RnntJointLossGrad<Device, Scalar, L>()(
                            ctx, JointInputsOf<TfL>(x, attrs_.activation),
                            attrs_.allow_tf32, rows, outputs)));
  }
};

// Inputs of type TL with the maths in T (TF_TRANSDUCER_LOSS_TYPES).
#define TF_TRANSDUCER_REGISTER_JOINT(TL, T)                 \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                       \
      "TfTransducerRnntJointLoss", DEVICE_CPU, , TL, T,     \
      RnntJointLossOp<functor::CpuDevice, TL, T>);          \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                       \
      "TfTransducerRnntJointLossGrad", DEVICE_CPU, , TL, T, \
      RnntJointLossGradOp<functor::CpuDevice, TL, T>);      \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                       \
      "TfTransducerRnntJointLogProbs", DEVICE_CPU, , TL, T, \
      RnntJointLogProbsOp<functor::CpuDevice, TL, T>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_JOINT);
#undef TF_TRANSDUCER_REGISTER_JOINT

#if GOOGLE_CUDA
// The integer inputs and the delay penalty stay on the host, where they are
// checked before anything is launched.
#define TF_TRANSDUCER_REGISTER_JOINT_GPU(TL, T)                \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                          \
      "TfTransducerRnntJointLoss", tensorflow::DEVICE_GPU,     \
      .HostMemory("symbols")                                   \
          .HostMemory("boundary")                              \
          .HostMemory("delay_penalty"),                        \
      TL, T, RnntJointLossOp<functor::GpuDevice, TL, T>);      \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                          \
      "TfTransducerRnntJointLossGrad", tensorflow::DEVICE_GPU, \
      .HostMemory("symbols"), TL, T,                           \
      RnntJointLossGradOp<functor::GpuDevice, TL, T>);         \
  TF_TRANSDUCER_REGISTER_LOSS_KERNEL(                          \
      "TfTransducerRnntJointLogProbs", tensorflow::DEVICE_GPU, \
      .HostMemory("symbols")                                   \
          .HostMemory("boundary")                              \
          .HostMemory("delay_penalty"),                        \
      TL, T, RnntJointLogProbsOp<functor::GpuDevice, TL, T>)

TF_TRANSDUCER_LOSS_TYPES(TF_TRANSDUCER_REGISTER_JOINT_GPU);
#undef TF_TRANSDUCER_REGISTER_JOINT_GPU
#endif  // GOOGLE_CUDA

}  // namespace tf_transducer
