// SPDX-License-Identifier: Apache-2.0
// The blocked matrix product of tile_gemm.h.

#include "cc/kernels/tile_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TT_GEMM_X86 1
#include <immintrin.h>
#else
#define TT_GEMM_X86 0
#endif

// Every function below may fuse a * b + c into one FMA (where the
// instruction set has it); set for the whole file so that the micro-kernels
// inline into their callers.
#pragma GCC optimize("fp-contract=fast")

namespace tf_transducer {
namespace tile_gemm {
namespace {

// Register block kMr x kNr and cache blocks kKc (depth) and kNc (columns of
// B) for vectors of kBytes: a row of the block is two vectors, and there
// are 6 rows with 16- or 32-byte vectors (12 of SSE's or AVX2's 16
// registers), 12 with 64-byte ones (24 of AVX-512's 32).  float: 6 x 8
// (SSE), 6 x 16 (AVX2), 12 x 32 (AVX-512); double half as wide.
template <typename T, int kBytes>
struct Blocks {
  static constexpr int kMr = kBytes == 64 ? 12 : 6;
  static constexpr int kNr = 2 * kBytes / static_cast<int>(sizeof(T));
  static constexpr int64_t kKc = 256, kNc = sizeof(T) == 4 ? 512 : 256;
};

// The kMr x kNr block of A[i0 : i0 + kMr, k] B[k, j0 : j0 + kNr] over a
// depth of kc, from packed panels ap [kc, kMr] and bp [kc, kNr]; written
// into (or added to) c, of which only mr x nr are real.  A row of the block
// is kNv vectors of kBytes (one register each).  Every loop is
// unrolled, so that every index into acc is a constant and the block stays
// in registers.
template <typename T, int kBytes>
__attribute__((always_inline)) inline void MicroKernel(
    int64_t kc, const T* __restrict ap, const T* __restrict bp, T* c,
    int64_t ldc, int mr, int nr, bool add) {
  constexpr int kMr = Blocks<T, kBytes>::kMr, kNr = Blocks<T, kBytes>::kNr;
  constexpr int kLanes = kBytes / sizeof(T), kNv = kNr / kLanes;
  typedef T Vec __attribute__((vector_size(kBytes)));
  typedef T VecIn
      __attribute__((vector_size(kBytes), aligned(sizeof(T)), may_alias));
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
template <int kNr, typename T>
void PackB(const View<T>& b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
           T* out) {
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
template <int kMr, typename T>
void PackA(const View<T>& a, int64_t i0, int mr, int64_t k0, int64_t kc,
           T* out) {
  for (int i = 0; i < kMr; ++i) {
    if (i >= mr) {
      for (int64_t k = 0; k < kc; ++k) out[k * kMr + i] = T(0);
      continue;
    }
    const T* src = a.data + (i0 + i) * a.rs + k0 * a.cs;
    for (int64_t k = 0; k < kc; ++k) out[k * kMr + i] = src[k * a.cs];
  }
}

// A[:, k0 : k0 + kc] as panels [kc, kMr] of kMr rows each, zero padded.
template <int kMr, typename T>
void PackAllA(int64_t M, const View<T>& a, int64_t k0, int64_t kc, T* out) {
  for (int64_t i = 0; i < M; i += kMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kMr, M - i));
    PackA<kMr>(a, i, mr, k0, kc, out + i * kc);
  }
}

// The products of the packed A (every row, depth kc) with one packed block
// of B (nc columns).
template <typename T, int kBytes>
__attribute__((always_inline)) inline void MacroKernelImpl(
    int64_t M, int64_t kc, int64_t nc, const T* ap, const T* bp, T* c,
    int64_t ldc, bool add) {
  constexpr int kMr = Blocks<T, kBytes>::kMr, kNr = Blocks<T, kBytes>::kNr;
  for (int64_t i = 0; i < M; i += kMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kMr, M - i));
    for (int64_t j = 0; j < nc; j += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - j));
      MicroKernel<T, kBytes>(kc, ap + i * kc, bp + j * kc, c + i * ldc + j, ldc,
                             mr, nr, add);
    }
  }
}

