// SPDX-License-Identifier: Apache-2.0
// exp and log1p on the ranges a log-space recursion needs, written so that a
// compiler can vectorise a loop over them (no calls, no branches, only
// selects), for float and double; the CUDA kernels call the same functions
// (TT_HOST_DEVICE).
//
//   ExpNonPositive(x), x in [-inf, 0]:  exp(x); 0 below the smallest normal
//     result.  Range reduction x = n ln2 + r, |r| <= ln2 / 2, with ln2 split
//     in two (the high part exact in n * ln2_hi), a polynomial for exp(r),
//     and 2^n built from its exponent bits.
//   Log1pUnit(e), e in [0, 1]:  log(1 + e) to full relative precision, also
//     for tiny e.  With u = e / (2 + e), log(1 + e) = 2 atanh(u); for
//     e > sqrt(2) - 1 the argument is halved first, 1 + e = 2 (1 + e) / 2,
//     giving ln 2 + 2 atanh((e - 1) / (e + 3)).  Either way |u| <= 0.1716,
//     and 2 atanh(u) = 2u (1 + u^2 / 3 + u^4 / 5 + ...) converges fast: the
//     first omitted term is below 2^-25 (float, 6 terms) or 2^-55 (double,
//     11 terms) relative to the sum.
//
// tests/cc/log_space_math_test.cc checks both against libm: within 1 ulp
// (exp) and 3 ulp (log1p) over their ranges.

#ifndef TF_TRANSDUCER_CC_KERNELS_LOG_SPACE_MATH_H_
#define TF_TRANSDUCER_CC_KERNELS_LOG_SPACE_MATH_H_

#include <cstdint>

#include "cc/kernels/device.h"

namespace tf_transducer {
namespace log_space_math {

template <typename T>
struct Traits;

template <>
struct Traits<float> {
  using Int = int32_t;
  using UInt = uint32_t;
  static constexpr int kMantissaBits = 23;
  static constexpr Int kExponentBias = 127;
  static constexpr float kMinExpArg = -87.0f;        // exp is normal above this
  static constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr float kLog2E = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f;  // exact in 9 bits
  static constexpr float kLn2Lo = -2.12194440e-4f;
  static constexpr float kLn2 = 0.693147180559945309f;
  // exp(r) ~ sum r^i / i!, i <= 7.
  static constexpr int kExpDegree = 7;
  // 2 atanh(u) / (2u) ~ sum u^(2i) / (2i + 1), i < 6.
  static constexpr int kAtanhTerms = 6;
};

template <>
struct Traits<double> {
  using Int = int64_t;
  using UInt = uint64_t;
  static constexpr int kMantissaBits = 52;
  static constexpr Int kExponentBias = 1023;
  static constexpr double kMinExpArg = -708.0;
  static constexpr double kRoundMagic = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double kLog2E = 1.44269504088896340736;
  static constexpr double kLn2Hi = 6.93145751953125e-1;  // exact in 21 bits
  static constexpr double kLn2Lo = 1.42860682030941723212e-6;
  static constexpr double kLn2 = 0.693147180559945309417;
  static constexpr int kExpDegree = 13;
  static constexpr int kAtanhTerms = 11;
};

// Polynomial coefficients, built at compile time.
template <typename T, int N>
struct Coefficients {
  T c[N];
};

// 1 / i! for i < N.
template <typename T, int N>
constexpr Coefficients<T, N> InverseFactorials() {
  Coefficients<T, N> out{};
  double f = 1.0;
  for (int i = 0; i < N; ++i) {
    if (i > 1) f *= i;
    out.c[i] = static_cast<T>(1.0 / f);
  }
  return out;
}

// 1 / (2i + 1) for i < N.
template <typename T, int N>
constexpr Coefficients<T, N> InverseOdds() {
  Coefficients<T, N> out{};
  for (int i = 0; i < N; ++i) out.c[i] = static_cast<T>(1.0 / (2 * i + 1));
  return out;
}

template <typename T>
TT_HOST_DEVICE inline T ExpNonPositive(T x) {
  using Tr = Traits<T>;
  using UInt = typename Tr::UInt;
  const T xc = x < Tr::kMinExpArg ? Tr::kMinExpArg : x;
  // Round xc / ln2 to the nearest integer n: the magic constant pushes the
  // fraction out of the mantissa, whose low bits then hold n (in two's
  // complement; unsigned arithmetic, so that a NaN's bits shift without
  // undefined behaviour).
  const T shifted = xc * Tr::kLog2E + Tr::kRoundMagic;
  const T n = shifted - Tr::kRoundMagic;
  const UInt n_bits = BitCast<UInt>(shifted) - BitCast<UInt>(Tr::kRoundMagic);
  const T r = (xc - n * Tr::kLn2Hi) - n * Tr::kLn2Lo;
  // Horner on the Taylor coefficients 1 / i!.
  constexpr auto kC = InverseFactorials<T, Tr::kExpDegree + 1>();
  T p = kC.c[Tr::kExpDegree];
  for (int i = Tr::kExpDegree - 1; i >= 0; --i) p = p * r + kC.c[i];
  const T scale = BitCast<T>(static_cast<UInt>(
      (n_bits + UInt(Tr::kExponentBias)) << Tr::kMantissaBits));
  return x < Tr::kMinExpArg ? T(0) : p * scale;
}

template <typename T>
TT_HOST_DEVICE inline T Log1pUnit(T e) {
  using Tr = Traits<T>;
  constexpr T kSqrt2Minus1 = T(0.41421356237309504880);
  const bool halve = e > kSqrt2Minus1;
  // One division with selected operands (a select of two divisions would
  // keep the compiler from vectorising).
  const T u = (halve ? e - T(1) : e) / (e + (halve ? T(3) : T(2)));
  const T u2 = u * u;
  constexpr auto kC = InverseOdds<T, Tr::kAtanhTerms>();
  T sum = kC.c[Tr::kAtanhTerms - 1];
  for (int i = Tr::kAtanhTerms - 2; i >= 0; --i) sum = sum * u2 + kC.c[i];
  return (halve ? Tr::kLn2 : T(0)) + T(2) * u * sum;
}

}  // namespace log_space_math
}  // namespace tf_transducer

// Compiles a function for several instruction sets; the loader picks the
// best one the CPU has (the library itself is built without -march).  Not
// under ThreadSanitizer, whose run-time is not ready when the loader calls
// the ifunc resolvers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__CUDACC__) && !defined(__SANITIZE_THREAD__)
#define TF_TRANSDUCER_CLONES \
  __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define TF_TRANSDUCER_CLONES
#endif

#endif  // TF_TRANSDUCER_CC_KERNELS_LOG_SPACE_MATH_H_
