// SPDX-License-Identifier: Apache-2.0
// The RNN-T loss fused with its joint network on the GPU (rnnt_joint_op.cc
// has the formulas; launchers.h the chunks).  Per chunk of `rows` cells:
//
//   ExpandRows     row_cells [rows]      each row's cell, from the pieces
//   Hidden         h [rows, J]           act(e[b, t] + p[b, s])
//   Gemm           l [rows, C]           h W + c
// loss op:
//   LogProbs       norms, px, py         a warp per row (RnntProblem)
// gradient op:
//   GradientRows   G [rows, C], in l     a warp per row (RnntGradientRow)
//   Gemm, ColSum   dW += h^T G, dc += sum G  (split over rows into partial
//                                         sums, then added in a fixed order)
//   Gemm           dh [rows, J]          G W^T
//   ThroughAct     da = dh * act'(h)     in dh
//   EncoderGrad    de[b, t] += sum_s da  a thread per (piece, j)
//   PredictorGrad  dp[b, s] += sum_t da  a thread per (b, s, j)
//
// Chunks run one after the other on the stream, and every output element
// is written by one thread per chunk, so the sums are deterministic.  The
// matrix products read their operands through strides, so that h^T and W^T
// need no copies, in one of two shared-memory tiled kernels (128 x 64 tiles
// of the result per block): GemmKernel on the CUDA cores (8 x 4 results per
// thread; float maths for float and 16-bit inputs, double for double), or
// TensorCoreGemmKernel (JointProducts::kTensorCores; a warp per 32 x 32,
// nvcuda::wmma 16 x 16 fragments with float accumulators; the operands are
// rounded to the inputs' 16-bit type or to TF32 on their way into shared
// memory).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "cc/kernels/gpu/fill.h"
#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"
#include "cc/kernels/gpu/warp_row.h"
#include "cc/kernels/half_types.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_loss.h"