// The macro-kernel of each path, compiled for its instruction set.
template <typename T>
using MacroKernelFn = void (*)(int64_t M, int64_t kc, int64_t nc, const T* ap,
                               const T* bp, T* c, int64_t ldc, bool add);

template <typename T>
void MacroKernelPlain(int64_t M, int64_t kc, int64_t nc, const T* ap,
                      const T* bp, T* c, int64_t ldc, bool add) {
  MacroKernelImpl<T, 16>(M, kc, nc, ap, bp, c, ldc, add);
}

#if TT_GEMM_X86
template <typename T>
__attribute__((target("avx2,fma"))) void MacroKernelAvx2(
    int64_t M, int64_t kc, int64_t nc, const T* ap, const T* bp, T* c,
    int64_t ldc, bool add) {
  MacroKernelImpl<T, 32>(M, kc, nc, ap, bp, c, ldc, add);
}

template <typename T>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void
MacroKernelAvx512(int64_t M, int64_t kc, int64_t nc, const T* ap, const T* bp,
                  T* c, int64_t ldc, bool add) {
  MacroKernelImpl<T, 64>(M, kc, nc, ap, bp, c, ldc, add);
}
#endif

constexpr int64_t RoundUp(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

// C = (accumulate ? C : 0) + A B, B from `b` (packed here a block at a time)
// or, where packed_b is not null, packed already by PackWhole.  The loops:
// per depth block, A packed whole (every row panel), then per block of B's
// columns the macro-kernel over every row panel.
template <typename T, int kBytes>
void GemmImpl(MacroKernelFn<T> macro_kernel, int64_t M, int64_t N, int64_t K,
              const View<T>& a, const View<T>* b, const T* packed_b, T* c,
              int64_t ldc, bool accumulate) {
  using Bl = Blocks<T, kBytes>;
  // Per thread, reused across calls: the packed blocks.
  thread_local std::vector<T> b_pack, a_pack;
  const int64_t kc_max = std::min<int64_t>(Bl::kKc, K);
  a_pack.resize(RoundUp(M, Bl::kMr) * kc_max);
  if (packed_b == nullptr) {
    b_pack.resize(RoundUp(std::min<int64_t>(Bl::kNc, N), Bl::kNr) * kc_max);
  }
  const int64_t n_pad = RoundUp(N, Bl::kNr);
  for (int64_t k0 = 0; k0 < K; k0 += Bl::kKc) {
    const int64_t kc = std::min<int64_t>(Bl::kKc, K - k0);
    PackAllA<Bl::kMr>(M, a, k0, kc, a_pack.data());
    for (int64_t j0 = 0; j0 < N; j0 += Bl::kNc) {
      const int64_t nc = std::min<int64_t>(Bl::kNc, N - j0);
      const T* bp = b_pack.data();
      if (packed_b != nullptr) {
        bp = packed_b + k0 * n_pad + j0 * kc;
      } else {
        PackB<Bl::kNr>(*b, k0, kc, j0, nc, b_pack.data());
      }
      macro_kernel(M, kc, nc, a_pack.data(), bp, c + j0, ldc,
                   accumulate || k0 > 0);
    }
  }
}

// B [K, N] in GemmImpl's packed_b layout: depth block k0 (kc rows) at
// k0 * n_pad, as PackB lays out all of its columns.
template <typename T, int kBytes>
std::vector<T> PackWhole(int64_t K, int64_t N, const View<T>& b) {
  using Bl = Blocks<T, kBytes>;
  const int64_t n_pad = RoundUp(N, Bl::kNr);
  std::vector<T> out(K * n_pad);
  for (int64_t k0 = 0; k0 < K; k0 += Bl::kKc) {
    const int64_t kc = std::min<int64_t>(Bl::kKc, K - k0);
    PackB<Bl::kNr>(b, k0, kc, 0, N, out.data() + k0 * n_pad);
  }
  return out;
}

#if TT_GEMM_X86
// The bfloat16 products (avx512_bf16).  VDPBF16PS adds to each float32 lane
// the products of the lane's two bfloat16 pairs, so A and B are packed with
// k in pairs: A's panel [kc / 2, kBfMr, 2] (a row's pair is one 32-bit value
// to broadcast), B's panels [kc / 2, kBfNr, 2] (a column's pair in one
// lane); an odd depth is padded with a zero.  Register block 12 x 32, as
// the float32 AVX-512 one.  The packers round with VCVTNE2PS2BF16 (nearest,
// ties to even).
constexpr int kBfMr = 12, kBfNr = 32;
constexpr int64_t kBfKc = 512, kBfNc = 512;

#define TT_BF16_TARGET \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))

// 16 values of rows x and y (masked) as 16 bfloat16 pairs (x_j, y_j).
TT_BF16_TARGET inline __m512i PairUp(__m512 x, __m512 y) {
  // cvtne2ps gives [x_0 .. x_15, y_0 .. y_15]; interleave the halves.
  static const __m512i kInterleave = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
      6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(y, x);
  return _mm512_permutexvar_epi16(kInterleave, both);
}

// The mask of the first n of 16 lanes (none for n <= 0).
TT_BF16_TARGET inline __mmask16 FirstLanes(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}

// 16 values of B's row k from column j (masked to n; zeros past the depth).
TT_BF16_TARGET inline __m512 RowPiece(const View<float>& b, int64_t k,
                                      int64_t kc, int64_t k0, int64_t j,
                                      int64_t n) {
  if (k >= kc || n <= 0) return _mm512_setzero_ps();
  const float* src = b.data + (k0 + k) * b.rs + j * b.cs;
  if (b.cs == 1) return _mm512_maskz_loadu_ps(FirstLanes(n), src);
  alignas(64) float gathered[16] = {};
  for (int64_t q = 0; q < std::min<int64_t>(n, 16); ++q)
    gathered[q] = src[q * b.cs];
  return _mm512_load_ps(gathered);
}

TT_BF16_TARGET void PackBBf16(const View<float>& b, int64_t k0, int64_t kc,
                              int64_t j0, int64_t nc, uint16_t* out) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t jp = 0; jp < nc; jp += kBfNr) {
    const int64_t nr = std::min<int64_t>(kBfNr, nc - jp);
    for (int64_t p = 0; p < kp; ++p) {
      uint16_t* dst = out + jp * kp * 2 + p * kBfNr * 2;
      for (int h = 0; h < 2; ++h) {
        const int64_t j = j0 + jp + 16 * h, n = nr - 16 * h;
        const __m512i pairs = PairUp(RowPiece(b, 2 * p, kc, k0, j, n),
                                     RowPiece(b, 2 * p + 1, kc, k0, j, n));
        _mm512_storeu_si512(dst + 32 * h, pairs);
      }
    }
  }
}

