// SPDX-License-Identifier: Apache-2.0
// The tensor-core API (nvcuda::wmma) for the CPU emulator: fragments of
// 16 x 16 x 16 (__half, __nv_bfloat16) and 16 x 16 x 8 (precision::tf32)
// tiles with float accumulators.
//
// A fragment's elements are spread over the 32 lanes of a warp in an
// unspecified way on a GPU; here lane l holds elements [l E, (l + 1) E) of
// the tile in row-major order (E = num_elements).  A load or store reads or
// writes only the calling lane's elements, in the kernel's own code (so that
// the sanitizers see them), and is checked: a pointer that is not 32-byte
// aligned, a leading dimension that is not a multiple of 16 bytes (CUDA's
// requirements), and lanes of a warp whose n-th loads or stores differ are
// reported.  mma_sync is a collective of the whole warp (all 32 lanes live,
// as for a full-mask shuffle); it computes every lane's results once all
// have arrived: each element of D is C plus
// its products summed in order of k, in float (the products of 16-bit
// values and of TF32 values are exact in float).  TF32 operands are read as
// a tensor core reads them, with the low 13 mantissa bits dropped.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_MMA_H_
#define TF_TRANSDUCER_CC_GPU_EMU_MMA_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cc/gpu_emu/cuda_bf16.h"
#include "cc/gpu_emu/cuda_fp16.h"
#include "cc/gpu_emu/cuda_runtime.h"
#include "cc/gpu_emu/rounding.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

inline float __float_to_tf32(float x) {
  return tf_transducer::gpu_emu::RoundToTf32(x);
}

namespace emu {

// The tile a fragment holds: rows x cols.
template <typename Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N;
};

// What a fragment of type T stores.
template <typename T>
struct Element {
  using type = T;
};
template <>
struct Element<precision::tf32> {
  using type = float;
};

inline float ToFloat(float x) { return x; }
inline float ToFloat(__half x) { return __half2float(x); }
inline float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

// A multiplicand as a tensor core reads it.
template <typename T, typename E>
float Operand(E x) {
  if constexpr (std::is_same_v<T, precision::tf32>) {
    return tf_transducer::gpu_emu::TruncateToTf32(x);
  } else {
    return ToFloat(x);
  }
}

// What a load or store checks: its pointer and leading dimension meet
// CUDA's alignment rules, and the warp's lanes pass the same ones.
inline void CheckAccess(const char* op, const void* ptr, unsigned ldm,
                        int layout, size_t element_bytes) {
  namespace e = tf_transducer::gpu_emu;
  if (reinterpret_cast<uintptr_t>(ptr) % 32 != 0) {
    e::Fail("%s: pointer %p is not 32-byte aligned", op, ptr);
  }
  if (ldm * element_bytes % 16 != 0) {
    e::Fail("%s: ldm %u elements of %zu bytes is not a multiple of 16 bytes",
            op, ldm, element_bytes);
  }
  e::Device::Get().WarpUniformCall(op, ptr, ldm, layout);
}

inline int LaneOfWarp() {
  return int(threadIdx.x +
             blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) %
         32;
}

// The calling lane's elements of fragment type F in memory at ptr, with
// leading dimension ldm: element i of the lane is tile element (r, c), at
// ptr[r * ldm + c] (row major) or ptr[c * ldm + r].
template <typename F, typename P>
P* LaneElement(P* ptr, unsigned ldm, bool row_major, int i) {
  const int e = LaneOfWarp() * F::num_elements + i;
  const size_t r = size_t(e / F::cols), c = size_t(e % F::cols);
  return row_major ? ptr + r * ldm + c : ptr + c * ldm + r;
}

}  // namespace emu

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
 public:
  using element_type = typename emu::Element<T>::type;
  static constexpr int rows = emu::Shape<Use, M, N, K>::rows;
  static constexpr int cols = emu::Shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols / 32;
  static_assert((M == 16 && N == 16 && K == 16 &&
                 !std::is_same_v<T, precision::tf32>) ||
                    (M == 16 && N == 16 && K == 8 &&
                     (std::is_same_v<T, precision::tf32> ||
                      std::is_same_v<Use, accumulator>)),
                "the emulator has the 16x16x16 (half, bfloat16) and 16x16x8 "
                "(tf32) shapes");
  element_type x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f,
                   typename fragment<Use, M, N, K, T, L>::element_type v) {
  for (auto& e : f.x) e = v;
}

