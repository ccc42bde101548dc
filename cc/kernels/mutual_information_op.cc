// CPU kernel of TfTransducerMutualInformation.  The recursion and the
// gradient are written out in mutual_information.h.

#include <algorithm>
#include <cmath>
#include <vector>

#include "cc/kernels/chain_scheduler.h"
#include "cc/kernels/mutual_information.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace tf_transducer {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::errors::InvalidArgument;
using ::tensorflow::thread::ThreadPool;

namespace {

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

}  // namespace

template <typename Scalar>
class MutualInformationOp : public OpKernel {
 public:
  explicit MutualInformationOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& px = ctx->input(0);
    const Tensor& py = ctx->input(1);
    const Tensor& boundary = ctx->input(2);
    OP_REQUIRES(ctx, px.dims() == 3,
                InvalidArgument("px must have rank 3 [B, S, T + 1] or "
                                "[B, S, T], got shape ",
                                px.shape().DebugString()));
    OP_REQUIRES(ctx, py.dims() == 3,
                InvalidArgument("py must have rank 3 [B, S + 1, T], got shape ",
                                py.shape().DebugString()));
    const int64_t B = px.dim_size(0), S = px.dim_size(1), T1 = px.dim_size(2);
    const int64_t T = py.dim_size(2);
    OP_REQUIRES(ctx, B > 0,
                InvalidArgument("px has an empty batch (B = 0): shape ",
                                px.shape().DebugString()));
    OP_REQUIRES(
        ctx, py.dim_size(0) == B && py.dim_size(1) == S + 1,
        InvalidArgument("py must have shape [B, S + 1, T] = [", B, ", ", S + 1,
                        ", T] to match px of shape ", px.shape().DebugString(),
                        ", got ", py.shape().DebugString()));
    OP_REQUIRES(
        ctx, S > 0 && T > 0,
        InvalidArgument("S and T must be positive (pass a boundary to "
                        "express empty sequences), got S = ",
                        S, " from px of shape ", px.shape().DebugString(),
                        " and T = ", T, " from py of shape ",
                        py.shape().DebugString()));
    OP_REQUIRES(
        ctx, T1 == T || T1 == T + 1,
        InvalidArgument("px must have T + 1 = ", T + 1, " (regular) or T = ", T,
                        " (modified) columns to match py of shape ",
                        py.shape().DebugString(), ", got px of shape ",
                        px.shape().DebugString()));
    OP_REQUIRES(ctx,
                boundary.dims() == 2 && boundary.dim_size(0) == B &&
                    boundary.dim_size(1) == 4,
                InvalidArgument("boundary must have shape [B, 4] = [", B,
                                ", 4], got ", boundary.shape().DebugString()));

    const auto bnd = boundary.matrix<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s_begin = bnd(b, 0), t_begin = bnd(b, 1), s_end = bnd(b, 2),
                    t_end = bnd(b, 3);
      OP_REQUIRES(
          ctx,
          0 <= s_begin && s_begin <= s_end && s_end <= S && 0 <= t_begin &&
              t_begin <= t_end && t_end <= T,
          InvalidArgument("boundary[", b, "] = [", s_begin, ", ", t_begin, ", ",
                          s_end, ", ", t_end,
                          "] must satisfy 0 <= s_begin <= s_end <= S = ", S,
                          " and 0 <= t_begin <= t_end <= T = ", T));
    }
    Tensor* scores = nullptr;
    Tensor* px_grad = nullptr;
    Tensor* py_grad = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({B}), &scores));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, px.shape(), &px_grad));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, py.shape(), &py_grad));

    MutualInformationProblem<Scalar> p;
    p.batch = B;
    p.S = S;
    p.T_len = T;
    p.T1 = T1;
    Tensor alpha, e;
    const TensorShape scratch({p.buffer_size()});
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &alpha));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &e));
    p.px = px.flat<Scalar>().data();
    p.py = py.flat<Scalar>().data();
    p.boundary = bnd.data();
    p.scores = scores->flat<Scalar>().data();
    p.px_grad = px_grad->flat<Scalar>().data();
    p.py_grad = py_grad->flat<Scalar>().data();
    p.alpha = alpha.flat<Scalar>().data();
    p.e = e.flat<Scalar>().data();

    // px and py are checked for NaN / +inf sequence by sequence, inside the
    // parallel work; a sequence that fails is not computed.
    ThreadPool* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    const int threads = pool->NumThreads();
    const int64_t cells = p.num_diagonals() * p.width();
    std::vector<char> illegal(B, 0);
    if (B < threads && cells >= kMinCellsForWavefront) {
      for (int64_t b = 0; b < B; ++b) {
        illegal[b] = SequenceHasIllegalValue(p, b);
      }
      if (std::find(illegal.begin(), illegal.end(), 1) == illegal.end()) {
        RunWavefront(p, pool, threads);
      }
    } else {
      RunPerSequence(p, pool, illegal.data());
    }
    if (std::find(illegal.begin(), illegal.end(), 1) != illegal.end()) {
      ReportIllegalValue(ctx, px, "px");
      if (ctx->status().ok()) ReportIllegalValue(ctx, py, "py");
    }
  }

 private:
  // Fails the op if x holds a NaN or +inf, naming the first one.
  static void ReportIllegalValue(OpKernelContext* ctx, const Tensor& x,
                                 const char* name) {
    const std::vector<int64_t> at = FirstIllegalValue(
        x.flat<Scalar>().data(), x.dim_size(1), x.dim_size(2), x.NumElements());
    OP_REQUIRES(ctx, at.empty(),
                InvalidArgument(name,
                                " must be finite or -inf (-inf excludes "
                                "a step), got ",
                                x.tensor<Scalar, 3>()(at[0], at[1], at[2]),
                                " at ", name, "[", at[0], ", ", at[1], ", ",
                                at[2], "] of shape ", x.shape().DebugString()));
  }

  // Many sequences: each thread takes whole sequences, forward then backward.
  static void RunPerSequence(const MutualInformationProblem<Scalar>& p,
                             ThreadPool* pool, char* illegal) {
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
  static void RunWavefront(const MutualInformationProblem<Scalar>& p,
                           ThreadPool* pool, int threads) {
    const int64_t W = p.width(), T_cells = p.T_len + 1;
    const int64_t bands = std::max<int64_t>(
        1, std::min<int64_t>((threads + p.batch - 1) / p.batch,
                             W / kMinTileExtent));
    // Bands start on cache-line boundaries of the scratch rows.
    constexpr int64_t kLine = MutualInformationProblem<Scalar>::kCellsPerLine;
    const int64_t s_step =
        ((W + bands - 1) / bands + kLine - 1) / kLine * kLine;
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
    pool->ParallelFor(
        workers, ThreadPool::SchedulingParams::Fixed(1),
        [&](int64_t worker, int64_t) {
          forward.Work(worker, workers, [&](int64_t c, int64_t tb) {
            MutualInformationForwardTile(p, c / bands, tile(c % bands, tb));
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
};

#define TF_TRANSDUCER_REGISTER_MI(T)                            \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerMutualInformation") \
                              .Device(DEVICE_CPU)               \
                              .TypeConstraint<T>("T"),          \
                          MutualInformationOp<T>)

TF_TRANSDUCER_REGISTER_MI(float);
TF_TRANSDUCER_REGISTER_MI(double);
#undef TF_TRANSDUCER_REGISTER_MI

}  // namespace tf_transducer