// A's rows i0 .. i0 + mr as one panel.  Row-major A: a row's run of k
// rounded 32 at a time, its pairs stored kBfMr apart; any other A: 16 rows'
// values at k and k + 1 at a time, from A's columns.
TT_BF16_TARGET void PackABf16(const View<float>& a, int64_t i0, int mr,
                              int64_t k0, int64_t kc, uint16_t* out) {
  const int64_t kp = (kc + 1) / 2;
  uint32_t* pairs_out = reinterpret_cast<uint32_t*>(out);  // [kp, kBfMr]
  if (a.cs == 1) {
    for (int i = 0; i < kBfMr; ++i) {
      const float* src = i < mr ? a.data + (i0 + i) * a.rs + k0 : nullptr;
      for (int64_t k = 0; k < 2 * kp; k += 32) {
        alignas(64) uint32_t pairs[16];
        __m512 x = _mm512_setzero_ps(), y = _mm512_setzero_ps();
        if (src != nullptr) {
          x = _mm512_maskz_loadu_ps(FirstLanes(kc - k), src + k);
          y = _mm512_maskz_loadu_ps(FirstLanes(kc - k - 16), src + k + 16);
        }
        _mm512_store_si512(pairs, (__m512i)_mm512_cvtne2ps_pbh(y, x));
        for (int64_t q = 0; q < 16 && k / 2 + q < kp; ++q) {
          pairs_out[(k / 2 + q) * kBfMr + i] = pairs[q];
        }
      }
    }
    return;
  }
  const View<float> columns{a.data + i0 * a.rs, a.cs, a.rs};  // A^T
  for (int64_t p = 0; p < kp; ++p) {
    const __m512i pairs = PairUp(RowPiece(columns, 2 * p, kc, k0, 0, mr),
                                 RowPiece(columns, 2 * p + 1, kc, k0, 0, mr));
    _mm512_mask_storeu_epi32(pairs_out + p * kBfMr, FirstLanes(kBfMr), pairs);
  }
}

