// CPU kernel of TfTransducerMutualInformation.  The recursion and the
// gradient are written out in mutual_information.h.

#include <algorithm>
#include <atomic>
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

// Below this many cells per sequence, splitting one sequence into tiles costs
// more in synchronisation than it gains.
constexpr int64_t kMinCellsForWavefront = 65536;
// The wavefront cuts each sequence into ceil(threads / B) bands of s and
// kTilesPerBand times as many ranges of k, so that the pipeline's fill and
// drain (a band waits for the one before it) cost little.
constexpr int64_t kTilesPerBand = 8;
constexpr int64_t kMinTileExtent = 16;

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
// as {b, row, col}, or an empty vector when there is none.  The scan is
// split over the thread pool; the search for the position only runs when
// there is something to report.
template <typename T>
std::vector<int64_t> FirstIllegalValue(ThreadPool* pool, const T* x,
                                       int64_t rows, int64_t cols, int64_t n) {
  std::atomic<bool> any_bad{false};
  pool->ParallelFor(n, ThreadPool::SchedulingParams::Adaptive(2),
                    [&](int64_t begin, int64_t end) {
                      if (HasIllegalValue(x, begin, end)) any_bad = true;
                    });
  if (!any_bad) return {};
  for (int64_t i = 0; i < n; ++i) {
    if (!(x[i] < std::numeric_limits<T>::infinity())) {
      const int64_t per_batch = rows * cols;
      return {i / per_batch, (i % per_batch) / cols, i % cols};
    }
  }
  return {};
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
    ThreadPool* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    CheckValues(ctx, pool, px, "px");
    if (!ctx->status().ok()) return;
    CheckValues(ctx, pool, py, "py");
    if (!ctx->status().ok()) return;

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
    Tensor alpha, wx, wy;
    const TensorShape scratch({p.buffer_size()});
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &alpha));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &wx));
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(px.dtype(), scratch, &wy));
    p.px = px.flat<Scalar>().data();
    p.py = py.flat<Scalar>().data();
    p.boundary = bnd.data();
    p.scores = scores->flat<Scalar>().data();
    p.px_grad = px_grad->flat<Scalar>().data();
    p.py_grad = py_grad->flat<Scalar>().data();
    p.alpha = alpha.flat<Scalar>().data();
    p.wx = wx.flat<Scalar>().data();
    p.wy = wy.flat<Scalar>().data();

    const int threads = pool->NumThreads();
    const int64_t cells = p.num_diagonals() * p.width();
    if (B < threads && cells >= kMinCellsForWavefront) {
      RunWavefront(p, pool, threads);
    } else {
      RunPerSequence(p, pool);
    }
  }

 private:
  static void CheckValues(OpKernelContext* ctx, ThreadPool* pool,
                          const Tensor& x, const char* name) {
    const std::vector<int64_t> at =
        FirstIllegalValue(pool, x.flat<Scalar>().data(), x.dim_size(1),
                          x.dim_size(2), x.NumElements());
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
                             ThreadPool* pool) {
    const int64_t K = p.num_diagonals(), W = p.width();
    pool->ParallelFor(p.batch,
                      ThreadPool::SchedulingParams::Adaptive(K * W * 20),
                      [&p, K, W](int64_t begin, int64_t end) {
                        for (int64_t b = begin; b < end; ++b) {
                          MutualInformationPrepare(p, b);
                          MutualInformationForwardTile(p, b, 0, K, 0, W);
                          p.scores[b] = MutualInformationScore(p, b);
                          MutualInformationBackwardTile(p, b, 0, K, 0, W);
                        }
                      });
  }

  // Few, long sequences: each is cut into bands of s and ranges of k, and
  // the tiles run as a pipelined wavefront (see chain_scheduler.h): a chain
  // per band, forward over k ascending, then backward over k descending with
  // the bands in reverse order.
  static void RunWavefront(const MutualInformationProblem<Scalar>& p,
                           ThreadPool* pool, int threads) {
    const int64_t K = p.num_diagonals(), W = p.width();
    const int64_t bands = std::max<int64_t>(
        1, std::min<int64_t>((threads + p.batch - 1) / p.batch,
                             W / kMinTileExtent));
    const int64_t s_step = (W + bands - 1) / bands;
    const int64_t k_tiles = std::max<int64_t>(
        1, std::min<int64_t>(kTilesPerBand * bands, K / kMinTileExtent));
    const int64_t k_step = (K + k_tiles - 1) / k_tiles;
    const int64_t chains = p.batch * bands;
    const int workers = static_cast<int>(std::min<int64_t>(threads, chains));

    for (int64_t b = 0; b < p.batch; ++b) MutualInformationPrepare(p, b);
    ChainScheduler forward(chains, bands, k_tiles);
    pool->ParallelFor(workers, ThreadPool::SchedulingParams::Fixed(1),
                      [&](int64_t, int64_t) {
                        forward.Work([&](int64_t chain, int64_t kb) {
                          const int64_t b = chain / bands, sb = chain % bands;
                          MutualInformationForwardTile(
                              p, b, kb * k_step, std::min(K, (kb + 1) * k_step),
                              sb * s_step, std::min(W, (sb + 1) * s_step));
                        });
                      });
    for (int64_t b = 0; b < p.batch; ++b) {
      p.scores[b] = MutualInformationScore(p, b);
    }
    ChainScheduler backward(chains, bands, k_tiles);
    pool->ParallelFor(workers, ThreadPool::SchedulingParams::Fixed(1),
                      [&](int64_t, int64_t) {
                        backward.Work([&](int64_t chain, int64_t step) {
                          const int64_t b = chain / bands;
                          const int64_t sb = bands - 1 - chain % bands;
                          const int64_t kb = k_tiles - 1 - step;
                          MutualInformationBackwardTile(
                              p, b, kb * k_step, std::min(K, (kb + 1) * k_step),
                              sb * s_step, std::min(W, (sb + 1) * s_step));
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
