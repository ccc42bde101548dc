// SPDX-License-Identifier: Apache-2.0
// The CUDA kernels' entry points, as plain C++: device pointers, sizes and
// the CUDA stream as a void*.  The .cu files that define them include no
// TensorFlow header, and the TensorFlow glue (the *_op.cc files, compiled by
// g++ with GOOGLE_CUDA) includes no CUDA header; this file is all they
// share.  Each launcher enqueues its work on `stream` and returns the
// cudaError_t of the launch as an int (0: success); LaunchErrorString names
// one.

#ifndef TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCHERS_H_
#define TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCHERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc/kernels/mutual_information_cell.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/tdt_loss.h"

namespace tf_transducer {
namespace gpu {

// What a launcher returns: a cudaError_t.
using LaunchStatus = int;

const char* LaunchErrorString(LaunchStatus status);

// Enqueues a copy of `bytes` bytes from host memory to device memory.  The
// copy may still read the host buffer after this returns (pinned memory):
// Synchronize before releasing it.
LaunchStatus CopyToDevice(void* device_dst, const void* host_src, size_t bytes,
                          void* stream);

// Waits for the work enqueued on `stream`.
LaunchStatus Synchronize(void* stream);

// Copies `bytes` bytes from device memory to host memory once the work
// enqueued before it on `stream` has run; returns when the copy is done.
LaunchStatus CopyToHost(void* host_dst, const void* device_src, size_t bytes,
                        void* stream);

// The MI recursion: p.scores, p.px_grad and p.py_grad from p.px, p.py and
// p.boundary (all device pointers; p.alpha and p.e are device scratch of
// p.buffer_size() elements).  illegal[b] (device, B bytes) is set to 1 for a
// sequence whose px or py holds a NaN or +inf; such a sequence is not
// computed (its score is left as is).  One thread block per sequence walks
// its diagonals.
template <typename T>
LaunchStatus MutualInformation(const MutualInformationProblem<T>& p,
                               char* illegal, void* stream);

// The (maths' type T, inputs' type L) pairs the loss launchers are
// instantiated for; X(T, L) is called once per pair.
#define TF_TRANSDUCER_GPU_LOSS_TYPES(X) \
  X(float, float);                      \
  X(double, double);                    \
  X(float, Half);                       \
  X(float, BFloat16)

// Pass 1 of the fused RNN-T loss: fills p.px and p.py with -inf, then writes
// every used row's normaliser, px and py (a warp per row) and finishes the
// px rows (rnnt_type, delay penalty); unused rows get a normaliser of 0.
// All pointers of `p` are device pointers.  Instantiated for
// TF_TRANSDUCER_GPU_LOSS_TYPES.
template <typename T, typename L>
LaunchStatus RnntLogProbs(const RnntProblem<T, L>& p, void* stream);

// Pass 3: grad = scale[b] * d scores[b] / d logits, a warp per row, each
// logit read once and each gradient element written once.
template <typename T, typename L>
LaunchStatus RnntGradient(const RnntGradientProblem<T, L>& p, void* stream);

// The TDT loss (tdt_loss.cu; tdt_loss_op.cc has the formulas): pass 1 (a
// warp per row of token logits: normaliser, label and blank log-probs,
// log-softmaxed durations; normaliser 0 for the rows outside an
// utterance; for pruned rows the other nodes' log-probs are -inf first;
// with token log-probs instead, a thread per node), then the lattice of each
// utterance (a thread block per utterance: each frame's nodes in parallel, the
// zero-duration label steps of a frame in order).  p.label_occ, p.blank_occ and
// p.d_dur are zeroed first.  illegal[b] (device, B bytes) is set to 1 for an
// utterance whose score is NaN or +inf, whose gradient stays zero; 0 for the
// others.  All pointers of `p` (and its lattice's) are device pointers.
// Instantiated for TF_TRANSDUCER_GPU_LOSS_TYPES.
template <typename T, typename L>
LaunchStatus TdtLoss(const TdtProblem<T, L>& p, char* illegal, void* stream);

// ---------------------------------------------------------------------------
// The RNN-T loss fused with its joint network (rnnt_joint.cu; the formulas
// are in rnnt_joint_op.cc).  The cells (b, t, s) that take part are cut into
// chunks of at most a capacity of rows; per chunk the kernels form
// h = act(e[b, t] + p[b, s]) [rows, J] and l = h W + c [rows, C] in scratch,
// so that nothing of size [B, T, S + 1, J] or [B, T, S + 1, C] exists.  A
// chunk holds pieces: runs of consecutive positions s of one frame
// f = b * T + t.  The host plans the chunks (PlanJointChunks) from each
// frame's range of used positions; the launchers then enqueue every chunk's
// kernels on `stream`, one chunk after the other.

// Positions s0 .. s0 + rows - 1 of frame `frame`, rows first_row .. of its
// chunk.
struct JointPiece {
  int64_t frame, s0, rows, first_row;
};

// Pieces [piece_begin, piece_end) of the plan, `rows` rows in all, of
// sequences b_first ..= b_last.
struct JointChunk {
  int64_t piece_begin, piece_end, rows, b_first, b_last;
};

struct JointPlan {
  std::vector<JointPiece> pieces;
  std::vector<JointChunk> chunks;
  int64_t max_rows = 0;  // rows of the largest chunk (0: no chunk)
};

// Scratch the chunk buffers may take, and the most partial sums of dW.
constexpr int64_t kJointScratchBytes = int64_t(64) << 20;
constexpr int64_t kJointMaxSplits = 8;

// Rows per chunk: h [rows, J] and l [rows, C] (and for the gradient dh
// [rows, J]) of `scalar_bytes` each within kJointScratchBytes, a multiple of
// 128 in [128, 2^20].
inline int64_t JointChunkCapacity(int64_t J, int64_t C, size_t scalar_bytes,
                                  bool gradient) {
  const int64_t per_row = ((gradient ? 2 : 1) * J + C) * int64_t(scalar_bytes);
  const int64_t rows = std::min<int64_t>(kJointScratchBytes / per_row, 1 << 20);
  return std::max<int64_t>(128, rows / 128 * 128);
}

// How many partial sums of dW [J, C] and dc [C] the gradient may keep (the
// product over a chunk's rows is split over them; 1: none kept, the product
// adds into dW itself).
inline int64_t JointWeightSplits(int64_t J, int64_t C, size_t scalar_bytes) {
  const int64_t fit =
      kJointScratchBytes / ((J * C + C) * int64_t(scalar_bytes));
  return std::max<int64_t>(1, std::min<int64_t>(kJointMaxSplits, fit));
}

// ranges [frames, 2] (host) of the forward pass: frame b * T + t holds
// positions boundary[b, 0] ..= boundary[b, 2] when boundary[b, 1] <= t <
// boundary[b, 3], none (first > last) otherwise.
std::vector<int64_t> JointBoundaryRanges(const int64_t* boundary, int64_t B,
                                         int64_t T_len);

// The chunks of the frames' used positions: ranges [frames, 2] (host) holds
// each frame's first and last used position (first > last: none).  Pieces
// follow the frames in order and fill each chunk up to `capacity` rows; a
// frame that does not fit is split, so a frame has at most one piece per
// chunk.
JointPlan PlanJointChunks(const int64_t* ranges, int64_t frames, int64_t T_len,
                          int64_t capacity);

// How the joint's matrix products (h W, h^T G, G W^T) run.  kExact: in the
// maths' type T on the CUDA cores (float32 or float64).  kTensorCores: on
// tensor cores, accumulated in float32, with the operands in the inputs'
// type L: for Half and BFloat16 inputs the hidden h and the logits'
// gradient G are rounded to it (W is already in it), for float inputs all
// operands are rounded to TF32 (10 mantissa bits).  Double inputs always
// take kExact.
enum class JointProducts { kExact, kTensorCores };

// The joint's inputs (rnnt_joint.h) and the chunk scratch, all device
// pointers.  Inputs of type L (float, double, Half, BFloat16), the maths in
// T.
template <typename T, typename L>
struct RnntJointProblem : RnntJointInputs<L> {
  T* wide_weight;      // [J, C] and [C]: weight and bias widened to T
  T* wide_bias;        // (16-bit inputs only; null when L is T)
  T* hidden;           // [max_rows, J]
  T* logits;           // [max_rows, C]
  int64_t* row_cells;  // [max_rows]: each row's cell (b * T + t) * (S + 1) + s
  JointPiece* pieces;  // [plan.pieces.size()]
  JointProducts products = JointProducts::kExact;
};

// Pass 1 of the joint loss: px and py filled with -inf and the normalisers
// with 0, then every planned row's normaliser, px and py written (the rows
// of `plan`, from JointBoundaryRanges), then the px rows finished.  `rows`
// gives the loss's options and its px, py, norms, symbols and boundary
// (device; its logits and ranges are unused, R = S + 1).  The recursion
// (MutualInformation) follows, as for RnntLogProbs.
template <typename T, typename L>
LaunchStatus RnntJointLogProbs(const RnntJointProblem<T, L>& joint,
                               const RnntProblem<T, T>& rows,
                               const JointPlan& plan, void* stream);

// The gradient op's problem: `rows` holds px_grad, py_grad, norms, scale,
// symbols and the options (its logits, ranges and grad are unused,
// R = S + 1); d_* are the outputs (type L) and acc_* their sums in T (the
// outputs themselves when L is T).  d_hidden [max_rows, J]; partial
// [max_splits, J * C + C] when max_splits > 1 (JointWeightSplits).
template <typename T, typename L>
struct RnntJointGradientProblem {
  RnntJointProblem<T, L> joint;
  RnntGradientProblem<T, T> rows;
  T* d_hidden;
  T* partial;
  int64_t max_splits;
  T *acc_encoder, *acc_predictor, *acc_weight, *acc_bias;
  L *d_encoder, *d_predictor, *d_weight, *d_bias;
};

// ranges [B * T, 2] (device): each frame's first and last position whose
// gradient is not zero (gx + gy != 0), first > last when none.  Copied to
// the host, they are what PlanJointChunks plans the gradient from.
template <typename T, typename L>
LaunchStatus RnntJointUsedRanges(const RnntJointGradientProblem<T, L>& p,
                                 int64_t* ranges, void* stream);

// Pass 3: the gradients of encoder, predictor, weight and bias, chunk by
// chunk of `plan`.  Deterministic: every sum is taken in a fixed order (no
// atomics).
template <typename T, typename L>
LaunchStatus RnntJointGradient(const RnntJointGradientProblem<T, L>& p,
                               const JointPlan& plan, void* stream);

}  // namespace gpu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCHERS_H_