namespace tf_transducer {
namespace gpu {

std::vector<int64_t> JointBoundaryRanges(const int64_t* boundary, int64_t B,
                                         int64_t T_len) {
  std::vector<int64_t> ranges(2 * B * T_len);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* bnd = boundary + 4 * b;
    for (int64_t t = 0; t < T_len; ++t) {
      const bool inside = t >= bnd[1] && t < bnd[3];
      ranges[2 * (b * T_len + t)] = inside ? bnd[0] : 1;
      ranges[2 * (b * T_len + t) + 1] = inside ? bnd[2] : 0;
    }
  }
  return ranges;
}

JointPlan PlanJointChunks(const int64_t* ranges, int64_t frames, int64_t T_len,
                          int64_t capacity) {
  JointPlan plan;
  JointChunk chunk{0, 0, 0, 0, 0};
  const auto close = [&] {
    if (chunk.rows > 0) {
      chunk.piece_end = int64_t(plan.pieces.size());
      plan.chunks.push_back(chunk);
      plan.max_rows = std::max(plan.max_rows, chunk.rows);
    }
    chunk = JointChunk{int64_t(plan.pieces.size()), 0, 0, 0, 0};
  };
  for (int64_t f = 0; f < frames; ++f) {
    const int64_t last = ranges[2 * f + 1];
    for (int64_t s = ranges[2 * f]; s <= last;) {
      if (chunk.rows == capacity) close();
      const int64_t rows = std::min(last - s + 1, capacity - chunk.rows);
      if (chunk.rows == 0) chunk.b_first = f / T_len;
      chunk.b_last = f / T_len;
      plan.pieces.push_back(JointPiece{f, s, rows, chunk.rows});
      chunk.rows += rows;
      s += rows;
    }
  }
  close();
  return plan;
}

namespace {

constexpr int kThreads = 256;
// Rows of a chunk per partial sum of dW (at most max_splits of them).
constexpr int64_t kRowsPerSplit = 256;

// Blocks of kThreads for a grid-stride loop over n items.
unsigned Blocks(int64_t n) {
  return unsigned(std::max<int64_t>(
      1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 16)));
}

#define TT_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

__device__ inline float TanhOf(float x) { return tanhf(x); }
__device__ inline double TanhOf(double x) { return tanh(x); }

template <typename T>
__device__ inline T Activate(JointActivation activation, T x) {
  switch (activation) {
    case JointActivation::kTanh:
      return TanhOf(x);
    case JointActivation::kRelu:
      return Max(x, T(0));
    default:
      return x;
  }
}

// wide[i] = in[i] as T (16-bit inputs).
template <typename T, typename L>
__global__ void WidenKernel(const L* in, int64_t n, T* wide) {
  TT_GRID_STRIDE(i, n) { wide[i] = T(Widen(in[i])); }
}

// out[i] = acc[i] rounded to L.
template <typename T, typename L>
__global__ void NarrowKernel(const T* acc, int64_t n, L* out) {
  TT_GRID_STRIDE(i, n) { out[i] = Narrow<L>(acc[i]); }
}

// row_cells[first_row + k] = frame * width + s0 + k for each of n pieces.
__global__ void ExpandRows(const JointPiece* pieces, int64_t n, int64_t width,
                           int64_t* row_cells) {
  TT_GRID_STRIDE(i, n) {
    const JointPiece pc = pieces[i];
    for (int64_t k = 0; k < pc.rows; ++k) {
      row_cells[pc.first_row + k] = pc.frame * width + pc.s0 + k;
    }
  }
}

// h [rows, J] = act(e[b, t] + p[b, s]) for each row's cell.
template <typename T, typename L>
__global__ void Hidden(RnntJointProblem<T, L> p, int64_t rows, T* hidden) {
  const int64_t J = p.J, width = p.S + 1;
  TT_GRID_STRIDE(i, rows * J) {
    const int64_t r = i / J, j = i - r * J;
    const int64_t cell = p.row_cells[r];
    const int64_t frame = cell / width, s = cell - frame * width;
    const int64_t b = frame / p.T_len;
    const T x = T(Widen(p.encoder[frame * J + j])) +
                T(Widen(p.predictor[(b * width + s) * J + j]));
    hidden[i] = Activate(p.activation, x);
  }
}

// A matrix read through strides: element (i, k) is data[i * rs + k * cs].
template <typename T>
struct Strided {
  const T* data;
  int64_t rs, cs;
  __device__ T At(int64_t i, int64_t k) const { return data[i * rs + k * cs]; }
};

constexpr int kTileM = 128, kTileN = 64, kTileK = 16, kGemmThreads = 256;
constexpr int kPerM = kTileM / 16, kPerN = kTileN / 16;  // results per thread

// out_z [M, N] (row stride ldo; out_z = out + z * split_stride for block
// z of the grid's third dimension) = A[:, K_z] B[K_z, :] (+ bias[n] when
// bias is not null), or += with `accumulate`; K_z = the z-th run of
// k_per_split values of [0, K).  A block computes a kTileM x kTileN tile,
// thread (ty, tx) its rows ty + 16 i and columns tx + 16 j.  Operand tiles
// are loaded along whichever of their dimensions is contiguous.
template <typename T>
__global__ void __launch_bounds__(kGemmThreads)
    GemmKernel(int64_t M, int64_t N, int64_t K, int64_t k_per_split,
               Strided<T> a, Strided<T> b, const T* bias, T* out, int64_t ldo,
               int64_t split_stride, bool accumulate) {
  __shared__ T as[kTileK][kTileM + 1];
  __shared__ T bs[kTileK][kTileN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.x) * kTileM;
  const int64_t n0 = int64_t(blockIdx.y) * kTileN;
  const int64_t k_begin = int64_t(blockIdx.z) * k_per_split;
  const int64_t k_end = Min(K, k_begin + k_per_split);
  const bool a_k_fast = a.cs == 1, b_n_fast = b.cs == 1;
  T acc[kPerM][kPerN];
  for (int i = 0; i < kPerM; ++i) {
    for (int j = 0; j < kPerN; ++j) acc[i][j] = T(0);
  }
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kTileK) {
    for (int e = tid; e < kTileM * kTileK; e += kGemmThreads) {
      const int m = a_k_fast ? e / kTileK : e % kTileM;
      const int k = a_k_fast ? e % kTileK : e / kTileM;
      const bool inside = m0 + m < M && k0 + k < k_end;
      as[k][m] = inside ? a.At(m0 + m, k0 + k) : T(0);
    }
    for (int e = tid; e < kTileN * kTileK; e += kGemmThreads) {
      const int n = b_n_fast ? e % kTileN : e / kTileK;
      const int k = b_n_fast ? e / kTileN : e % kTileK;
      const bool inside = n0 + n < N && k0 + k < k_end;
      bs[k][n] = inside ? b.At(k0 + k, n0 + n) : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      T av[kPerM], bv[kPerN];
#pragma unroll
      for (int i = 0; i < kPerM; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kPerN; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kPerM; ++i) {
#pragma unroll
        for (int j = 0; j < kPerN; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
    __syncthreads();
  }
  T* out_z = out + int64_t(blockIdx.z) * split_stride;
  for (int i = 0; i < kPerM; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    for (int j = 0; j < kPerN; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (m >= M || n >= N) continue;
      const T v = acc[i][j] + (bias != nullptr ? bias[n] : T(0));
      T* dst = out_z + m * ldo + n;
      *dst = accumulate ? *dst + v : v;
    }
  }
}

// The tensor-core operand type Op: how a float is stored in shared memory
// (S), rounded into it, and the k of a wmma fragment.
template <typename Op>
struct Operand;
template <>
struct Operand<__half> {
  using S = __half;
  static constexpr int kK = 16;
  static __device__ S From(float x) { return __float2half_rn(x); }
};
template <>
struct Operand<__nv_bfloat16> {
  using S = __nv_bfloat16;
  static constexpr int kK = 16;
  static __device__ S From(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct Operand<nvcuda::wmma::precision::tf32> {
  using S = float;
  static constexpr int kK = 8;
  static __device__ S From(float x) { return nvcuda::wmma::__float_to_tf32(x); }
};

// The tensor-core operand type for inputs of type L.
template <typename L>
struct OperandOf {
  using type = nvcuda::wmma::precision::tf32;  // float inputs
};
template <>
struct OperandOf<Half> {
  using type = __half;
};
template <>
struct OperandOf<BFloat16> {
  using type = __nv_bfloat16;
};

constexpr int kTcTileK = 32;  // K of a shared-memory tile
constexpr int kTcWarps = kGemmThreads / 32;

// GemmKernel's product on tensor cores, with float operands rounded to Op
// as they are read.  The block's 8 warps each compute 32 x 32 of the
// 128 x 64 tile as 2 x 2 wmma accumulators; a warp's accumulator goes
// through a 16 x 16 staging buffer of its own to the output, for the bias,
// `accumulate` and the edges.  Rows of the shared tiles are padded by 16
// bytes (fewer bank conflicts); every fragment starts 32-byte aligned, as
// wmma requires.
template <typename Op>
__global__ void __launch_bounds__(kGemmThreads)
    TensorCoreGemmKernel(int64_t M, int64_t N, int64_t K, int64_t k_per_split,
                         Strided<float> a, Strided<float> b, const float* bias,
                         float* out, int64_t ldo, int64_t split_stride,
                         bool accumulate) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  using S = typename Operand<Op>::S;
  constexpr int kK = Operand<Op>::kK;
  constexpr int kPad = 16 / int(sizeof(S));
  constexpr int kLda = kTcTileK + kPad, kLdb = kTileN + kPad;
  __shared__ __align__(32) S as[kTileM * kLda];    // [m][k]
  __shared__ __align__(32) S bs[kTcTileK * kLdb];  // [k][n]
  __shared__ __align__(32) float stage[kTcWarps][16 * 16];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2 * 32, wn = warp % 2 * 32;  // the warp's 32 x 32
  const int64_t m0 = int64_t(blockIdx.x) * kTileM;
  const int64_t n0 = int64_t(blockIdx.y) * kTileN;
  const int64_t k_begin = int64_t(blockIdx.z) * k_per_split;
  const int64_t k_end = Min(K, k_begin + k_per_split);
  const bool a_k_fast = a.cs == 1, b_n_fast = b.cs == 1;
  wmma::fragment<wmma::accumulator, 16, 16, kK, float> acc[2][2];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kTcTileK) {
    for (int e = tid; e < kTileM * kTcTileK; e += kGemmThreads) {
      const int m = a_k_fast ? e / kTcTileK : e % kTileM;
      const int k = a_k_fast ? e % kTcTileK : e / kTileM;
      const bool inside = m0 + m < M && k0 + k < k_end;
      as[m * kLda + k] =
          Operand<Op>::From(inside ? a.At(m0 + m, k0 + k) : 0.0f);
    }
    for (int e = tid; e < kTileN * kTcTileK; e += kGemmThreads) {
      const int n = b_n_fast ? e % kTileN : e / kTcTileK;
      const int k = b_n_fast ? e / kTileN : e % kTcTileK;
      const bool inside = n0 + n < N && k0 + k < k_end;
      bs[k * kLdb + n] =
          Operand<Op>::From(inside ? b.At(k0 + k, n0 + n) : 0.0f);
    }
    __syncthreads();
    for (int kk = 0; kk < kTcTileK; kk += kK) {
      wmma::fragment<wmma::matrix_a, 16, 16, kK, Op, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, kK, Op, wmma::row_major> fb[2];
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(fa[i], as + (wm + 16 * i) * kLda + kk, kLda);
      }
      for (int j = 0; j < 2; ++j) {
        wmma::load_matrix_sync(fb[j], bs + kk * kLdb + wn + 16 * j, kLdb);
      }
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
      }
    }
    __syncthreads();
  }
  float* out_z = out + int64_t(blockIdx.z) * split_stride;
  float* st = stage[warp];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 16 * 16; e += 32) {
        const int64_t m = m0 + wm + 16 * i + e / 16;
        const int64_t n = n0 + wn + 16 * j + e % 16;
        if (m >= M || n >= N) continue;
        const float v = st[e] + (bias != nullptr ? bias[n] : 0.0f);
        float* dst = out_z + m * ldo + n;
        *dst = accumulate ? *dst + v : v;
      }
      __syncwarp();
    }
  }
