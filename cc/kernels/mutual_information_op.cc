// CPU kernel of TfTransducerMutualInformation.  The recursion and the
// gradient are written out in mutual_information.h.

#include <algorithm>
#include <cmath>
#include <vector>

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
constexpr int64_t kMinCellsForWavefront = 16384;
// Tile extent along the diagonals; wide tiles keep the number of waves (and
// so of barriers) small.
constexpr int64_t kTileDiagonals = 64;

// Returns the first entry of `x` (shape [B, rows, cols]) that is NaN or +inf
// as {b, row, col}, or an empty vector when there is none.
template <typename T>
std::vector<int64_t> FirstIllegalValue(const T* x, int64_t rows, int64_t cols,
                                       int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || x[i] == std::numeric_limits<T>::infinity()) {
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
    CheckValues(ctx, px, "px");
    if (!ctx->status().ok()) return;
    CheckValues(ctx, py, "py");
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
    const int64_t W = p.width(), K = p.num_diagonals();
    Tensor alpha, g;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_temp(px.dtype(), TensorShape({B, K, W}), &alpha));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_temp(px.dtype(), TensorShape({B, K, W}), &g));
    p.px = px.flat<Scalar>().data();
    p.py = py.flat<Scalar>().data();
    p.boundary = bnd.data();
    p.scores = scores->flat<Scalar>().data();
    p.px_grad = px_grad->flat<Scalar>().data();
    p.py_grad = py_grad->flat<Scalar>().data();
    p.alpha = alpha.flat<Scalar>().data();
    p.g = g.flat<Scalar>().data();

    ThreadPool* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    const int threads = pool->NumThreads();
    if (threads > 1 && B < 2 * threads && K * W >= kMinCellsForWavefront) {
      RunWavefront(p, pool, threads);
    } else {
      RunPerSequence(p, pool);
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t* row = p.boundary + 4 * b;
      p.scores[b] = p.alpha[(b * K + row[3] + p.r() * row[2]) * W + row[2]];
    }
  }

 private:
  static void CheckValues(OpKernelContext* ctx, const Tensor& x,
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
                             ThreadPool* pool) {
    const int64_t K = p.num_diagonals(), W = p.width();
    pool->ParallelFor(p.batch,
                      ThreadPool::SchedulingParams::Adaptive(K * W * 100),
                      [&p, K, W](int64_t begin, int64_t end) {
                        for (int64_t b = begin; b < end; ++b) {
                          MutualInformationForwardTile(p, b, 0, K, 0, W);
                          MutualInformationBackwardTile(p, b, 0, K, 0, W);
                        }
                      });
  }

  // Few, long sequences: tiles of (k, s), one wave of independent tiles at a
  // time (see mutual_information.h), forward waves then backward waves.
  static void RunWavefront(const MutualInformationProblem<Scalar>& p,
                           ThreadPool* pool, int threads) {
    const int64_t K = p.num_diagonals(), W = p.width();
    const int64_t s_tiles = std::max<int64_t>(
        1, std::min<int64_t>((2 * threads + p.batch - 1) / p.batch, W / 8));
    const int64_t s_step = (W + s_tiles - 1) / s_tiles;
    const int64_t k_tiles = (K + kTileDiagonals - 1) / kTileDiagonals;
    const int64_t waves = k_tiles + s_tiles - 1;
    struct Tile {
      int64_t b, k0, k1, s0, s1;
    };
    std::vector<Tile> tiles;
    auto collect = [&](int64_t wave) {
      tiles.clear();
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t sb = 0; sb < s_tiles; ++sb) {
          const int64_t kb = wave - sb;
          if (kb < 0 || kb >= k_tiles) continue;
          tiles.push_back({b, kb * kTileDiagonals,
                           std::min(K, (kb + 1) * kTileDiagonals), sb * s_step,
                           std::min(W, (sb + 1) * s_step)});
        }
      }
    };
    for (int64_t wave = 0; wave < waves; ++wave) {
      collect(wave);
      pool->ParallelFor(tiles.size(), ThreadPool::SchedulingParams::Fixed(1),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t i = begin; i < end; ++i) {
                            const Tile& t = tiles[i];
                            MutualInformationForwardTile(p, t.b, t.k0, t.k1,
                                                         t.s0, t.s1);
                          }
                        });
    }
    // Backward: the mirror image, tile (kb, sb) after (kb + 1, sb + 1),
    // (kb + 1, sb) and (kb, sb + 1).
    for (int64_t wave = waves - 1; wave >= 0; --wave) {
      collect(wave);
      pool->ParallelFor(tiles.size(), ThreadPool::SchedulingParams::Fixed(1),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t i = begin; i < end; ++i) {
                            const Tile& t = tiles[i];
                            MutualInformationBackwardTile(p, t.b, t.k0, t.k1,
                                                          t.s0, t.s1);
                          }
                        });
    }
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
