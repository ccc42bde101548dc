// SPDX-License-Identifier: Apache-2.0
// Kernels of TfTransducerMutualInformation, CPU and (built with
// GOOGLE_CUDA) GPU.  The recursion and the gradient are written out in
// mutual_information_cell.h; this file checks the inputs, allocates and
// calls functor::MutualInformation.

#include <algorithm>
#include <vector>

#include "cc/kernels/input_checks.h"
#include "cc/kernels/kernel_names.h"
#include "cc/kernels/mutual_information_functor.h"
#include "cc/kernels/op_device.h"

namespace tf_transducer {

template <typename Device, typename Scalar>
class MutualInformationOp : public OpKernel {
 public:
  explicit MutualInformationOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& px = ctx->input(0);
    const Tensor& py = ctx->input(1);
    const Tensor& boundary = ctx->input(2);
    OP_REQUIRES(ctx, px.dims() == 3,
                InvalidArgument("px must have rank 3 [B, S, T + 1] or "
                                "[B, S, T], got shape ",
                                px.shape().DebugString()));
    OP_REQUIRES(ctx, py.dims() == 3,
                InvalidArgument("py must have rank 3 [B, S + 1, T], got shape ",
                                py.shape().DebugString()));
    const int64_t B = px.dim_size(0), S = px.dim_size(1), T1 = px.dim_size(2);
    const int64_t T = py.dim_size(2);
    OP_REQUIRES(ctx, B > 0,
                InvalidArgument("px has an empty batch (B = 0): shape ",
                                px.shape().DebugString()));
    OP_REQUIRES(
        ctx, py.dim_size(0) == B && py.dim_size(1) == S + 1,
        InvalidArgument("py must have shape [B, S + 1, T] = [", B, ", ", S + 1,
                        ", T] to match px of shape ", px.shape().DebugString(),
                        ", got ", py.shape().DebugString()));
    // S = 0 (no symbols) is a lattice of blank steps alone.
    OP_REQUIRES(
        ctx, T > 0,
        InvalidArgument("T must be positive (pass a boundary to "
                        "express empty sequences), got T = ",
                        T, " from py of shape ", py.shape().DebugString()));
    OP_REQUIRES(
        ctx, T1 == T || T1 == T + 1,
        InvalidArgument("px must have T + 1 = ", T + 1, " (regular) or T = ", T,
                        " (modified) columns to match py of shape ",
                        py.shape().DebugString(), ", got px of shape ",
                        px.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckBoundary(boundary, B, S, T));
    Tensor* scores = nullptr;
    Tensor* px_grad = nullptr;
    Tensor* py_grad = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({B}), &scores));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, px.shape(), &px_grad));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, py.shape(), &py_grad));

    MutualInformationProblem<Scalar> p;
    p.batch = B;
    p.S = S;
    p.T_len = T;
    p.T1 = T1;
    Tensor alpha, e;
    const TensorShape scratch({p.buffer_size()});
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &alpha));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &e));
    p.px = px.flat<Scalar>().data();
    p.py = py.flat<Scalar>().data();
    Tensor boundary_copy;
    OP_REQUIRES_OK(
        ctx, functor::Int64Input<Device>()(ctx, boundary.flat<int64_t>().data(),
                                           4 * B, &boundary_copy, &p.boundary));
    p.scores = scores->flat<Scalar>().data();
    p.px_grad = px_grad->flat<Scalar>().data();
    p.py_grad = py_grad->flat<Scalar>().data();
    p.alpha = alpha.flat<Scalar>().data();
    p.e = e.flat<Scalar>().data();

    // px and py are checked for NaN / +inf sequence by sequence, inside the
    // parallel work; a sequence that fails is not computed.
    std::vector<char> illegal;
    OP_REQUIRES_OK(
        ctx, functor::MutualInformation<Device, Scalar>()(ctx, p, &illegal));
    if (std::find(illegal.begin(), illegal.end(), 1) != illegal.end()) {
      ReportIllegalValue(ctx, px, "px");
      if (ctx->status().ok()) ReportIllegalValue(ctx, py, "py");
    }
  }

 private:
  // Fails the op if x holds a NaN or +inf, naming the first one.
  static void ReportIllegalValue(OpKernelContext* ctx, const Tensor& x,
                                 const char* name) {
    std::vector<Scalar> host;
    OP_REQUIRES_OK(ctx, functor::ReadToHost<Device, Scalar>()(ctx, x, &host));
    const std::vector<int64_t> at = mi_cpu::FirstIllegalValue(
        host.data(), x.dim_size(1), x.dim_size(2), x.NumElements());
    OP_REQUIRES(
        ctx, at.empty(),
        InvalidArgument(
            name, " must be finite or -inf (-inf excludes a step), got ",
            host[(at[0] * x.dim_size(1) + at[1]) * x.dim_size(2) + at[2]],
            " at ", name, "[", at[0], ", ", at[1], ", ", at[2], "] of shape ",
            x.shape().DebugString()));
  }
};

#define TF_TRANSDUCER_REGISTER_MI(T)                            \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerMutualInformation") \
                              .Device(DEVICE_CPU)               \
                              .TypeConstraint<T>("T"),          \
                          MutualInformationOp<functor::CpuDevice, T>)

TF_TRANSDUCER_REGISTER_MI(float);
TF_TRANSDUCER_REGISTER_MI(double);
#undef TF_TRANSDUCER_REGISTER_MI

#if GOOGLE_CUDA
#define TF_TRANSDUCER_REGISTER_MI_GPU(T)                        \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerMutualInformation") \
                              .Device(tensorflow::DEVICE_GPU)   \
                              .HostMemory("boundary")           \
                              .TypeConstraint<T>("T"),          \
                          MutualInformationOp<functor::GpuDevice, T>)

TF_TRANSDUCER_REGISTER_MI_GPU(float);
TF_TRANSDUCER_REGISTER_MI_GPU(double);
#undef TF_TRANSDUCER_REGISTER_MI_GPU
#endif  // GOOGLE_CUDA

}  // namespace tf_transducer