#endif
}

// out = A B (+ bias) over K split `splits` ways: GemmKernel, or for float
// maths with `products` kTensorCores, TensorCoreGemmKernel with the operand
// type of inputs of type L.
template <typename T, typename L>
void Gemm(JointProducts products, int64_t M, int64_t N, int64_t K, Strided<T> a,
          Strided<T> b, const T* bias, T* out, int64_t ldo, int64_t splits,
          int64_t split_stride, bool accumulate, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    if (products == JointProducts::kTensorCores) {
      const int64_t k_per_split =
          ((K + splits - 1) / splits + kTcTileK - 1) / kTcTileK * kTcTileK;
      const dim3 grid(unsigned((M + kTileM - 1) / kTileM),
                      unsigned((N + kTileN - 1) / kTileN), unsigned(splits));
      TT_LAUNCH(grid, kGemmThreads, 0, stream,
                TensorCoreGemmKernel<typename OperandOf<L>::type>)(
          M, N, K, k_per_split, a, b, bias, out, ldo, split_stride, accumulate);
      return;
    }
  }
  const int64_t k_per_split =
      ((K + splits - 1) / splits + kTileK - 1) / kTileK * kTileK;
  const dim3 grid(unsigned((M + kTileM - 1) / kTileM),
                  unsigned((N + kTileN - 1) / kTileN), unsigned(splits));
  TT_LAUNCH(grid, kGemmThreads, 0, stream, GemmKernel<T>)(
      M, N, K, k_per_split, a, b, bias, out, ldo, split_stride, accumulate);
}

