// SPDX-License-Identifier: Apache-2.0
// Runs the MI recursion of mutual_information.h over a batch on a TensorFlow
// CPU thread pool: whole sequences per thread, or, for fewer sequences than
// threads and long ones, a pipelined wavefront of tiles.  Shared by the MI
// op and the fused RNN-T loss op.

#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CPU_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CPU_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "cc/kernels/chain_scheduler.h"
#include "cc/kernels/mutual_information.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace tf_transducer {
namespace mi_cpu {

using ::tensorflow::thread::ThreadPool;

// Below this many cells per sequence (a few ms of work), splitting one
// sequence into tiles costs more in synchronisation and thread wake-ups than
// it gains (benchmarks/BENCHMARKS.md).
constexpr int64_t kMinCellsForWavefront = 1 << 20;
// The wavefront cuts each sequence into ceil(threads / B) bands of s and
// kTilesPerBand times as many ranges of t, so that the pipeline's fill and
// drain (a band waits for the one before it) cost little, each at least
// kMinTileExtent cells wide so that a diagonal of a tile fills vectors.
constexpr int64_t kTilesPerBand = 8;
constexpr int64_t kMinTileExtent = 32;

// True when x[begin, end) holds a NaN or +inf.  Branch-free, so it
// vectorises.
template <typename T>
bool HasIllegalValue(const T* x, int64_t begin, int64_t end) {
  bool bad = false;
  for (int64_t i = begin; i < end; ++i) {
    bad |= !(x[i] < std::numeric_limits<T>::infinity());
  }
  return bad;
}

// Returns the first entry of `x` (shape [B, rows, cols]) that is NaN or +inf
// as {b, row, col}, or an empty vector when there is none.
template <typename T>
std::vector<int64_t> FirstIllegalValue(const T* x, int64_t rows, int64_t cols,
                                       int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!(x[i] < std::numeric_limits<T>::infinity())) {
      const int64_t per_batch = rows * cols;
      return {i / per_batch, (i % per_batch) / cols, i % cols};
    }
  }
  return {};
}

// True when sequence b of the problem has a NaN or +inf in px or py.
template <typename T>
bool SequenceHasIllegalValue(const MutualInformationProblem<T>& p, int64_t b) {
  const int64_t nx = p.S * p.T1, ny = p.width() * p.T_len;
  return HasIllegalValue(p.px + b * nx, 0, nx) ||
         HasIllegalValue(p.py + b * ny, 0, ny);
}

// Many sequences: each thread takes whole sequences, forward then backward.
template <typename Scalar>
void RunPerSequence(const MutualInformationProblem<Scalar>& p, ThreadPool* pool,
                    char* illegal) {
  // One task per sequence, largest rectangle first, handed out to
  // whichever thread is free: padding-heavy batches still split evenly.
  const int64_t B = p.batch;
  std::vector<int64_t> order(B), area(B);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = p.boundary + 4 * b;
    area[b] = (row[2] - row[0] + 1) * (row[3] - row[1] + 1);
    order[b] = b;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return area[x] > area[y]; });
  const MutualInformationTile whole{0, p.width(), 0, p.T_len + 1};
  pool->ParallelFor(B, ThreadPool::SchedulingParams::Fixed(1),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t i = begin; i < end; ++i) {
                        const int64_t b = order[i];
                        illegal[b] = SequenceHasIllegalValue(p, b);
                        if (illegal[b]) continue;
                        MutualInformationForwardTile(p, b, whole);
                        p.scores[b] = MutualInformationScore(p, b);
                        MutualInformationBackwardTile(p, b, whole);
                      }
                    });
}

// Few, long sequences: each is cut into `bands` bands of s and ranges of
// t, and the tiles run as a pipelined wavefront (chain_scheduler.h), one
// chain per band: forward with t ascending, then backward with t
// descending and the bands in reverse order.
template <typename Scalar>
void RunWavefront(const MutualInformationProblem<Scalar>& p, ThreadPool* pool,
                  int threads) {
  const int64_t W = p.width(), T_cells = p.T_len + 1;
  const int64_t bands = std::max<int64_t>(
      1,
      std::min<int64_t>((threads + p.batch - 1) / p.batch, W / kMinTileExtent));
  // Bands start on cache-line boundaries of the scratch rows.
  constexpr int64_t kLine = MutualInformationProblem<Scalar>::kCellsPerLine;
  const int64_t s_step = ((W + bands - 1) / bands + kLine - 1) / kLine * kLine;
  const int64_t t_tiles = std::max<int64_t>(
      1, std::min<int64_t>(kTilesPerBand * bands, T_cells / kMinTileExtent));
  const int64_t t_step = (T_cells + t_tiles - 1) / t_tiles;
  const int64_t chains = p.batch * bands;
  const int workers = static_cast<int>(std::min<int64_t>(threads, chains));
  auto tile = [&](int64_t sb, int64_t tb) {
    return MutualInformationTile{sb * s_step, std::min(W, (sb + 1) * s_step),
                                 tb * t_step,
                                 std::min(T_cells, (tb + 1) * t_step)};
  };
  ChainScheduler forward(chains, bands, t_tiles);
  pool->ParallelFor(workers, ThreadPool::SchedulingParams::Fixed(1),
                    [&](int64_t worker, int64_t) {
                      forward.Work(worker, workers, [&](int64_t c, int64_t tb) {
                        MutualInformationForwardTile(p, c / bands,
                                                     tile(c % bands, tb));
                      });
                    });
  for (int64_t b = 0; b < p.batch; ++b) {
    p.scores[b] = MutualInformationScore(p, b);
  }
  ChainScheduler backward(chains, bands, t_tiles);
  pool->ParallelFor(
      workers, ThreadPool::SchedulingParams::Fixed(1),
      [&](int64_t worker, int64_t) {
        backward.Work(worker, workers, [&](int64_t c, int64_t step) {
          MutualInformationBackwardTile(
              p, c / bands, tile(bands - 1 - c % bands, t_tiles - 1 - step));
        });
      });
}

}  // namespace mi_cpu

// Computes p.scores, p.px_grad and p.py_grad.  A sequence whose px or py
// holds a NaN or +inf is not computed: its entry of `illegal` (size B) is set
// to 1, and the caller reports the error.
template <typename T>
void RunMutualInformationCpu(const MutualInformationProblem<T>& p,
                             mi_cpu::ThreadPool* pool, char* illegal) {
  const int threads = pool->NumThreads();
  const int64_t cells = p.num_diagonals() * p.width();
  if (p.batch < threads && cells >= mi_cpu::kMinCellsForWavefront) {
    bool any = false;
    for (int64_t b = 0; b < p.batch; ++b) {
      illegal[b] = mi_cpu::SequenceHasIllegalValue(p, b);
      any |= illegal[b] != 0;
    }
    if (!any) mi_cpu::RunWavefront(p, pool, threads);
  } else {
    mi_cpu::RunPerSequence(p, pool, illegal);
  }
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_CPU_H_
