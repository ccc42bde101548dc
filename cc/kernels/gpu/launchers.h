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

#include <cstddef>
#include <cstdint>

#include "cc/kernels/mutual_information_cell.h"
#include "cc/kernels/rnnt_loss.h"

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

// Pass 1 of the fused RNN-T loss: fills p.px and p.py with -inf, then writes
// every used row's normaliser, px and py (a warp per row) and finishes the
// px rows (rnnt_type, delay penalty); unused rows get a normaliser of 0.
// All pointers of `p` are device pointers.  Instantiated for (T, L) =
// (float, float), (double, double), (float, Half) and (float, BFloat16).
template <typename T, typename L>
LaunchStatus RnntLogProbs(const RnntProblem<T, L>& p, void* stream);

// Pass 3: grad = scale[b] * d scores[b] / d logits, a warp per row, each
// logit read once and each gradient element written once.
template <typename T, typename L>
LaunchStatus RnntGradient(const RnntGradientProblem<T, L>& p, void* stream);

}  // namespace gpu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_GPU_LAUNCHERS_H_
