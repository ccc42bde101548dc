// SPDX-License-Identifier: Apache-2.0
// Pass 2 of the fused RNN-T losses (rnnt_loss_op.cc, rnnt_joint_op.cc): the
// mutual-information recursion over pass 1's px and py, into the scores and
// the occupations, on the device the op runs on.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_

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

// The recursion over px [B, S, T1] and py [B, S + 1, T] with boundary
// [B, 4] (device pointers), into scores [B], px_grad and py_grad; illegal[b]
// is set for each sequence whose px or py held a NaN or +inf.
template <typename Device, typename Scalar>
absl::Status RnntRecursion(tensorflow::OpKernelContext* ctx, int64_t B,
                           int64_t S, int64_t T, int64_t T1, const Scalar* px,
                           const Scalar* py, const int64_t* boundary,
                           tensorflow::Tensor* scores,
                           tensorflow::Tensor* px_grad,
                           tensorflow::Tensor* py_grad,
                           std::vector<char>* illegal) {
  MutualInformationProblem<Scalar> mi;
  mi.batch = B;
  mi.S = S;
  mi.T_len = T;
  mi.T1 = T1;
  mi.px = px;
  mi.py = py;
  mi.boundary = boundary;
  mi.scores = scores->flat<Scalar>().data();
  mi.px_grad = px_grad->flat<Scalar>().data();
  mi.py_grad = py_grad->flat<Scalar>().data();
  const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
  tensorflow::Tensor alpha, e;
  const tensorflow::TensorShape scratch({mi.buffer_size()});
  TF_RETURN_IF_ERROR(ctx->allocate_temp(dt, scratch, &alpha));
  TF_RETURN_IF_ERROR(ctx->allocate_temp(dt, scratch, &e));
  mi.alpha = alpha.flat<Scalar>().data();
  mi.e = e.flat<Scalar>().data();
  return functor::MutualInformation<Device, Scalar>()(ctx, mi, illegal);
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_RECURSION_H_
