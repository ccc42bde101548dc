// SPDX-License-Identifier: Apache-2.0
// functor::RnntJointLoss<Device, T, L> and functor::RnntJointLossGrad<Device,
// T, L>: passes 1 and 3 of the RNN-T loss fused with its joint network
// (rnnt_joint_op.cc has the formulas), for joint inputs of type L with the
// maths in T, on the device the op kernel runs on.  The CPU specialisations
// allocate the tiles' scratch and run rnnt_joint_cpu.h on TensorFlow's
// thread pool; the GPU ones (GOOGLE_CUDA) plan the cells into chunks on the
// host, allocate the chunks' scratch and enqueue gpu/rnnt_joint.cu's
// launchers on TensorFlow's stream (scratch beyond O(B T S): one chunk's h
// and l, and dh, at most gpu::kJointScratchBytes, and partial sums of dW).

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_FUNCTOR_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_FUNCTOR_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/op_device.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_joint_cpu.h"
#include "cc/kernels/rnnt_loss.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_transducer {
namespace functor {

// n elements of T in scratch `t` on the op's device.
template <typename T>
absl::Status Scratch(tensorflow::OpKernelContext* ctx, int64_t n,
                     tensorflow::Tensor* t, T** out) {
  TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DataTypeToEnum<T>::value,
                                        tensorflow::TensorShape({n}), t));
  *out = t->flat<T>().data();
  return absl::OkStatus();
}

// Pass 1: rows' px, py and normalisers from the joint's inputs, px and py
// -inf and the normalisers 0 where no cell inside a boundary provides them,
// the px rows finished (rnnt_type, delay penalty).  rows.logits and
// rows.ranges are unused (R = S + 1); host_boundary holds rows.boundary's
// values on the host.  allow_tf32: the GPU's float32 products in TF32 (the
// CPU multiplies exactly).  The recursion (RnntRecursion) follows.
template <typename Device, typename T, typename L>
struct RnntJointLoss;

// Pass 3: the gradients of the joint's four inputs, d[0] .. d[3] =
// encoder [B, T, J], predictor [B, S + 1, J], weight [J, C], bias [C] (type
// L), of sum_b rows.scale[b] * scores[b]; rows holds px_grad, py_grad, the
// normalisers, the scale, the symbols and the options (its logits, ranges
// and grad are unused, R = S + 1).  allow_tf32 as for RnntJointLoss.
template <typename Device, typename T, typename L>
struct RnntJointLossGrad;

// The joint's inputs as the CPU tiles read them: weight and bias as T, the
// inputs themselves or (16-bit inputs) widened into `wide`.
template <typename T, typename L>
absl::Status TileInputsOf(tensorflow::OpKernelContext* ctx,
                          const RnntJointInputs<L>& joint,
                          tensorflow::Tensor wide[2],
                          joint_cpu::TileInputs<T, L>* in) {
  static_cast<RnntJointInputs<L>&>(*in) = joint;
  if constexpr (std::is_same_v<T, L>) {
    in->wide_weight = joint.weight;
    in->wide_bias = joint.bias;
  } else {
    const L* from[2] = {joint.weight, joint.bias};
    const int64_t sizes[2] = {joint.J * joint.C, joint.C};
    T* to[2];
    for (int i = 0; i < 2; ++i) {
      TF_RETURN_IF_ERROR(Scratch(ctx, sizes[i], &wide[i], &to[i]));
      for (int64_t k = 0; k < sizes[i]; ++k) to[i][k] = Widen(from[i][k]);
    }
    in->wide_weight = to[0];
    in->wide_bias = to[1];
  }
  return absl::OkStatus();
}

template <typename T, typename L>
struct RnntJointLoss<CpuDevice, T, L> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const RnntJointInputs<L>& joint, bool, const int64_t*,
                          const RnntProblem<T, T>& rows) {
    tensorflow::Tensor wide[2];
    joint_cpu::TileInputs<T, L> in;
    TF_RETURN_IF_ERROR((TileInputsOf<T, L>(ctx, joint, wide, &in)));
    joint_cpu::JointLogProbs(in, rows, CpuWorkers(ctx));
    return absl::OkStatus();
  }
};

template <typename T, typename L>
struct RnntJointLossGrad<CpuDevice, T, L> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const RnntJointInputs<L>& joint, bool,
                          const RnntGradientProblem<T, T>& rows,
                          L* const d[4]) {
    tensorflow::Tensor wide[2], sums, d_encoder;
    joint_cpu::TileInputs<T, L> in;
    TF_RETURN_IF_ERROR((TileInputsOf<T, L>(ctx, joint, wide, &in)));
    joint_cpu::ThreadPool* pool = CpuWorkers(ctx);
    const joint_cpu::GradientPlan plan(joint.B, joint.T_len, joint.S, joint.C,
                                       joint.J, pool->NumThreads());
    T *acc, *de;
    TF_RETURN_IF_ERROR(Scratch(ctx, plan.shards * plan.per_shard, &sums, &acc));
    TF_RETURN_IF_ERROR(
        Scratch(ctx, joint.B * joint.T_len * joint.J, &d_encoder, &de));
    joint_cpu::JointGradient(in, rows, plan, acc, de, d, pool);
    return absl::OkStatus();
  }
};

#if GOOGLE_CUDA

// The buffers a gpu::RnntJointProblem points into.
struct GpuJointScratch {
  tensorflow::Tensor wide_weight, wide_bias, hidden, logits, row_cells, pieces;
};