TT_BF16_TARGET __attribute__((always_inline)) inline void MicroKernelBf16(
    int64_t kp, const uint16_t* __restrict ap, const uint16_t* __restrict bp,
    float* c, int64_t ldc, int mr, int nr, bool add) {
  __m512 acc[kBfMr][2];
#pragma GCC unroll 16
  for (int i = 0; i < kBfMr; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
  const uint32_t* a_pairs = reinterpret_cast<const uint32_t*>(ap);
  for (int64_t p = 0; p < kp; ++p) {
    const __m512i b0 = _mm512_loadu_si512(bp + p * kBfNr * 2);
    const __m512i b1 = _mm512_loadu_si512(bp + p * kBfNr * 2 + kBfNr);
#pragma GCC unroll 16
    for (int i = 0; i < kBfMr; ++i) {
      const __m512i ai = _mm512_set1_epi32(a_pairs[p * kBfMr + i]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)ai, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)ai, (__m512bh)b1);
    }
  }
  const __mmask16 low = FirstLanes(nr), high = FirstLanes(nr - 16);
#pragma GCC unroll 16
  for (int i = 0; i < kBfMr; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (add) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(low, row));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(high, row + 16));
    }
    _mm512_mask_storeu_ps(row, low, v0);
    _mm512_mask_storeu_ps(row + 16, high, v1);
  }
}

TT_BF16_TARGET void MacroKernelBf16(int64_t M, int64_t kc, int64_t nc,
                                    const uint16_t* ap, const uint16_t* bp,
                                    float* c, int64_t ldc, bool add) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t i = 0; i < M; i += kBfMr) {
    const int mr = static_cast<int>(std::min<int64_t>(kBfMr, M - i));
    for (int64_t j = 0; j < nc; j += kBfNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kBfNr, nc - j));
      MicroKernelBf16(kp, ap + i * kp * 2, bp + j * kp * 2, c + i * ldc + j,
                      ldc, mr, nr, add);
    }
  }
}

// GemmImpl's loops for the bfloat16 products (packed_b: PackWholeBf16's).
void GemmBf16(int64_t M, int64_t N, int64_t K, const View<float>& a,
              const View<float>* b, const uint16_t* packed_b, float* c,
              int64_t ldc, bool accumulate) {
  thread_local std::vector<uint16_t> b_pack, a_pack;
  const int64_t kp_max = (std::min<int64_t>(kBfKc, K) + 1) / 2;
  a_pack.resize(RoundUp(M, kBfMr) * kp_max * 2);
  if (packed_b == nullptr) {
    b_pack.resize(RoundUp(std::min<int64_t>(kBfNc, N), kBfNr) * kp_max * 2);
  }
  const int64_t n_pad = RoundUp(N, kBfNr);
  for (int64_t k0 = 0; k0 < K; k0 += kBfKc) {
    const int64_t kc = std::min<int64_t>(kBfKc, K - k0), kp = (kc + 1) / 2;
    for (int64_t i = 0; i < M; i += kBfMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kBfMr, M - i));
      PackABf16(a, i, mr, k0, kc, a_pack.data() + i * kp * 2);
    }
    for (int64_t j0 = 0; j0 < N; j0 += kBfNc) {
      const int64_t nc = std::min<int64_t>(kBfNc, N - j0);
      const uint16_t* bp = b_pack.data();
      if (packed_b != nullptr) {
        bp = packed_b + k0 * n_pad + j0 * kp * 2;
      } else {
        PackBBf16(*b, k0, kc, j0, nc, b_pack.data());
      }
      MacroKernelBf16(M, kc, nc, a_pack.data(), bp, c + j0, ldc,
                      accumulate || k0 > 0);
    }
  }
}

