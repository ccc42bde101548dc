// SPDX-License-Identifier: Apache-2.0
// What the CPU kernels and the CUDA kernels share has to compile for both:
// TT_HOST_DEVICE marks it __host__ __device__ under nvcc, and the helpers
// here give it the few <cmath> / <cstring> functions it needs on either side
// (nvcc is run with --expt-relaxed-constexpr, so constexpr std:: functions
// such as std::numeric_limits<T>::infinity() need no stand-in).

#ifndef TF_TRANSDUCER_CC_KERNELS_DEVICE_H_
#define TF_TRANSDUCER_CC_KERNELS_DEVICE_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TT_HOST_DEVICE __host__ __device__
#else
#define TT_HOST_DEVICE
#endif

namespace tf_transducer {

template <typename To, typename From>
TT_HOST_DEVICE inline To BitCast(From x) {
  static_assert(sizeof(To) == sizeof(From), "sizes differ");
  To y;
  memcpy(&y, &x, sizeof(To));
  return y;
}

template <typename T>
TT_HOST_DEVICE inline T Min(T a, T b) {
  return b < a ? b : a;
}

template <typename T>
TT_HOST_DEVICE inline T Max(T a, T b) {
  return a < b ? b : a;
}

#if defined(__CUDA_ARCH__)
TT_HOST_DEVICE inline float Log(float x) { return logf(x); }
TT_HOST_DEVICE inline double Log(double x) { return log(x); }
TT_HOST_DEVICE inline float Abs(float x) { return fabsf(x); }
TT_HOST_DEVICE inline double Abs(double x) { return fabs(x); }
template <typename T>
TT_HOST_DEVICE inline bool SignBit(T x) {
  return signbit(x);
}
template <typename T>
TT_HOST_DEVICE inline bool IsFinite(T x) {
  return isfinite(x);
}
#else
template <typename T>
inline T Log(T x) {
  return std::log(x);
}
template <typename T>
inline T Abs(T x) {
  return std::abs(x);
}
template <typename T>
inline bool SignBit(T x) {
  return std::signbit(x);
}
template <typename T>
inline bool IsFinite(T x) {
  return std::isfinite(x);
}
#endif

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_DEVICE_H_
