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
// The method is GotoBLAS's: B is copied in blocks of kKc x kNc into panels
// of kNr columns stored k-major, A in blocks of kMr rows stored k-major (zero
// padded at the edges), and a micro-kernel keeps a kMr x kNr block of C in
// registers while it runs over k.  The micro-kernel is plain C++ that the
// compiler vectorises, compiled for several instruction sets (the best one
// the CPU has is picked when the library loads; the library itself is built
// without -march).  Contraction of a * b + c into one FMA is asked for in
// the micro-kernel alone.

#ifndef TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_
#define TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_

#include <cstdint>

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

// C[M, N] = (accumulate ? C : 0) + A[M, K] B[K, N].
void Gemm(int64_t M, int64_t N, int64_t K, View<float> a, View<float> b,
          float* c, int64_t ldc, bool accumulate);
void Gemm(int64_t M, int64_t N, int64_t K, View<double> a, View<double> b,
          double* c, int64_t ldc, bool accumulate);

}  // namespace tile_gemm
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_TILE_GEMM_H_