// matrix_a and matrix_b: element (r, c) of the tile at ptr[r * ldm + c]
// (row_major) or ptr[c * ldm + r] (col_major).
template <typename Use, int M, int N, int K, typename T, typename L>
void load_matrix_sync(
    fragment<Use, M, N, K, T, L>& f,
    const typename fragment<Use, M, N, K, T, L>::element_type* ptr,
    unsigned ldm) {
  using F = fragment<Use, M, N, K, T, L>;
  static_assert(!std::is_same_v<Use, accumulator>,
                "an accumulator's load takes its layout");
  constexpr bool row = std::is_same_v<L, row_major>;
  emu::CheckAccess("wmma::load_matrix_sync", ptr, ldm, row,
                   sizeof(typename F::element_type));
  for (int i = 0; i < F::num_elements; ++i) {
    f.x[i] = *emu::LaneElement<F>(ptr, ldm, row, i);
  }
}

template <int M, int N, int K, typename T>
void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const float* ptr,
                      unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T>;
  emu::CheckAccess("wmma::load_matrix_sync", ptr, ldm, layout, sizeof(float));
  for (int i = 0; i < F::num_elements; ++i) {
    f.x[i] = *emu::LaneElement<F>(ptr, ldm, layout == mem_row_major, i);
  }
}

template <int M, int N, int K, typename T>
void store_matrix_sync(float* ptr, const fragment<accumulator, M, N, K, T>& f,
                       unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T>;
  emu::CheckAccess("wmma::store_matrix_sync", ptr, ldm, layout, sizeof(float));
  for (int i = 0; i < F::num_elements; ++i) {
    *emu::LaneElement<F>(ptr, ldm, layout == mem_row_major, i) = f.x[i];
  }
}

namespace emu {

template <typename A, typename B, typename C>
struct MmaIn {
  const A* a;
  const B* b;
  const C* c;
};

// D = A B + C for the whole warp; lane l's D elements into out[l].
template <typename A, typename B, typename C, typename T>
std::string MmaCombine(const void* const* in, void* const* out, unsigned) {
  constexpr int M = A::rows, K = A::cols, N = B::cols;
  static_assert(M * N == 32 * C::num_elements, "an accumulator tile");
  float a[M * K], b[K * N];  // row-major, as the tensor core reads them
  for (int lane = 0; lane < 32; ++lane) {
    const auto& arg = *static_cast<const MmaIn<A, B, C>*>(in[lane]);
    for (int i = 0; i < A::num_elements; ++i) {
      a[lane * A::num_elements + i] = Operand<T>(arg.a->x[i]);
    }
    for (int i = 0; i < B::num_elements; ++i) {
      b[lane * B::num_elements + i] = Operand<T>(arg.b->x[i]);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const C& c = *static_cast<const MmaIn<A, B, C>*>(in[lane])->c;
    C d;
    for (int i = 0; i < C::num_elements; ++i) {
      const int e = lane * C::num_elements + i, r = e / N, col = e % N;
      float sum = c.x[i];
      for (int k = 0; k < K; ++k) sum += a[r * K + k] * b[k * N + col];
      d.x[i] = sum;
    }
    std::memcpy(out[lane], &d, sizeof(C));
  }
  return "";
}

}  // namespace emu

template <int M, int N, int K, typename T, typename LA, typename LB,
          typename TC>
void mma_sync(fragment<accumulator, M, N, K, TC>& d,
              const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b,
              const fragment<accumulator, M, N, K, TC>& c) {
  using A = fragment<matrix_a, M, N, K, T, LA>;
  using B = fragment<matrix_b, M, N, K, T, LB>;
  using C = fragment<accumulator, M, N, K, TC>;
  static_assert(std::is_same_v<TC, float>, "float accumulators only");
  const emu::MmaIn<A, B, C> in{&a, &b, &c};
  C result;
  tf_transducer::gpu_emu::Device::Get().WarpCollective(
      "wmma::mma_sync", tf_transducer::gpu_emu::kFullMask,
      &emu::MmaCombine<A, B, C, T>, &in, &result, /*orders_memory=*/false);
  d = result;
}

}  // namespace wmma
}  // namespace nvcuda

#endif  // TF_TRANSDUCER_CC_GPU_EMU_MMA_H_