// out_z [C] (out_z = out + z * stride for blockIdx.y = z) = the sum of
// G's rows in the z-th run of rows_per_split rows, or += with `accumulate`.
template <typename T>
__global__ void ColSum(const T* G, int64_t rows, int64_t C,
                       int64_t rows_per_split, T* out, int64_t stride,
                       bool accumulate) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t r_begin = int64_t(blockIdx.y) * rows_per_split;
  const int64_t r_end = Min(rows, r_begin + rows_per_split);
  T sum = T(0);
  for (int64_t r = r_begin; r < r_end; ++r) sum += G[r * C + c];
  T* dst = out + int64_t(blockIdx.y) * stride + c;
  *dst = accumulate ? *dst + sum : sum;
}

// acc[i] += partial[0 * stride + i] + ... + partial[(splits - 1) * stride + i].
template <typename T>
__global__ void AddPartials(const T* partial, int64_t n, int64_t stride,
                            int64_t splits, T* acc) {
  TT_GRID_STRIDE(i, n) {
    T sum = T(0);
    for (int64_t z = 0; z < splits; ++z) sum += partial[z * stride + i];
    acc[i] += sum;
  }
}

// Pass 1 for each row of l [rows, C]: its normaliser, px and py.
template <typename T>
__global__ void LogProbs(RnntProblem<T, T> p, const T* logits,
                         const int64_t* row_cells, int64_t rows) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (row >= rows) return;  // a whole warp
  const int64_t cell = row_cells[row];
  const int64_t frame = cell / p.R, s = cell - frame * p.R;
  const int64_t b = frame / p.T_len, t = frame - b * p.T_len;
  const T* x = logits + row * p.C;
  T m;
  const T log_sum = WarpLogSum(x, p.C, lane, &m);
  if (lane == 0) p.WriteRowOf(x, b, t, cell, s, m, log_sum);
}

