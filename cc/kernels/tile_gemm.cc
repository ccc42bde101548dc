// SPDX-License-Identifier: Apache-2.0
// The blocked matrix product of tile_gemm.h.

#include "cc/kernels/tile_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

// Every function below may fuse a * b + c into one FMA (where the
// instruction set has it); set for the whole file so that the micro-kernel
// inlines into its callers.
#pragma GCC optimize("fp-contract=fast")

namespace tf_transducer {
namespace tile_gemm {
namespace {

// Register block kMr x kNr, cache blocks kKc (depth) and kNc (columns of B).
// float: 6 x 16 (12 AVX2 registers of 8 lanes); double: 6 x 8.
template <typename T>
struct Blocks;
template <>
struct Blocks<float> {
  static constexpr int kMr = 6, kNr = 16;
  static constexpr int64_t kKc = 256, kNc = 512;
};
template <>
struct Blocks<double> {
  static constexpr int kMr = 6, kNr = 8;
  static constexpr int64_t kKc = 256, kNc = 256;
};

// The kMr x kNr block of A[i0 : i0 + kMr, k] B[k, j0 : j0 + kNr] over a
// depth of kc, from packed panels ap [kc, kMr] and bp [kc, kNr]; written
// into (or added to) c, of which only mr x nr are real.  A row of the block
// is kNv vectors of 32 bytes (one AVX register each; two SSE registers
// where the compiler has no AVX).  Every loop is unrolled, so that every
// index into acc is a constant and the block stays in registers.
template <typename T>
__attribute__((always_inline)) inline void MicroKernel(
    int64_t kc, const T* __restrict ap, const T* __restrict bp, T* c,
    int64_t ldc, int mr, int nr, bool add) {
  constexpr int kMr = Blocks<T>::kMr, kNr = Blocks<T>::kNr;
  constexpr int kLanes = 32 / sizeof(T), kNv = kNr / kLanes;
  typedef T Vec __attribute__((vector_size(32)));
  typedef T VecIn
      __attribute__((vector_size(32), aligned(sizeof(T)), may_alias));
  Vec acc[kMr][kNv];
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) acc[i][v] = Vec{};
  }
  for (int64_t k = 0; k < kc; ++k) {
    Vec b[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      b[v] = *reinterpret_cast<const VecIn*>(bp + k * kNr + v * kLanes);
    }
    const T* a = ap + k * kMr;
#pragma GCC unroll 16
    for (int i = 0; i < kMr; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) acc[i][v] += a[i] * b[v];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i) {
    if (i >= mr) break;
    T* row = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      T* out = row + v * kLanes;
      if (nr == kNr) {
        VecIn* to = reinterpret_cast<VecIn*>(out);
        *to = add ? *to + acc[i][v] : acc[i][v];
        continue;
      }
      const Vec part = acc[i][v];  // a copy: acc stays in registers
      for (int j = v * kLanes; j < nr && j < (v + 1) * kLanes; ++j) {
        out[j - v * kLanes] = add ? out[j - v * kLanes] + part[j - v * kLanes]
                                  : part[j - v * kLanes];
      }
    }
  }
}

// B[k0 : k0 + kc, j0 : j0 + nc] into panels of kNr columns, k-major, the
// last one zero padded.
template <typename T>
void PackB(const View<T>& b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
           T* out) {
  constexpr int kNr = Blocks<T>::kNr;
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - jp));
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = b.data + (k0 + k) * b.rs + (j0 + jp) * b.cs;
      T* dst = out + (jp * kc) + k * kNr;
      if (b.cs == 1) {
        for (int j = 0; j < nr; ++j) dst[j] = src[j];
      } else {
        for (int j = 0; j < nr; ++j) dst[j] = src[j * b.cs];
      }
      for (int j = nr; j < kNr; ++j) dst[j] = T(0);
    }
  }
}

// A[i0 : i0 + mr, k0 : k0 + kc] as one panel [kc, kMr], zero padded.
template <typename T>
void PackA(const View<T>& a, int64_t i0, int mr, int64_t k0, int64_t kc,
           T* out) {
  constexpr int kMr = Blocks<T>::kMr;
  for (int i = 0; i < kMr; ++i) {
    if (i >= mr) {
      for (int64_t k = 0; k < kc; ++k) out[k * kMr + i] = T(0);
      continue;
    }
    const T* src = a.data + (i0 + i) * a.rs + k0 * a.cs;
    for (int64_t k = 0; k < kc; ++k) out[k * kMr + i] = src[k * a.cs];
  }
}

