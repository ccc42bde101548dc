// SPDX-License-Identifier: Apache-2.0
// What the fused RNN-T losses' op kernels (rnnt_loss_op.cc,
// rnnt_joint_op.cc) share: their attributes, and pass 2, the
// mutual-information recursion over pass 1's px and py into the scores and
// the occupations, on the device the op runs on.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/kernels/mutual_information_functor.h"
#include "cc/kernels/rnnt_loss.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_transducer {

inline RnntType ParseRnntType(const std::string& type) {
  return type == "regular"    ? RnntType::kRegular
         : type == "modified" ? RnntType::kModified
                              : RnntType::kConstrained;
}

// The attributes every RNN-T loss op and its gradient take.
struct RnntAttrs {
  int blank;
  RnntType type;
  float clamp, fastemit_lambda;

  explicit RnntAttrs(tensorflow::OpKernelConstruction* ctx) {
    std::string type_name;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("termination_symbol", &blank));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rnnt_type", &type_name));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clamp", &clamp));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fastemit_lambda", &fastemit_lambda));
    type = ParseRnntType(type_name);
  }

  // The columns of px for T frames: T + 1 for the regular lattice.
  int64_t T1(int64_t T) const { return type == RnntType::kRegular ? T + 1 : T; }
};

// The base of the RNN-T loss ops' kernels: their attributes (RnntAttrs, or
// a struct that extends it), read once.
template <typename Attrs = RnntAttrs>
class RnntOpKernel : public tensorflow::OpKernel {
 public:
  explicit RnntOpKernel(tensorflow::OpKernelConstruction* ctx)
      : OpKernel(ctx), attrs_(ctx) {}

 protected:
  const Attrs attrs_;
};

// The loss ops' outputs for B sequences of T frames and S symbols, in the
// maths' type: scores [B], px_grad [B, S, T1], py_grad [B, S + 1, T] and
// normalizers [B, T, R].
inline absl::Status AllocateLossOutputs(tensorflow::OpKernelContext* ctx,
                                        int64_t B, int64_t S, int64_t T,
                                        int64_t T1, int64_t R,
                                        tensorflow::Tensor* out[4]) {
  using tensorflow::TensorShape;
  const TensorShape shapes[4] = {TensorShape({B}), TensorShape({B, S, T1}),
                                 TensorShape({B, S + 1, T}),
                                 TensorShape({B, T, R})};
  for (int i = 0; i < 4; ++i) {
    TF_RETURN_IF_ERROR(ctx->allocate_output(i, shapes[i], &out[i]));
  }
  return absl::OkStatus();
}

// The recursion over pr's px [B, S, T1] and py [B, S + 1, T] with its
// boundary [B, 4] (device pointers), into scores [B], px_grad and py_grad.
// A sequence whose px or py holds a NaN or +inf is not computed: *illegal
// is set to the first such sequence, or -1 when there is none.
template <typename Device, typename Scalar, typename L>
absl::Status RnntRecursion(tensorflow::OpKernelContext* ctx,
                           const RnntProblem<Scalar, L>& pr,
                           tensorflow::Tensor* scores,
                           tensorflow::Tensor* px_grad,
                           tensorflow::Tensor* py_grad, int64_t* illegal) {
  MutualInformationProblem<Scalar> mi{pr.B,
                                      pr.S,
                                      pr.T_len,
                                      pr.T1,
                                      pr.px,
                                      pr.py,
                                      pr.boundary,
                                      scores->flat<Scalar>().data(),
                                      px_grad->flat<Scalar>().data(),
                                      py_grad->flat<Scalar>().data()};
  const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
  tensorflow::Tensor alpha, e;
  const tensorflow::TensorShape scratch({mi.buffer_size()});
  TF_RETURN_IF_ERROR(ctx->allocate_temp(dt, scratch, &alpha));
  TF_RETURN_IF_ERROR(ctx->allocate_temp(dt, scratch, &e));
  mi.alpha = alpha.flat<Scalar>().data();
  mi.e = e.flat<Scalar>().data();
  std::vector<char> flags;
  TF_RETURN_IF_ERROR(
      (functor::MutualInformation<Device, Scalar>()(ctx, mi, &flags)));
  const auto first =
      std::find_if(flags.begin(), flags.end(), [](char f) { return f != 0; });
  *illegal = first == flags.end() ? -1 : first - flags.begin();
  return absl::OkStatus();
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_
