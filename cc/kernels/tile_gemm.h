// SPDX-License-Identifier: Apache-2.0
// A blocked matrix product for the joint loss's tiles (rnnt_joint_cpu.h):
//
//   C[m, n] = beta * C[m, n] + sum_k A(m, k) B(k, n),   beta in {0, 1},
//
// for A and B of any strides (a row-major matrix, its transpose), C
// row-major with leading dimension ldc.  One call runs on the calling
// thread: the joint kernels parallelise over tiles, each with its own
// products.
//
// The method is GotoBLAS's: per depth block of kKc, A is copied into
// panels of kMr rows stored k-major, B in blocks of kNc columns into panels
// of kNr columns stored k-major (both zero padded at the edges), and a
// micro-kernel keeps a kMr x kNr block of C in registers while it runs over
// k.  A B that many products share (the joint's weight) is packed once
// (PackForProducts).  The library is built without -march; the micro-kernel
// is compiled for several instruction sets (a path), and the best one the
// CPU runs is picked when the library loads:
//
//   plain        C++ the compiler vectorises for baseline x86-64 (SSE2),
//                6 x 8 floats;
//   avx2         the same code with AVX2 and FMA, 6 x 16 floats;
//   avx512       the same code with AVX-512 registers, 12 x 32 floats;
//   avx512_bf16  avx512, and products asked for in bfloat16 (bf16_products)
//                with VDPBF16PS: pairs of bfloat16 products summed into
//                float32, as oneDNN's bfloat16 matmuls on such CPUs.
//
// (Another architecture, or another compiler than GCC, runs plain.)
//
// TF_TRANSDUCER_CPU_GEMM=<path> forces a path (tests use it; the joint ops
// refuse to run if it names a path this CPU lacks).  Contraction of a * b + c
// into one FMA is asked for in the micro-kernels alone.

#ifndef TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_
#define TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tf_transducer {
namespace tile_gemm {

// A matrix as the product reads it: element (i, j) at data[i * rs + j * cs].
template <typename T>
struct View {
  const T* data;
  int64_t rs, cs;
};

// Row-major [rows, cols] with leading dimension ld, or its transpose.
template <typename T>
View<T> RowMajor(const T* data, int64_t ld) {
  return {data, ld, 1};
}
template <typename T>
View<T> Transposed(const T* data, int64_t ld) {
  return {data, 1, ld};
}

// The instruction paths, worst to best.
enum class Path : int { kPlain = 0, kAvx2, kAvx512, kAvx512Bf16 };
constexpr int kNumPaths = 4;

// "plain", "avx2", "avx512" or "avx512_bf16".
const char* PathName(Path path);

// Whether this CPU (and this build) runs the path.
bool Supported(Path path);

// The path every product takes: TF_TRANSDUCER_CPU_GEMM's where it is set to
// a path this CPU runs, else the best one it runs.  Read once.
Path ActivePath();

// What is wrong with TF_TRANSDUCER_CPU_GEMM ("" when it is unset or names a
// path this CPU runs): the joint ops' constructors fail with it.
std::string EnvironmentError();

// C[M, N] = (accumulate ? C : 0) + A[M, K] B[K, N].  bf16_products: A and B
// rounded to bfloat16 (nearest, ties to even), their products summed in
// float32, where the path has bfloat16 instructions (avx512_bf16); every
// other path, and every float64 product, multiplies the values as they are.
void Gemm(int64_t M, int64_t N, int64_t K, View<float> a, View<float> b,
          float* c, int64_t ldc, bool accumulate, bool bf16_products = false);
void Gemm(int64_t M, int64_t N, int64_t K, View<double> a, View<double> b,
          double* c, int64_t ldc, bool accumulate, bool bf16_products = false);

// A matrix B [K, N] packed once as the active path's micro-kernels read it,
// for many products with it (the joint's weight, which every tile
// multiplies by): the product then skips packing B.  Read by Gemm
// alone; packed for ActivePath(), which is fixed when the library loads.
template <typename T>
struct PackedB {
  int64_t K = 0, N = 0;
  bool bf16 = false;  // packed as bfloat16 pairs (in `pairs`)
  std::vector<T> values;
  std::vector<uint16_t> pairs;
};

PackedB<float> PackForProducts(int64_t K, int64_t N, View<float> b,
                               bool bf16_products = false);
PackedB<double> PackForProducts(int64_t K, int64_t N, View<double> b,
                                bool bf16_products = false);

// C[M, N] = (accumulate ? C : 0) + A[M, K] B[K, N], B packed.
void Gemm(int64_t M, View<float> a, const PackedB<float>& b, float* c,
          int64_t ldc, bool accumulate);
void Gemm(int64_t M, View<double> a, const PackedB<double>& b, double* c,
          int64_t ldc, bool accumulate);

}  // namespace tile_gemm
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_
