// SPDX-License-Identifier: Apache-2.0
// The TDT loss on the GPU (tdt_loss_op.cc has the formulas, tdt_loss.h the
// maths these kernels share with the CPU's).  Pass 1: a warp per row of
// token logits reduces it to its max and exp-sum (warp_row.h) and lane 0
// writes its node's log-probs (or, given token log-probs, a thread per
// node).  Pass 2: a thread block per utterance walks
// its frames.  A node's steps arrive from earlier frames or, for the
// zero-duration label step, from the node below in the same frame, so per
// frame the threads first sum every node's terms from earlier frames in
// parallel, then one thread adds the zero-duration steps up the frame in
// order (the backward pass: down the frame), then the threads take each
// node's occupations in parallel.

#include <cuda_runtime.h>

#include <limits>

#include "cc/kernels/gpu/fill.h"
#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"
#include "cc/kernels/gpu/warp_row.h"
#include "cc/kernels/tdt_loss.h"

namespace tf_transducer {
namespace gpu {
namespace {

constexpr int kLatticeThreads = 128;

// Pass 1 of token logits: a warp per row.
template <typename T, typename L>
__global__ void TdtRowsKernel(TdtProblem<T, L> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (row >= p.Rows()) return;  // a whole warp
  int64_t b, t, u;
  p.Locate(row, &b, &t, &u);
  if (!p.RowUsed(b, t, u)) {
    if (lane == 0) p.norms[row] = T(0);
    return;
  }
  T m;
  const T log_sum = WarpLogSum(p.token_logits + row * p.C, p.C, lane, &m);
  if (lane == 0) p.WriteRow(row, b, t, u, m, log_sum);
}

// Pass 1 of token log-probs: a thread per node.
template <typename T, typename L>
__global__ void TdtLogProbsKernel(TdtProblem<T, L> p) {
  const int64_t node = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (node >= p.Rows()) return;
  int64_t b, t, u;
  p.Locate(node, &b, &t, &u);
  if (p.RowUsed(b, t, u)) p.WriteLogProbs(b, t, u);
}

// log(exp(a) + exp(b)), as TdtLattice sums terms.
template <typename T>
__device__ T LogAdd(T a, T b) {
  const T terms[2] = {a, b};
  return TdtLattice<T>::LogSumOfTerms(terms, 2);
}

template <typename T, typename L>
__global__ void TdtLatticeKernel(TdtProblem<T, L> p, char* illegal) {
  const TdtLattice<T>& g = p.lattice;
  const int64_t b = blockIdx.x;
  const int64_t Tb = g.frames[b], Ub = g.labels[b];
  const int first = threadIdx.x, step = blockDim.x;
  T* alpha = p.alpha;
  T* beta = p.beta;
  T terms[2 * kMaxDurations + 1];
  for (int64_t t = 0; t < Tb; ++t) {
    for (int64_t u = first; u <= Ub; u += step) {
      const int n = g.Arriving(b, t, u, alpha, false, terms);
      alpha[g.Node(b, t, u)] = TdtLattice<T>::LogSumOfTerms(terms, n);
    }
    __syncthreads();
    if (first == 0) {  // the zero-duration label steps, up the frame
      for (int64_t u = 1; u <= Ub; ++u) {
        const int64_t from = g.Node(b, t, u - 1);
        alpha[from + 1] =
            LogAdd(alpha[from + 1], alpha[from] + g.LabelWeight(from, 0));
      }
    }
    __syncthreads();
  }
  __shared__ T score_of_block;
  if (first == 0) {
    const T score = g.Score(b, alpha);
    p.scores[b] = score;
    score_of_block = score;
    illegal[b] = score != score || score == std::numeric_limits<T>::infinity();
  }
  __syncthreads();
  const T score = score_of_block;
  // No path, or a NaN or +inf: the gradient stays zero.
  if (!(score > -std::numeric_limits<T>::infinity()) ||
      score == std::numeric_limits<T>::infinity()) {
    return;
  }
  T* label_terms = terms;
  T* blank_terms = terms + kMaxDurations;
  for (int64_t t = Tb - 1; t >= 0; --t) {
    for (int64_t u = first; u <= Ub; u += step) {
      g.Leaving(b, t, u, beta, false, label_terms, blank_terms);
      beta[g.Node(b, t, u)] = g.LogSumOfSteps(label_terms, blank_terms);
    }
    __syncthreads();
    if (first == 0) {  // the zero-duration label steps, down the frame
      for (int64_t u = Ub - 1; u >= 0; --u) {
        const int64_t node = g.Node(b, t, u);
        beta[node] =
            LogAdd(beta[node], g.LabelWeight(node, 0) + beta[node + 1]);
      }
    }
    __syncthreads();
    // Frame t's beta is final: each node's occupations.  The next frame's
    // first phase reads beta of frames >= t only, and writes frame t - 1.
    for (int64_t u = first; u <= Ub; u += step) {
      g.Leaving(b, t, u, beta, true, label_terms, blank_terms);
      g.Occupy(b, t, u, alpha[g.Node(b, t, u)] - score, label_terms,
               blank_terms, p.label_occ, p.blank_occ, p.d_dur);
    }
  }
}

}  // namespace

template <typename T, typename L>
LaunchStatus TdtLoss(const TdtProblem<T, L>& p, char* illegal, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const TdtLattice<T>& g = p.lattice;
  const int64_t nodes = g.B * g.T_len * (g.S + 1);
  const struct {
    T* x;
    int64_t n;
  } zeros[] = {{p.label_occ, g.B * g.S * g.T_len},
               {p.blank_occ, g.B * (g.S + 1) * g.T_len},
               {p.d_dur, nodes * g.K}};
  for (const auto& z : zeros) {
    if (z.n == 0) continue;  // S = 0: no label steps
    const LaunchStatus status = cudaMemsetAsync(z.x, 0, z.n * sizeof(T), st);
    if (status != cudaSuccess) return status;
  }
  if (p.ranges != nullptr) {  // nodes that no row provides take no step
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const struct {
      T* x;
      int64_t n;
    } fills[] = {{p.lab, nodes}, {p.blk, nodes}, {p.dur, nodes * g.K}};
    for (const auto& f : fills) {
      const LaunchStatus status = LaunchFill(f.x, f.n, kNegInf, st);
      if (status != cudaSuccess) return status;
    }
  }
  if (p.token_logits != nullptr) {
    TT_LAUNCH(RowBlocks(p.Rows()), kRowThreads, 0, st, TdtRowsKernel<T, L>)(p);
  } else {
    TT_LAUNCH(unsigned((nodes + 255) / 256), 256, 0, st,
              TdtLogProbsKernel<T, L>)(p);
  }
  TT_LAUNCH(unsigned(g.B), kLatticeThreads, 0, st, TdtLatticeKernel<T, L>)(
      p, illegal);
  return cudaGetLastError();
}

#define TF_TRANSDUCER_INSTANTIATE(T, L) \
  template LaunchStatus TdtLoss<T, L>(const TdtProblem<T, L>&, char*, void*)

TF_TRANSDUCER_GPU_LOSS_TYPES(TF_TRANSDUCER_INSTANTIATE);
#undef TF_TRANSDUCER_INSTANTIATE

}  // namespace gpu
}  // namespace tf_transducer