// B [K, N] in GemmBf16's packed_b layout: depth block k0 at k0 * n_pad
// (kBfKc is even, so k0 / 2 pairs of n_pad columns come before it).
std::vector<uint16_t> PackWholeBf16(int64_t K, int64_t N,
                                    const View<float>& b) {
  const int64_t n_pad = RoundUp(N, kBfNr);
  std::vector<uint16_t> out(RoundUp(K, 2) * n_pad);
  for (int64_t k0 = 0; k0 < K; k0 += kBfKc) {
    const int64_t kc = std::min<int64_t>(kBfKc, K - k0);
    PackBBf16(b, k0, kc, 0, N, out.data() + k0 * n_pad);
  }
  return out;
}
#endif

// Whether the CPU (and the operating system, which must save the wider
// registers) runs the path: __builtin_cpu_supports checks both.
bool CpuRuns(Path path) {
#if TT_GEMM_X86
  __builtin_cpu_init();
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq");
  switch (path) {
    case Path::kPlain:
      return true;
    case Path::kAvx2:
      return avx2;
    case Path::kAvx512:
      return avx512;
    case Path::kAvx512Bf16:
      return avx512 && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return path == Path::kPlain;
#endif
}

constexpr const char* kEnvironment = "TF_TRANSDUCER_CPU_GEMM";

struct Choice {
  Path path;
  std::string error;
};

// The paths this CPU runs, worst to best, joined by `separator`.
std::string RunList(const char* separator = ", ") {
  std::string names;
  for (int p = 0; p < kNumPaths; ++p) {
    if (!Supported(static_cast<Path>(p))) continue;
    if (!names.empty()) names += separator;
    names += PathName(static_cast<Path>(p));
  }
  return names;
}

const Choice& TheChoice() {
  static const Choice choice = [] {
    Choice out{Path::kPlain, ""};
    for (int p = 0; p < kNumPaths; ++p) {
      if (Supported(static_cast<Path>(p))) out.path = static_cast<Path>(p);
    }
    const char* wanted = std::getenv(kEnvironment);
    if (wanted == nullptr || *wanted == '\0') return out;
    const std::string name = wanted;
    for (int p = 0; p < kNumPaths; ++p) {
      if (name != PathName(static_cast<Path>(p))) continue;
      if (Supported(static_cast<Path>(p))) {
        out.path = static_cast<Path>(p);
      } else {
        out.error =
            std::string(kEnvironment) + "=" + name +
            " names a path this CPU does not run (it runs: " + RunList() + ")";
      }
      return out;
    }
    out.error = std::string(kEnvironment) + "=" + name +
                " is not a path: use one of plain, avx2, avx512, avx512_bf16"
                " (this CPU runs: " +
                RunList() + ")";
    return out;
  }();
  return choice;
}

// The float32 / float64 products of the active path (packed_b: B packed
// by PackWhole for that path, else null and B read from b).
template <typename T>
void Dispatch(int64_t M, int64_t N, int64_t K, const View<T>& a,
              const View<T>* b, const T* packed_b, T* c, int64_t ldc,
              bool accumulate) {
#if TT_GEMM_X86
  switch (ActivePath()) {
    case Path::kAvx512Bf16:
    case Path::kAvx512:
      GemmImpl<T, 64>(MacroKernelAvx512<T>, M, N, K, a, b, packed_b, c, ldc,
                      accumulate);
      return;
    case Path::kAvx2:
      GemmImpl<T, 32>(MacroKernelAvx2<T>, M, N, K, a, b, packed_b, c, ldc,
                      accumulate);
      return;
    case Path::kPlain:
      break;
  }
#endif
  GemmImpl<T, 16>(MacroKernelPlain<T>, M, N, K, a, b, packed_b, c, ldc,
                  accumulate);
}

// B packed by PackWhole for the active path.
template <typename T>
std::vector<T> PackForPath(int64_t K, int64_t N, const View<T>& b) {
#if TT_GEMM_X86
  if (ActivePath() >= Path::kAvx512) return PackWhole<T, 64>(K, N, b);
  if (ActivePath() == Path::kAvx2) return PackWhole<T, 32>(K, N, b);
#endif
  return PackWhole<T, 16>(K, N, b);
}

// The edges every path shares: an empty C, or an empty sum (K = 0).
template <typename T>
bool Trivial(int64_t M, int64_t N, int64_t K, T* c, int64_t ldc,
             bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  if (K > 0) return false;
  if (!accumulate) {
    for (int64_t i = 0; i < M; ++i)
      std::fill(c + i * ldc, c + i * ldc + N, T(0));
  }
  return true;
}

}  // namespace