template <typename T>
__global__ void FinishPx(RnntProblem<T, T> p) {
  TT_GRID_STRIDE(i, p.B * p.S) { p.FinishPxRow(i / p.S, i % p.S); }
}

// Each frame's first and last position with gx + gy != 0.
template <typename T>
__global__ void UsedRanges(RnntGradientProblem<T, T> p, int64_t* ranges) {
  TT_GRID_STRIDE(f, p.B * p.T_len) {
    const int64_t b = f / p.T_len, t = f - b * p.T_len;
    int64_t first = 1, last = 0;
    for (int64_t s = 0; s <= p.S; ++s) {
      const auto g = RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, p.S,
                                            p.T_len, p.T1, p.constrained,
                                            p.emit, p.clamp, p.scale[b]);
      if (g.gx + g.gy != T(0)) {
        if (first > last) first = s;
        last = s;
      }
    }
    ranges[2 * f] = first;
    ranges[2 * f + 1] = last;
  }
}

// l [rows, C] -> G in place: the gradient of scale[b] * score[b] with
// respect to each row's logits (zero for a row no path uses).
template <typename T>
__global__ void GradientRows(RnntGradientProblem<T, T> p, T* logits,
                             const int64_t* row_cells, int64_t rows) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (row >= rows) return;
  const int64_t cell = row_cells[row];
  const int64_t frame = cell / p.R, s = cell - frame * p.R;
  const int64_t b = frame / p.T_len, t = frame - b * p.T_len;
  const auto g =
      RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, p.S, p.T_len, p.T1,
                             p.constrained, p.emit, p.clamp, p.scale[b]);
  const int64_t symbol = s < p.S ? p.symbols[b * p.S + s] : -1;
  const T norm = p.norms[cell];
  T* l = logits + row * p.C;
  for (int64_t c = lane; c < p.C; c += kWarp) {
    l[c] = g.ElementOfRow(l[c], norm, c, symbol, p.blank, p.clamp);
  }
}