// The joint's inputs (device) and the scratch of `plan`'s chunks.
template <typename T, typename L>
absl::Status MakeGpuJointProblem(tensorflow::OpKernelContext* ctx,
                                 const RnntJointInputs<L>& joint,
                                 bool allow_tf32, const gpu::JointPlan& plan,
                                 GpuJointScratch* s,
                                 gpu::RnntJointProblem<T, L>* p) {
  static_assert(sizeof(gpu::JointPiece) == 4 * sizeof(int64_t));
  static_cast<RnntJointInputs<L>&>(*p) = joint;
  // Tensor cores for 16-bit inputs, as every framework's 16-bit products;
  // for float32 only when asked (TF32).
  constexpr bool kHalfWidth =
      std::is_same_v<L, Half> || std::is_same_v<L, BFloat16>;
  constexpr bool kFloat = std::is_same_v<L, float>;
  p->products = kHalfWidth || (kFloat && allow_tf32)
                    ? gpu::JointProducts::kTensorCores
                    : gpu::JointProducts::kExact;
  p->wide_weight = p->wide_bias = nullptr;
  const int64_t J = joint.J, C = joint.C;
  if constexpr (!std::is_same_v<T, L>) {
    TF_RETURN_IF_ERROR(Scratch(ctx, J * C, &s->wide_weight, &p->wide_weight));
    TF_RETURN_IF_ERROR(Scratch(ctx, C, &s->wide_bias, &p->wide_bias));
  }
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows * J, &s->hidden, &p->hidden));
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows * C, &s->logits, &p->logits));
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows, &s->row_cells, &p->row_cells));
  int64_t* pieces;
  TF_RETURN_IF_ERROR(
      Scratch(ctx, 4 * int64_t(plan.pieces.size()), &s->pieces, &pieces));
  p->pieces = reinterpret_cast<gpu::JointPiece*>(pieces);
  return absl::OkStatus();
}

template <typename T, typename L>
struct RnntJointLoss<GpuDevice, T, L> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const RnntJointInputs<L>& joint, bool allow_tf32,
                          const int64_t* host_boundary,
                          const RnntProblem<T, T>& rows) {
    const std::vector<int64_t> ranges =
        gpu::JointBoundaryRanges(host_boundary, joint.B, joint.T_len);
    const gpu::JointPlan plan = gpu::PlanJointChunks(
        ranges.data(), joint.B * joint.T_len, joint.T_len,
        gpu::JointChunkCapacity(joint.J, joint.C, sizeof(T), false));
    GpuJointScratch scratch;
    gpu::RnntJointProblem<T, L> p;
    TF_RETURN_IF_ERROR((
        MakeGpuJointProblem<T, L>(ctx, joint, allow_tf32, plan, &scratch, &p)));
    return LaunchResult(gpu::RnntJointLogProbs(p, rows, plan, GpuStream(ctx)),
                        "the joint RNN-T loss's first pass");
  }
};

template <typename T, typename L>
struct RnntJointLossGrad<GpuDevice, T, L> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const RnntJointInputs<L>& joint, bool allow_tf32,
                          const RnntGradientProblem<T, T>& rows,
                          L* const d[4]) {
    const int64_t B = joint.B, T_len = joint.T_len, S = joint.S;
    const int64_t C = joint.C, J = joint.J;
    gpu::RnntJointGradientProblem<T, L> p;
    p.rows = rows;
    // The cells whose gradient is not zero, frame by frame, planned on the
    // host.
    tensorflow::Tensor device_ranges;
    int64_t* ranges;
    TF_RETURN_IF_ERROR(Scratch(ctx, 2 * B * T_len, &device_ranges, &ranges));
    TF_RETURN_IF_ERROR(
        LaunchResult(gpu::RnntJointUsedRanges(p, ranges, GpuStream(ctx)),
                     "the joint RNN-T gradient's used cells"));
    std::vector<int64_t> host_ranges(2 * B * T_len);
    TF_RETURN_IF_ERROR(LaunchResult(
        gpu::CopyToHost(host_ranges.data(), ranges,
                        2 * B * T_len * sizeof(int64_t), GpuStream(ctx)),
        "a copy from the GPU"));
    const gpu::JointPlan plan =
        gpu::PlanJointChunks(host_ranges.data(), B * T_len, T_len,
                             gpu::JointChunkCapacity(J, C, sizeof(T), true));
    GpuJointScratch scratch;
    TF_RETURN_IF_ERROR((MakeGpuJointProblem<T, L>(ctx, joint, allow_tf32, plan,
                                                  &scratch, &p.joint)));
    tensorflow::Tensor d_hidden, partial, sums[4];
    TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows * J, &d_hidden, &p.d_hidden));
    p.max_splits = gpu::JointWeightSplits(J, C, sizeof(T));
    TF_RETURN_IF_ERROR(
        Scratch(ctx, p.max_splits > 1 ? p.max_splits * (J * C + C) : 0,
                &partial, &p.partial));
    const int64_t sizes[4] = {B * T_len * J, B * (S + 1) * J, J * C, C};
    T* acc[4];
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, L>) {
        acc[i] = d[i];
      } else {
        TF_RETURN_IF_ERROR(Scratch(ctx, sizes[i], &sums[i], &acc[i]));
      }
    }
    p.acc_encoder = acc[0];
    p.acc_predictor = acc[1];
    p.acc_weight = acc[2];
    p.acc_bias = acc[3];
    p.d_encoder = d[0];
    p.d_predictor = d[1];
    p.d_weight = d[2];
    p.d_bias = d[3];
    return LaunchResult(gpu::RnntJointGradient(p, plan, GpuStream(ctx)),
                        "the joint RNN-T loss's gradient");
  }
};

#endif  // GOOGLE_CUDA

}  // namespace functor
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_FUNCTOR_H_
