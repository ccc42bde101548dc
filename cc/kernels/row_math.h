// SPDX-License-Identifier: Apache-2.0
// Loops over one row of C logits on the CPU, shared by the fused RNN-T loss
// kernels (rnnt_loss_op.cc, rnnt_joint_cpu.h), compiled for several
// instruction sets (the best the CPU has is picked when the library loads).

#ifndef TF_TRANSDUCER_CC_KERNELS_ROW_MATH_H_
#define TF_TRANSDUCER_CC_KERNELS_ROW_MATH_H_

#include <cstdint>

namespace tf_transducer {

// The largest value of x[0, n) and log(sum(exp(x - max))).  A NaN anywhere
// makes the sum NaN (a row of NaN too: max() skips NaN, so such a row would
// otherwise pass for a row of -inf); a row of -inf gives (-inf, 0).
void LogSumExpParts(const float* x, int64_t n, float* max_out,
                    float* log_sum_out);
void LogSumExpParts(const double* x, int64_t n, double* max_out,
                    double* log_sum_out);

// grad[0, n) = -g * exp(x - norm); grad may be x itself.
void ScaledNegativeSoftmax(const float* x, int64_t n, float norm, float g,
                           float* grad);
void ScaledNegativeSoftmax(const double* x, int64_t n, double norm, double g,
                           double* grad);

// x[0, n) = tanh(x[0, n)).  float: Eigen's rational approximation (as
// TensorFlow's own float tanh: within a few ulp, x itself for |x| < 4e-4,
// +-1 in effect beyond |x| = 7.9); double: std::tanh.
void TanhInPlace(float* x, int64_t n);
void TanhInPlace(double* x, int64_t n);

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_ROW_MATH_H_