// dh[i] *= act'(x) for the activation's output h[i].
template <typename T>
__global__ void ThroughAct(JointActivation activation, const T* h, int64_t n,
                           T* dh) {
  TT_GRID_STRIDE(i, n) { dh[i] *= ActivationSlope(activation, h[i]); }
}

// de[frame, j] += the sum of da over the piece's rows, for each of n
// pieces (a frame has at most one piece in a chunk).
template <typename T>
__global__ void EncoderGrad(const JointPiece* pieces, int64_t n, int64_t J,
                            const T* da, T* acc_encoder) {
  TT_GRID_STRIDE(i, n * J) {
    const int64_t k = i / J, j = i - k * J;
    const JointPiece pc = pieces[k];
    T sum = T(0);
    for (int64_t r = 0; r < pc.rows; ++r) sum += da[(pc.first_row + r) * J + j];
    acc_encoder[pc.frame * J + j] += sum;
  }
}

// dp[b, s, j] += the sum over the chunk's frames of b that hold s of their
// da, for b in b_first .. b_first + nb - 1 (the chunk's n pieces are in
// frame order: b's are found by binary search).
template <typename T>
__global__ void PredictorGrad(const JointPiece* pieces, int64_t n,
                              int64_t b_first, int64_t nb, int64_t width,
                              int64_t T_len, int64_t J, const T* da,
                              T* acc_predictor) {
  TT_GRID_STRIDE(i, nb * width * J) {
    const int64_t j = i % J, s = i / J % width, b = b_first + i / (J * width);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (pieces[mid].frame < b * T_len) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    T sum = T(0);
    bool any = false;
    for (int64_t k = lo; k < n && pieces[k].frame < (b + 1) * T_len; ++k) {
      const JointPiece pc = pieces[k];
      if (s >= pc.s0 && s < pc.s0 + pc.rows) {
        sum += da[(pc.first_row + s - pc.s0) * J + j];
        any = true;
      }
    }
    if (any) acc_predictor[(b * width + s) * J + j] += sum;
  }
}

// The plan's pieces into joint.pieces.  The host vector is pageable memory,
// which a copy has read when it returns; synchronising makes sure of it.
template <typename T, typename L>
cudaError_t CopyPieces(const RnntJointProblem<T, L>& joint,
                       const JointPlan& plan, cudaStream_t stream) {
  if (plan.pieces.empty()) return cudaSuccess;
  const cudaError_t status = cudaMemcpyAsync(
      joint.pieces, plan.pieces.data(), plan.pieces.size() * sizeof(JointPiece),
      cudaMemcpyHostToDevice, stream);
  return status != cudaSuccess ? status : cudaStreamSynchronize(stream);
}

// Weight and bias as T: the inputs themselves, or widened into scratch.
template <typename T, typename L>
void WideWeights(const RnntJointProblem<T, L>& p, cudaStream_t stream,
                 const T** weight, const T** bias) {
  if constexpr (std::is_same_v<T, L>) {
    *weight = p.weight;
    *bias = p.bias;
  } else {
    TT_LAUNCH(Blocks(p.J * p.C), kThreads, 0, stream, WidenKernel<T, L>)(
        p.weight, p.J * p.C, p.wide_weight);
    TT_LAUNCH(Blocks(p.C), kThreads, 0, stream, WidenKernel<T, L>)(p.bias, p.C,
                                                                   p.wide_bias);
    *weight = p.wide_weight;
    *bias = p.wide_bias;
  }
}

