// SPDX-License-Identifier: Apache-2.0
// Compares log_space_math.h with libm on random arguments; exits non-zero and
// prints the worst case when an error bound is exceeded.
// Built and run by tests/cc/test_cc_units.py.

#include "cc/kernels/log_space_math.h"

#include <cmath>
#include <cstdio>
#include <random>

using tf_transducer::log_space_math::ExpNonPositive;
using tf_transducer::log_space_math::Log1pUnit;
using tf_transducer::log_space_math::Traits;

template <typename T>
double UlpError(T got, T want) {
  if (want == 0) return got == 0 ? 0 : 1e30;
  const T ulp = std::nextafter(std::abs(want), T(INFINITY)) - std::abs(want);
  return std::abs(static_cast<double>(got) - static_cast<double>(want)) / ulp;
}

template <typename T>
bool Check(const char* name) {
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> unit(0, 1);
  double worst_exp = 0, worst_log = 0;
  T at_exp = 0, at_log = 0;
  for (int i = 0; i < 1000000; ++i) {
    // exp: magnitudes from 2^-2 to 2^9 (and down to the underflow limit).
    const T x = -std::ldexp(static_cast<T>(unit(gen)), int(gen() % 12) - 2);
    if (x >= Traits<T>::kMinExpArg) {
      const double err = UlpError(ExpNonPositive(x), std::exp(x));
      if (err > worst_exp) worst_exp = err, at_exp = x;
    }
    // log1p: uniform on [0, 1], and tiny arguments down to 2^-60.
    T e = static_cast<T>(unit(gen));
    if (i % 3 == 0) e = std::ldexp(e, -int(gen() % 60));
    const double err = UlpError(Log1pUnit(e), std::log1p(e));
    if (err > worst_log) worst_log = err, at_log = e;
  }
  const bool edges_ok =
      ExpNonPositive(T(-INFINITY)) == 0 && ExpNonPositive(T(0)) == 1 &&
      ExpNonPositive(Traits<T>::kMinExpArg - 1) == 0 && Log1pUnit(T(0)) == 0;
  std::printf("%s: exp %.2f ulp (at %g), log1p %.2f ulp (at %g), edges %s\n",
              name, worst_exp, double(at_exp), worst_log, double(at_log),
              edges_ok ? "ok" : "WRONG");
  return worst_exp <= 1.0 && worst_log <= 3.0 && edges_ok;
}

int main() {
  const bool ok = Check<float>("float") & Check<double>("double");
  return ok ? 0 : 1;
}