// The products of one packed block of B with every row block of A.
template <typename T>
__attribute__((always_inline)) inline void MacroKernelImpl(
    int64_t M, int64_t kc, int64_t nc, const View<T>& a, int64_t k0,
    const T* bp, T* c, int64_t ldc, bool add, T* ap) {
  constexpr int kMr = Blocks<T>::kMr, kNr = Blocks<T>::kNr;
  for (int64_t i = 0; i < M; i += kMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kMr, M - i));
    PackA(a, i, mr, k0, kc, ap);
    for (int64_t j = 0; j < nc; j += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - j));
      MicroKernel<T>(kc, ap, bp + j * kc, c + i * ldc + j, ldc, mr, nr, add);
    }
  }
}

// The macro-kernel for AVX2 with FMA (any x86-64 CPU of the last decade;
// AVX-512 CPUs run it too) and a plain one for the rest, picked once.
template <typename T>
void MacroKernelPlain(int64_t M, int64_t kc, int64_t nc, const View<T>& a,
                      int64_t k0, const T* bp, T* c, int64_t ldc, bool add,
                      T* ap) {
  MacroKernelImpl(M, kc, nc, a, k0, bp, c, ldc, add, ap);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
template <typename T>
__attribute__((target("avx2,fma"))) void MacroKernelAvx2(
    int64_t M, int64_t kc, int64_t nc, const View<T>& a, int64_t k0,
    const T* bp, T* c, int64_t ldc, bool add, T* ap) {
  MacroKernelImpl(M, kc, nc, a, k0, bp, c, ldc, add, ap);
}

bool HasAvx2Fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#endif

template <typename T>
void MacroKernel(int64_t M, int64_t kc, int64_t nc, const View<T>& a,
                 int64_t k0, const T* bp, T* c, int64_t ldc, bool add, T* ap) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (HasAvx2Fma()) {
    MacroKernelAvx2(M, kc, nc, a, k0, bp, c, ldc, add, ap);
    return;
  }
#endif
  MacroKernelPlain(M, kc, nc, a, k0, bp, c, ldc, add, ap);
}

template <typename T>
void GemmImpl(int64_t M, int64_t N, int64_t K, const View<T>& a,
              const View<T>& b, T* c, int64_t ldc, bool accumulate) {
  using Bl = Blocks<T>;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < M; ++i)
        std::fill(c + i * ldc, c + i * ldc + N, T(0));
    }
    return;
  }
  // Per thread, reused across calls: the packed blocks.
  thread_local std::vector<T> b_pack, a_pack;
  const int64_t nc_max = std::min<int64_t>(Bl::kNc, N);
  const int64_t kc_max = std::min<int64_t>(Bl::kKc, K);
  const int64_t panels = (nc_max + Bl::kNr - 1) / Bl::kNr;
  b_pack.resize(panels * Bl::kNr * kc_max);
  a_pack.resize(Bl::kMr * kc_max);
  for (int64_t j0 = 0; j0 < N; j0 += Bl::kNc) {
    const int64_t nc = std::min<int64_t>(Bl::kNc, N - j0);
    for (int64_t k0 = 0; k0 < K; k0 += Bl::kKc) {
      const int64_t kc = std::min<int64_t>(Bl::kKc, K - k0);
      PackB(b, k0, kc, j0, nc, b_pack.data());
      MacroKernel(M, kc, nc, a, k0, b_pack.data(), c + j0, ldc,
                  accumulate || k0 > 0, a_pack.data());
    }
  }
}

}  // namespace

void Gemm(int64_t M, int64_t N, int64_t K, View<float> a, View<float> b,
          float* c, int64_t ldc, bool accumulate) {
  GemmImpl(M, N, K, a, b, c, ldc, accumulate);
}

void Gemm(int64_t M, int64_t N, int64_t K, View<double> a, View<double> b,
          double* c, int64_t ldc, bool accumulate) {
  GemmImpl(M, N, K, a, b, c, ldc, accumulate);
}

}  // namespace tile_gemm
}  // namespace tf_transducer