// A chunk's h and l = h W + c in the joint's scratch.
template <typename T, typename L>
void FormChunk(const RnntJointProblem<T, L>& p, const JointChunk& chunk,
               const T* weight, const T* bias, cudaStream_t stream) {
  const int64_t pieces = chunk.piece_end - chunk.piece_begin;
  TT_LAUNCH(Blocks(pieces), kThreads, 0, stream, ExpandRows)(
      p.pieces + chunk.piece_begin, pieces, p.S + 1, p.row_cells);
  TT_LAUNCH(Blocks(chunk.rows * p.J), kThreads, 0, stream, Hidden<T, L>)(
      p, chunk.rows, p.hidden);
  Gemm<T, L>(p.products, chunk.rows, p.C, p.J, Strided<T>{p.hidden, p.J, 1},
             Strided<T>{weight, p.C, 1}, bias, p.logits, p.C, 1, 0, false,
             stream);
}

}  // namespace

template <typename T, typename L>
LaunchStatus RnntJointLogProbs(const RnntJointProblem<T, L>& joint,
                               const RnntProblem<T, T>& rows,
                               const JointPlan& plan, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  cudaError_t status = CopyPieces(joint, plan, st);
  if (status != cudaSuccess) return status;
  const int64_t n_px = rows.B * rows.S * rows.T1;
  const int64_t n_py = rows.B * (rows.S + 1) * rows.T_len;
  const int64_t n_norms = rows.B * rows.T_len * (rows.S + 1);
  const LaunchStatus fills[] = {LaunchFill(rows.px, n_px, kNegInf, st),
                                LaunchFill(rows.py, n_py, kNegInf, st),
                                LaunchFill(rows.norms, n_norms, T(0), st)};
  for (const LaunchStatus filled : fills) {
    if (filled != cudaSuccess) return filled;
  }
  const T *weight, *bias;
  WideWeights(joint, st, &weight, &bias);
  for (const JointChunk& chunk : plan.chunks) {
    FormChunk(joint, chunk, weight, bias, st);
    TT_LAUNCH(RowBlocks(chunk.rows), kRowThreads, 0, st, LogProbs<T>)(
        rows, joint.logits, joint.row_cells, chunk.rows);
    if ((status = cudaGetLastError()) != cudaSuccess) return status;
  }
  TT_LAUNCH(Blocks(rows.B * rows.S), kThreads, 0, st, FinishPx<T>)(rows);
  return cudaGetLastError();
}

template <typename T, typename L>
LaunchStatus RnntJointUsedRanges(const RnntJointGradientProblem<T, L>& p,
                                 int64_t* ranges, void* stream) {
  const int64_t frames = p.rows.B * p.rows.T_len;
  TT_LAUNCH(Blocks(frames), kThreads, 0, static_cast<cudaStream_t>(stream),
            UsedRanges<T>)(p.rows, ranges);
  return cudaGetLastError();
}