const char* PathName(Path path) {
  switch (path) {
    case Path::kPlain:
      return "plain";
    case Path::kAvx2:
      return "avx2";
    case Path::kAvx512:
      return "avx512";
    case Path::kAvx512Bf16:
      return "avx512_bf16";
  }
  return "unknown";
}

bool Supported(Path path) {
  static const std::vector<bool> runs = [] {
    std::vector<bool> out(kNumPaths);
    for (int p = 0; p < kNumPaths; ++p) out[p] = CpuRuns(static_cast<Path>(p));
    return out;
  }();
  const int p = static_cast<int>(path);
  return p >= 0 && p < kNumPaths && runs[p];
}

Path ActivePath() { return TheChoice().path; }

std::string EnvironmentError() { return TheChoice().error; }

void Gemm(int64_t M, int64_t N, int64_t K, View<float> a, View<float> b,
          float* c, int64_t ldc, bool accumulate, bool bf16_products) {
  if (Trivial(M, N, K, c, ldc, accumulate)) return;
#if TT_GEMM_X86
  if (bf16_products && ActivePath() == Path::kAvx512Bf16) {
    GemmBf16(M, N, K, a, &b, nullptr, c, ldc, accumulate);
    return;
  }
#endif
  Dispatch<float>(M, N, K, a, &b, nullptr, c, ldc, accumulate);
}

void Gemm(int64_t M, int64_t N, int64_t K, View<double> a, View<double> b,
          double* c, int64_t ldc, bool accumulate, bool) {
  if (Trivial(M, N, K, c, ldc, accumulate)) return;
  Dispatch<double>(M, N, K, a, &b, nullptr, c, ldc, accumulate);
}

PackedB<float> PackForProducts(int64_t K, int64_t N, View<float> b,
                               bool bf16_products) {
  PackedB<float> out;
  out.K = K;
  out.N = N;
#if TT_GEMM_X86
  out.bf16 = bf16_products && ActivePath() == Path::kAvx512Bf16;
  if (out.bf16) {
    out.pairs = PackWholeBf16(K, N, b);
    return out;
  }
#endif
  out.values = PackForPath<float>(K, N, b);
  return out;
}

PackedB<double> PackForProducts(int64_t K, int64_t N, View<double> b, bool) {
  PackedB<double> out;
  out.K = K;
  out.N = N;
  out.values = PackForPath<double>(K, N, b);
  return out;
}

void Gemm(int64_t M, View<float> a, const PackedB<float>& b, float* c,
          int64_t ldc, bool accumulate) {
  if (Trivial(M, b.N, b.K, c, ldc, accumulate)) return;
#if TT_GEMM_X86
  if (b.bf16) {
    GemmBf16(M, b.N, b.K, a, nullptr, b.pairs.data(), c, ldc, accumulate);
    return;
  }
#endif
  Dispatch<float>(M, b.N, b.K, a, nullptr, b.values.data(), c, ldc, accumulate);
}

void Gemm(int64_t M, View<double> a, const PackedB<double>& b, double* c,
          int64_t ldc, bool accumulate) {
  if (Trivial(M, b.N, b.K, c, ldc, accumulate)) return;
  Dispatch<double>(M, b.N, b.K, a, nullptr, b.values.data(), c, ldc,
                   accumulate);
}

// For Python (ctypes; tests and benchmarks): the paths this CPU runs, comma
// separated, and the one the products take.
extern "C" __attribute__((visibility("default"))) const char*
TfTransducerCpuGemmPaths() {
  static const std::string names = RunList(",");
  return names.c_str();
}

extern "C" __attribute__((visibility("default"))) const char*
TfTransducerCpuGemmPath() {
  return PathName(ActivePath());
}

}  // namespace tile_gemm
}  // namespace tf_transducer
