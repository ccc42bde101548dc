// SPDX-License-Identifier: Apache-2.0
// The row loops of row_math.h.

#include "cc/kernels/row_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cc/kernels/log_space_math.h"

namespace tf_transducer {
namespace {

// Reductions keep kLanes partial results so that they vectorise (a single
// floating-point accumulator cannot be reordered by the compiler).
constexpr int kLanes = 16;

template <typename T>
inline void LogSumExpPartsImpl(const T* __restrict x, int64_t n, T* max_out,
                               T* log_sum_out) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lane_max[j] = std::max(lane_max[j], x[i + j]);
    }
  }
  T m = *std::max_element(lane_max, lane_max + kLanes);
  for (; i < n; ++i) m = std::max(m, x[i]);
  *max_out = m;
  if (m == kNegInf) {
    bool nan = false;
    for (i = 0; i < n; ++i) nan |= x[i] != x[i];
    *log_sum_out = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
    return;
  }
  T lane_sum[kLanes] = {};
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lane_sum[j] += log_space_math::ExpNonPositive(x[i + j] - m);
    }
  }
  T sum = T(0);
  for (int j = 0; j < kLanes; ++j) sum += lane_sum[j];
  for (; i < n; ++i) sum += log_space_math::ExpNonPositive(x[i] - m);
  *log_sum_out = std::log(sum);
}

// grad[0, n) = -g * exp(x - norm); grad may be x itself.
template <typename T>
inline void ScaledNegativeSoftmaxImpl(const T* x, int64_t n, T norm, T g,
                                      T* grad) {
  for (int64_t i = 0; i < n; ++i) {
    grad[i] = -g * log_space_math::ExpNonPositive(x[i] - norm);
  }
}

// tanh(x) ~ x P(x^2) / Q(x^2) on [-c, c] (Eigen's generic_fast_tanh_float).
inline float FastTanh(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  const float xc = std::min(kClamp, std::max(-kClamp, x));
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = x2 * p + 2.00018790482477e-13f;
  p = x2 * p + -8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = x2 * q + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  const float y = xc * p / q;
  return std::abs(x) < 0.0004f ? x : y;
}

}  // namespace

// The row loops, compiled for several instruction sets.
TF_TRANSDUCER_CLONES void LogSumExpParts(const float* x, int64_t n,
                                         float* max_out, float* log_sum_out) {
  LogSumExpPartsImpl(x, n, max_out, log_sum_out);
}
TF_TRANSDUCER_CLONES void LogSumExpParts(const double* x, int64_t n,
                                         double* max_out, double* log_sum_out) {
  LogSumExpPartsImpl(x, n, max_out, log_sum_out);
}
TF_TRANSDUCER_CLONES void ScaledNegativeSoftmax(const float* x, int64_t n,
                                                float norm, float g,
                                                float* grad) {
  ScaledNegativeSoftmaxImpl(x, n, norm, g, grad);
}
TF_TRANSDUCER_CLONES void ScaledNegativeSoftmax(const double* x, int64_t n,
                                                double norm, double g,
                                                double* grad) {
  ScaledNegativeSoftmaxImpl(x, n, norm, g, grad);
}

TF_TRANSDUCER_CLONES void TanhInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = FastTanh(x[i]);
}
void TanhInPlace(double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}

}  // namespace tf_transducer
