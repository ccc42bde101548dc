// SPDX-License-Identifier: Apache-2.0
// TfTransducerRnntPruningGrad on the CPU: the gradient of do_rnnt_pruning
// in one pass over its two [B, T, s_range, C] inputs (the op's doc has the
// sums).  TensorFlow's own gradient materialises the broadcast's sum over a
// middle axis and scatters the gather's rows one by one
// (UnsortedSegmentSum); here
//
//   am_grad: a thread per frame adds its s_range rows;
//   lm_grad: a thread per (sequence, block of kColumns classes) adds every
//            row of the sequence into a buffer of S + 1 rows, so no two
//            threads write the same element.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/kernel_names.h"
#include "cc/kernels/op_device.h"

namespace tf_transducer {

using ::tensorflow::TensorShapeUtils;

namespace {

// Classes per lm_grad work unit: a buffer of (S + 1) x kColumns sums.
constexpr int64_t kColumns = 128;

template <typename TfT>
class RnntPruningGradOp : public OpKernel {
 public:
  using T = typename StorageOf<TfT>::type;
  using Acc = decltype(Widen(T()));

  explicit RnntPruningGradOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& am_pruned = ctx->input(0);
    const Tensor& lm_pruned = ctx->input(1);
    const Tensor& ranges = ctx->input(2);
    const Tensor& lm_rows = ctx->input(3);
    OP_REQUIRES(ctx,
                am_pruned.dims() == 4 && lm_pruned.shape() == am_pruned.shape(),
                InvalidArgument("am_pruned_grad and lm_pruned_grad must both "
                                "be [B, T, s_range, C], got ",
                                am_pruned.shape().DebugString(), " and ",
                                lm_pruned.shape().DebugString()));
    const int64_t B = am_pruned.dim_size(0), T_len = am_pruned.dim_size(1),
                  R = am_pruned.dim_size(2), C = am_pruned.dim_size(3);
    OP_REQUIRES(
        ctx, ranges.shape() == TensorShape({B, T_len, R}),
        InvalidArgument("ranges must be [B, T, s_range] = [", B, ", ", T_len,
                        ", ", R, "], got ", ranges.shape().DebugString()));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(lm_rows.shape()),
                InvalidArgument("lm_rows must be a scalar, got shape ",
                                lm_rows.shape().DebugString()));
    const int64_t rows = lm_rows.scalar<int64_t>()();
    OP_REQUIRES(ctx, rows >= 1,
                InvalidArgument("lm_rows (S + 1) must be >= 1, got ", rows));
    const int64_t* range = ranges.flat<int64_t>().data();
    for (int64_t i = 0; i < B * T_len * R; ++i) {
      OP_REQUIRES(ctx, range[i] >= 0 && range[i] < rows,
                  InvalidArgument("ranges must lie in [0, S + 1) = [0, ", rows,
                                  "), got ", range[i], " at flat index ", i));
    }
    Tensor *am_grad, *lm_grad;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(0, TensorShape({B, T_len, C}), &am_grad));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(1, TensorShape({B, rows, C}), &lm_grad));
    const T* am_in = TensorData<TfT>(am_pruned);
    const T* lm_in = TensorData<TfT>(lm_pruned);
    T* am_out = reinterpret_cast<T*>(am_grad->flat<TfT>().data());
    T* lm_out = reinterpret_cast<T*>(lm_grad->flat<TfT>().data());
    ThreadPool* pool = CpuWorkers(ctx);

    pool->ParallelFor(B * T_len,
                      ThreadPool::SchedulingParams::Adaptive(R * C * 2),
                      [&](int64_t begin, int64_t end) {
                        std::vector<Acc> sum(C);
                        for (int64_t f = begin; f < end; ++f) {
                          std::fill(sum.begin(), sum.end(), Acc(0));
                          for (int64_t j = 0; j < R; ++j) {
                            const T* row = am_in + (f * R + j) * C;
                            for (int64_t c = 0; c < C; ++c)
                              sum[c] += Widen(row[c]);
                          }
                          T* out = am_out + f * C;
                          for (int64_t c = 0; c < C; ++c)
                            out[c] = Narrow<T>(sum[c]);
                        }
                      });

    const int64_t blocks = (C + kColumns - 1) / kColumns;
    pool->ParallelFor(
        B * blocks,
        ThreadPool::SchedulingParams::Adaptive(T_len * R * kColumns * 2),
        [&](int64_t begin, int64_t end) {
          std::vector<Acc> sums(rows * kColumns);
          for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t b = unit / blocks, c0 = (unit % blocks) * kColumns;
            const int64_t width = std::min(kColumns, C - c0);
            std::fill(sums.begin(), sums.end(), Acc(0));
            for (int64_t tj = 0; tj < T_len * R; ++tj) {
              const int64_t i = b * T_len * R + tj;
              const T* row = lm_in + i * C + c0;
              Acc* to = sums.data() + range[i] * kColumns;
              for (int64_t c = 0; c < width; ++c) to[c] += Widen(row[c]);
            }
            for (int64_t s = 0; s < rows; ++s) {
              T* out = lm_out + (b * rows + s) * C + c0;
              const Acc* from = sums.data() + s * kColumns;
              for (int64_t c = 0; c < width; ++c) out[c] = Narrow<T>(from[c]);
            }
          }
        });
  }
};

}  // namespace

#define TF_TRANSDUCER_REGISTER_PRUNING_GRAD(TfT)              \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerRnntPruningGrad") \
                              .Device(DEVICE_CPU)             \
                              .TypeConstraint<TfT>("T"),      \
                          RnntPruningGradOp<TfT>);

TF_TRANSDUCER_REGISTER_PRUNING_GRAD(Eigen::half);
TF_TRANSDUCER_REGISTER_PRUNING_GRAD(tensorflow::bfloat16);
TF_TRANSDUCER_REGISTER_PRUNING_GRAD(float);
TF_TRANSDUCER_REGISTER_PRUNING_GRAD(double);
#undef TF_TRANSDUCER_REGISTER_PRUNING_GRAD

}  // namespace tf_transducer