template <typename T, typename L>
LaunchStatus RnntJointGradient(const RnntJointGradientProblem<T, L>& p,
                               const JointPlan& plan, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const RnntJointProblem<T, L>& joint = p.joint;
  const int64_t B = joint.B, T_len = joint.T_len, width = joint.S + 1;
  const int64_t J = joint.J, C = joint.C;
  const int64_t sizes[4] = {B * T_len * J, B * width * J, J * C, C};
  T* const acc[4] = {p.acc_encoder, p.acc_predictor, p.acc_weight, p.acc_bias};
  cudaError_t status = CopyPieces(joint, plan, st);
  for (int i = 0; i < 4 && status == cudaSuccess; ++i) {
    status = cudaMemsetAsync(acc[i], 0, sizes[i] * sizeof(T), st);
  }
  if (status != cudaSuccess) return status;
  const T *weight, *bias;
  WideWeights(joint, st, &weight, &bias);
  T* const G = joint.logits;
  for (const JointChunk& chunk : plan.chunks) {
    const int64_t rows = chunk.rows;
    const int64_t n_pieces = chunk.piece_end - chunk.piece_begin;
    const JointPiece* pieces = joint.pieces + chunk.piece_begin;
    FormChunk(joint, chunk, weight, bias, st);
    TT_LAUNCH(RowBlocks(rows), kRowThreads, 0, st, GradientRows<T>)(
        p.rows, G, joint.row_cells, rows);
    // dW += h^T G and dc += sum G: in `splits` partial sums over runs of
    // rows, added in order; or straight into dW and dc.
    const int64_t splits = std::max<int64_t>(
        1, std::min(p.max_splits, (rows + kRowsPerSplit - 1) / kRowsPerSplit));
    const bool direct = splits == 1;
    T* partial_w = direct ? p.acc_weight : p.partial;
    T* partial_c = direct ? p.acc_bias : p.partial + p.max_splits * J * C;
    Gemm<T, L>(joint.products, J, C, rows, Strided<T>{joint.hidden, 1, J},
               Strided<T>{G, C, 1}, nullptr, partial_w, C, splits, J * C,
               direct, st);
    TT_LAUNCH(dim3(unsigned((C + kThreads - 1) / kThreads), unsigned(splits)),
              kThreads, 0, st, ColSum<T>)(
        G, rows, C, (rows + splits - 1) / splits, partial_c, C, direct);
    if (!direct) {
      TT_LAUNCH(Blocks(J * C), kThreads, 0, st, AddPartials<T>)(
          partial_w, J * C, J * C, splits, p.acc_weight);
      TT_LAUNCH(Blocks(C), kThreads, 0, st, AddPartials<T>)(partial_c, C, C,
                                                            splits, p.acc_bias);
    }
    // dh = G W^T, then da = dh * act'(h).
    Gemm<T, L>(joint.products, rows, J, C, Strided<T>{G, C, 1},
               Strided<T>{weight, 1, C}, nullptr, p.d_hidden, J, 1, 0, false,
               st);
    TT_LAUNCH(Blocks(rows * J), kThreads, 0, st, ThroughAct<T>)(
        joint.activation, joint.hidden, rows * J, p.d_hidden);
    TT_LAUNCH(Blocks(n_pieces * J), kThreads, 0, st, EncoderGrad<T>)(
        pieces, n_pieces, J, p.d_hidden, p.acc_encoder);
    const int64_t nb = chunk.b_last - chunk.b_first + 1;
    TT_LAUNCH(Blocks(nb * width * J), kThreads, 0, st, PredictorGrad<T>)(
        pieces, n_pieces, chunk.b_first, nb, width, T_len, J, p.d_hidden,
        p.acc_predictor);
    if ((status = cudaGetLastError()) != cudaSuccess) return status;
  }
  if constexpr (!std::is_same_v<T, L>) {
    L* const out[4] = {p.d_encoder, p.d_predictor, p.d_weight, p.d_bias};
    for (int i = 0; i < 4; ++i) {
      TT_LAUNCH(Blocks(sizes[i]), kThreads, 0, st, NarrowKernel<T, L>)(
          acc[i], sizes[i], out[i]);
    }
  }
  return cudaGetLastError();
}

#define TF_TRANSDUCER_INSTANTIATE(T, L)                                        \
  template LaunchStatus RnntJointLogProbs<T, L>(const RnntJointProblem<T, L>&, \
                                                const RnntProblem<T, T>&,      \
                                                const JointPlan&, void*);      \
  template LaunchStatus RnntJointUsedRanges<T, L>(                             \
      const RnntJointGradientProblem<T, L>&, int64_t*, void*);                 \
  template LaunchStatus RnntJointGradient<T, L>(                               \
      const RnntJointGradientProblem<T, L>&, const JointPlan&, void*)

TF_TRANSDUCER_GPU_LOSS_TYPES(TF_TRANSDUCER_INSTANTIATE);
#undef TF_TRANSDUCER_INSTANTIATE

}  // namespace gpu
}  // namespace tf_transducer
