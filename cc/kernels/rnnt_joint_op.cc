// SPDX-License-Identifier: Apache-2.0
// Kernels of TfTransducerRnntJointLoss and TfTransducerRnntJointLossGrad on
// the CPU: the RNN-T loss fused with its joint network.  For encoder
// projections e[b, t] and prediction-network projections p[b, s] (J values
// each), output weights W [J, C] and bias c [C]:
//
//   h[b, t, s]   = act(e[b, t] + p[b, s])                       [J]
//   l[b, t, s]   = h[b, t, s] W + c                             [C]
//
// and then the loss of TfTransducerRnntLoss on l (rnnt_loss_op.cc has its
// formulas: normalisers n, px, py, the recursion, and the gradient G of the
// score with respect to l, clamp and FastEmit included).  Backwards:
//
//   dW  = sum over cells of h^T G          dc = sum over cells of G
//   dh  = G W^T,   da = dh * act'(h)       (act' from h: tanh' = 1 - h^2)
//   de[b, t] = sum_s da[b, t, s]           dp[b, s] = sum_t da[b, t, s]
//
// Neither l nor h is ever stored whole.  The cells of a sequence's boundary
// are cut into tiles of a few frames (about kTileRows cells); a tile's h and
// l are formed in buffers of the thread that works on it, with the matrix
// products of tile_gemm.h.  The loss op keeps of each tile only its
// normalisers, px and py (O(B T S) in all); the gradient op forms each tile
// again (the recompute costs a fourth matrix product and saves writing and
// reading [B, T, S + 1, C] twice), turns l into G in place, and adds the
// tile's dW, dc and dp into accumulators of its thread (one copy of W's size
// per thread), summed at the end.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/input_checks.h"
#include "cc/kernels/op_device.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/rnnt_recursion.h"
#include "cc/kernels/row_math.h"
#include "cc/kernels/tile_gemm.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"

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

// Cells per tile: enough rows for the products to run at full speed, few
// enough that a tile's h and l stay small (kTileRows x (J + C) values).
constexpr int64_t kTileRows = 384;

// Frames [t0, t1) of sequence b, rows s_begin ..= s_end of each.
struct Tile {
  int64_t b, t0, t1, s_begin, s_end;
  int64_t rows() const { return (t1 - t0) * (s_end - s_begin + 1); }
};

// The tiles of every sequence's boundary (none for an empty one).
std::vector<Tile> MakeTiles(const int64_t* boundary, int64_t B) {
  std::vector<Tile> tiles;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* bnd = boundary + 4 * b;
    const int64_t width = bnd[2] - bnd[0] + 1;
    // The nearest whole number of frames (at least one).
    const int64_t frames =
        std::max<int64_t>(1, (kTileRows + width / 2) / width);
    for (int64_t t = bnd[1]; t < bnd[3]; t += frames) {
      tiles.push_back({b, t, std::min(t + frames, bnd[3]), bnd[0], bnd[2]});
    }
  }
  return tiles;
}

// One call's joint inputs as the kernels read them: L is the inputs' type,
// T the maths' (weight and bias already widened to T).
template <typename T, typename L>
struct JointInputs {
  int64_t B, T_len, S, C, J;
  const L* encoder;    // [B, T, J]
  const L* predictor;  // [B, S + 1, J]
  const T* weight;     // [J, C]
  const T* bias;       // [C]
  JointActivation activation;
};

// A thread's buffers for its tiles.
template <typename T>
struct TileBuffers {
  std::vector<T> hidden, logits, d_hidden;
  std::vector<int64_t> t, s;  // each row's cell
};

// The tile's rows (the cells with keep(t, s)), their h [rows, J] and l
// [rows, C] in `buf`; returns the number of rows.
template <typename T, typename L, typename Keep>
int64_t FormTile(const JointInputs<T, L>& in, const Tile& tile, Keep keep,
                 TileBuffers<T>* buf) {
  const int64_t J = in.J, C = in.C;
  buf->t.clear();
  buf->s.clear();
  for (int64_t t = tile.t0; t < tile.t1; ++t) {
    for (int64_t s = tile.s_begin; s <= tile.s_end; ++s) {
      if (keep(t, s)) {
        buf->t.push_back(t);
        buf->s.push_back(s);
      }
    }
  }
  const int64_t rows = buf->t.size();
  buf->hidden.resize(rows * J);
  buf->logits.resize(rows * C);
  for (int64_t r = 0; r < rows; ++r) {
    const L* e = in.encoder + (tile.b * in.T_len + buf->t[r]) * J;
    const L* p = in.predictor + (tile.b * (in.S + 1) + buf->s[r]) * J;
    T* h = buf->hidden.data() + r * J;
    for (int64_t j = 0; j < J; ++j) h[j] = T(Widen(e[j])) + T(Widen(p[j]));
  }
  T* hidden = buf->hidden.data();
  switch (in.activation) {
    case JointActivation::kTanh:
      TanhInPlace(hidden, rows * J);
      break;
    case JointActivation::kRelu:
      for (int64_t i = 0; i < rows * J; ++i) hidden[i] = Max(hidden[i], T(0));
      break;
    case JointActivation::kIdentity:
      break;
  }
  tile_gemm::Gemm(rows, C, J, tile_gemm::RowMajor(buf->hidden.data(), J),
                  tile_gemm::RowMajor(in.weight, C), buf->logits.data(), C,
                  /*accumulate=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    T* l = buf->logits.data() + r * C;
    for (int64_t c = 0; c < C; ++c) l[c] += in.bias[c];
  }
  return rows;
}

// dh[0, n) *= act'(x), from the activation's output h[0, n).
template <typename T>
void ThroughActivation(JointActivation activation, const T* h, T* dh,
                       int64_t n) {
  switch (activation) {
    case JointActivation::kTanh:
      for (int64_t i = 0; i < n; ++i) dh[i] *= T(1) - h[i] * h[i];
      break;
    case JointActivation::kRelu:
      for (int64_t i = 0; i < n; ++i) dh[i] = h[i] > T(0) ? dh[i] : T(0);
      break;
    case JointActivation::kIdentity:
      break;
  }
}

// x as T: the tensor itself, or a widened copy in `wide` (16-bit inputs).
template <typename T, typename TfL>
absl::Status WideData(OpKernelContext* ctx, const Tensor& x, Tensor* wide,
                      const T** out) {
  using L = typename StorageOf<TfL>::type;
  if constexpr (std::is_same_v<T, L>) {
    *out = x.flat<TfL>().data();
  } else {
    TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DataTypeToEnum<T>::value,
                                          x.shape(), wide));
    const L* src = TensorData<TfL>(x);
    T* dst = wide->flat<T>().data();
    for (int64_t i = 0; i < x.NumElements(); ++i) dst[i] = Widen(src[i]);
    *out = dst;
  }
  return absl::OkStatus();
}

// The joint's input tensors and their sizes.
struct JointTensors {
  const Tensor *encoder, *predictor, *weight, *bias, *symbols;
  int64_t B, T_len, S, C, J;
};

// Reads and checks the shapes of the joint's inputs: encoder [B, T, J],
// predictor [B, S + 1, J], weight [J, C], bias [C], symbols [B, S].
absl::Status GetJointTensors(OpKernelContext* ctx, JointTensors* x) {
  TF_RETURN_IF_ERROR(ctx->input("encoder", &x->encoder));
  TF_RETURN_IF_ERROR(ctx->input("predictor", &x->predictor));
  TF_RETURN_IF_ERROR(ctx->input("weight", &x->weight));
  TF_RETURN_IF_ERROR(ctx->input("bias", &x->bias));
  TF_RETURN_IF_ERROR(ctx->input("symbols", &x->symbols));
  const Tensor *encoder = x->encoder, *predictor = x->predictor,
               *weight = x->weight, *bias = x->bias, *symbols = x->symbols;
  const auto shape = [](const Tensor* t) { return t->shape().DebugString(); };
  if (encoder->dims() != 3 || predictor->dims() != 3 || weight->dims() != 2 ||
      bias->dims() != 1 || symbols->dims() != 2) {
    return InvalidArgument(
        "encoder [B, T, J], predictor [B, S + 1, J], weight [J, C], bias [C] "
        "and symbols [B, S] have the wrong ranks: encoder ",
        shape(encoder), ", predictor ", shape(predictor), ", weight ",
        shape(weight), ", bias ", shape(bias), ", symbols ", shape(symbols));
  }
  const int64_t B = encoder->dim_size(0), T_len = encoder->dim_size(1),
                J = encoder->dim_size(2), S = symbols->dim_size(1),
                C = weight->dim_size(1);
  if (!(B > 0 && T_len > 0 && S > 0 && C > 0 && J > 0)) {
    return InvalidArgument(
        "B, T, S, J and C must be positive, got encoder [B, T, J] = ",
        shape(encoder), ", symbols [B, S] = ", shape(symbols),
        " and weight [J, C] = ", shape(weight));
  }
  if (predictor->shape() != TensorShape({B, S + 1, J})) {
    return InvalidArgument("predictor must have shape [B, S + 1, J] = [", B,
                           ", ", S + 1, ", ", J, "] to match encoder ",
                           shape(encoder), " and symbols ", shape(symbols),
                           ", got ", shape(predictor));
  }
  if (weight->dim_size(0) != J || bias->dim_size(0) != C ||
      symbols->dim_size(0) != B) {
    return InvalidArgument("weight must be [J, C] with J = ", J,
                           " (from encoder), bias [C] and symbols [B, S] with "
                           "B = ",
                           B, "; got weight ", shape(weight), ", bias ",
                           shape(bias), ", symbols ", shape(symbols));
  }
  x->B = B;
  x->T_len = T_len;
  x->S = S;
  x->C = C;
  x->J = J;
  return absl::OkStatus();
}

// Reads and checks the joint's inputs (GetJointTensors) into `in`, weight
// and bias widened to T on the host.
template <typename T, typename TfL>
absl::Status ReadJointInputs(OpKernelContext* ctx, JointActivation activation,
                             Tensor* wide_weight, Tensor* wide_bias,
                             JointInputs<T, typename StorageOf<TfL>::type>* in,
                             const Tensor** symbols_out) {
  JointTensors x;
  TF_RETURN_IF_ERROR(GetJointTensors(ctx, &x));
  in->B = x.B;
  in->T_len = x.T_len;
  in->S = x.S;
  in->C = x.C;
  in->J = x.J;
  in->encoder = TensorData<TfL>(*x.encoder);
  in->predictor = TensorData<TfL>(*x.predictor);
  in->activation = activation;
  TF_RETURN_IF_ERROR(
      (WideData<T, TfL>(ctx, *x.weight, wide_weight, &in->weight)));
  TF_RETURN_IF_ERROR((WideData<T, TfL>(ctx, *x.bias, wide_bias, &in->bias)));
  *symbols_out = x.symbols;
  return absl::OkStatus();
}

// The attributes both ops take.
struct JointAttrs {
  int blank;
  RnntType type;
  JointActivation activation;
  float clamp, fastemit_lambda;
  bool allow_tf32;  // the GPU's float32 products in TF32 (the CPU ignores it)

  explicit JointAttrs(OpKernelConstruction* ctx) {
    std::string type_name, activation_name;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("termination_symbol", &blank));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rnnt_type", &type_name));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("activation", &activation_name));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clamp", &clamp));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fastemit_lambda", &fastemit_lambda));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("allow_tf32", &allow_tf32));
    type = ParseRnntType(type_name);
    activation = ParseJointActivation(activation_name);
  }
};

ThreadPool* Workers(OpKernelContext* ctx) {
  return ctx->device()->tensorflow_cpu_worker_threads()->workers;
}

// The recursion on the joint's px and py (RnntRecursion), with an error
// naming the joint's inputs for a sequence whose logits held a NaN or inf.
template <typename Device, typename Scalar>
absl::Status JointRecursion(OpKernelContext* ctx, int64_t B, int64_t S,
                            int64_t T, int64_t T1, const Scalar* px,
                            const Scalar* py, const int64_t* boundary,
                            Tensor* scores, Tensor* px_grad, Tensor* py_grad) {
  std::vector<char> illegal;
  TF_RETURN_IF_ERROR((RnntRecursion<Device, Scalar>(
      ctx, B, S, T, T1, px, py, boundary, scores, px_grad, py_grad, &illegal)));
  for (int64_t b = 0; b < B; ++b) {
    if (illegal[b]) {
      return InvalidArgument(
          "encoder, predictor, weight and bias must be finite: sequence ", b,
          " has a NaN or infinite logit");
    }
  }
  return absl::OkStatus();
}

// The loss op's checks beyond GetJointTensors (symbols, boundary and
// delay_penalty are host memory on every device): returns the boundary and
// the delay penalty.
template <typename Scalar>
absl::Status CheckLossInputs(OpKernelContext* ctx, const JointAttrs& attrs,
                             const JointTensors& x, const Tensor** boundary,
                             Scalar* delay_penalty) {
  const Tensor* penalty;
  TF_RETURN_IF_ERROR(ctx->input("boundary", boundary));
  TF_RETURN_IF_ERROR(ctx->input("delay_penalty", &penalty));
  if (penalty->dims() != 0) {
    return InvalidArgument("delay_penalty must be a scalar, got shape ",
                           penalty->shape().DebugString());
  }
  *delay_penalty = penalty->scalar<Scalar>()();
  if (!(*delay_penalty >= 0)) {
    return InvalidArgument("delay_penalty must be >= 0, got ", *delay_penalty);
  }
  if (!(attrs.blank >= 0 && attrs.blank < x.C)) {
    return InvalidArgument("termination_symbol must lie in [0, C) with C = ",
                           x.C, " (from weight), got ", attrs.blank);
  }
  if (!(attrs.type == RnntType::kRegular || x.T_len >= x.S)) {
    return InvalidArgument(
        "modified and constrained RNN-T need T >= S, got T = ", x.T_len,
        ", S = ", x.S);
  }
  TF_RETURN_IF_ERROR(
      CheckSymbols(x.symbols->flat<int64_t>().data(), x.B, x.S, x.C));
  return CheckBoundary(**boundary, x.B, x.S, x.T_len);
}

// The gradient op's inputs from the loss op: px_grad [B, S, T1], py_grad
// [B, S + 1, T], normalizers [B, T, S + 1] and scale [B], checked with the
// symbols and the blank.
struct JointGradTensors {
  const Tensor *px_grad, *py_grad, *norms, *scale;
};

absl::Status CheckGradInputs(OpKernelContext* ctx, const JointAttrs& attrs,
                             const JointTensors& x, JointGradTensors* g) {
  TF_RETURN_IF_ERROR(ctx->input("px_grad", &g->px_grad));
  TF_RETURN_IF_ERROR(ctx->input("py_grad", &g->py_grad));
  TF_RETURN_IF_ERROR(ctx->input("normalizers", &g->norms));
  TF_RETURN_IF_ERROR(ctx->input("scale", &g->scale));
  const int64_t B = x.B, T = x.T_len, S = x.S;
  const int64_t T1 = attrs.type == RnntType::kRegular ? T + 1 : T;
  // Inputs come from the loss op; check them all the same.
  if (!(g->px_grad->shape() == TensorShape({B, S, T1}) &&
        g->py_grad->shape() == TensorShape({B, S + 1, T}) &&
        g->norms->shape() == TensorShape({B, T, S + 1}) &&
        g->scale->shape() == TensorShape({B}))) {
    return InvalidArgument(
        "the joint RNN-T gradient op got inconsistent inputs: px_grad ",
        g->px_grad->shape().DebugString(), ", py_grad ",
        g->py_grad->shape().DebugString(), ", normalizers ",
        g->norms->shape().DebugString(), ", scale ",
        g->scale->shape().DebugString());
  }
  if (!(attrs.blank >= 0 && attrs.blank < x.C)) {
    return InvalidArgument("termination_symbol must lie in [0, C)");
  }
  return CheckSymbols(x.symbols->flat<int64_t>().data(), B, S, x.C);
}

}  // namespace

// Passes 1 and 2: the tiles' normalisers, px and py, then the recursion.
template <typename TfL, typename Scalar>
class RnntJointLossOp : public OpKernel {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit RnntJointLossOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), attrs_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    JointInputs<Scalar, L> in;
    Tensor wide_weight, wide_bias;
    const Tensor *symbols, *boundary;
    JointTensors x;
    Scalar delay_penalty;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx,
                   CheckLossInputs(ctx, attrs_, x, &boundary, &delay_penalty));
    OP_REQUIRES_OK(
        ctx, (ReadJointInputs<Scalar, TfL>(ctx, attrs_.activation, &wide_weight,
                                           &wide_bias, &in, &symbols)));
    const int64_t B = in.B, T = in.T_len, S = in.S, C = in.C;
    const int64_t* sym = symbols->flat<int64_t>().data();
    const int64_t T1 = attrs_.type == RnntType::kRegular ? T + 1 : T;

    Tensor *scores, *px_grad, *py_grad, *norms;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({B}), &scores));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, TensorShape({B, S, T1}), &px_grad));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(2, TensorShape({B, S + 1, T}), &py_grad));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(3, TensorShape({B, T, S + 1}), &norms));
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    Tensor px, py;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, TensorShape({B, S, T1}), &px));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_temp(dt, TensorShape({B, S + 1, T}), &py));

    RnntProblem<Scalar, Scalar> pr;
    pr.B = B;
    pr.T_len = T;
    pr.S = S;
    pr.C = C;
    pr.R = S + 1;
    pr.T1 = T1;
    pr.logits = nullptr;  // each row comes from a tile (WriteRowOf)
    pr.symbols = sym;
    pr.ranges = nullptr;
    pr.boundary = boundary->flat<int64_t>().data();
    pr.px = px.flat<Scalar>().data();
    pr.py = py.flat<Scalar>().data();
    pr.norms = norms->flat<Scalar>().data();
    pr.blank = attrs_.blank;
    pr.type = attrs_.type;
    pr.delay_penalty = delay_penalty;
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    std::fill(pr.px, pr.px + B * S * T1, kNegInf);
    std::fill(pr.py, pr.py + B * (S + 1) * T, kNegInf);
    std::fill(pr.norms, pr.norms + B * T * (S + 1), Scalar(0));

    const std::vector<Tile> tiles = MakeTiles(pr.boundary, B);
    const auto all = [](int64_t, int64_t) { return true; };
    Workers(ctx)->ParallelFor(
        tiles.size(),
        ThreadPool::SchedulingParams::Adaptive(kTileRows * in.J * C * 2),
        [&](int64_t begin, int64_t end) {
          TileBuffers<Scalar> buf;
          for (int64_t i = begin; i < end; ++i) {
            const Tile& tile = tiles[i];
            const int64_t rows = FormTile(in, tile, all, &buf);
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t t = buf.t[r], s = buf.s[r];
              const Scalar* l = buf.logits.data() + r * C;
              Scalar m, log_sum;
              LogSumExpParts(l, C, &m, &log_sum);
              pr.WriteRowOf(l, tile.b, t, (tile.b * T + t) * (S + 1) + s, s, m,
                            log_sum);
            }
          }
        });
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) pr.FinishPxRow(b, s);
    }
    OP_REQUIRES_OK(ctx, (JointRecursion<functor::CpuDevice, Scalar>(
                            ctx, B, S, T, T1, pr.px, pr.py, pr.boundary, scores,
                            px_grad, py_grad)));
  }

 private:
  JointAttrs attrs_;
};

// Pass 3: the gradients of the four float inputs, tile by tile.
template <typename TfL, typename Scalar>
class RnntJointLossGradOp : public OpKernel {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit RnntJointLossGradOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), attrs_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    JointInputs<Scalar, L> in;
    Tensor wide_weight, wide_bias;
    const Tensor* symbols;
    JointTensors x;
    JointGradTensors inputs;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx, CheckGradInputs(ctx, attrs_, x, &inputs));
    OP_REQUIRES_OK(
        ctx, (ReadJointInputs<Scalar, TfL>(ctx, attrs_.activation, &wide_weight,
                                           &wide_bias, &in, &symbols)));
    const Tensor *px_grad = inputs.px_grad, *py_grad = inputs.py_grad,
                 *norms = inputs.norms, *scale = inputs.scale;
    const int64_t B = in.B, T = in.T_len, S = in.S, C = in.C, J = in.J;
    const bool regular = attrs_.type == RnntType::kRegular;
    const int64_t T1 = regular ? T + 1 : T;
    const int64_t* sym = symbols->flat<int64_t>().data();

    Tensor* outputs[4];
    const TensorShape shapes[4] = {TensorShape({B, T, J}),
                                   TensorShape({B, S + 1, J}),
                                   TensorShape({J, C}), TensorShape({C})};
    for (int i = 0; i < 4; ++i) {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, shapes[i], &outputs[i]));
    }
    const Scalar* pxg = px_grad->flat<Scalar>().data();
    const Scalar* pyg = py_grad->flat<Scalar>().data();
    const Scalar* n = norms->flat<Scalar>().data();
    const Scalar* d = scale->flat<Scalar>().data();
    const Scalar emit = Scalar(1) + Scalar(attrs_.fastemit_lambda);
    const Scalar clamp = Scalar(attrs_.clamp);
    const bool constrained = attrs_.type == RnntType::kConstrained;
    const auto row_gradient = [&](int64_t b, int64_t t, int64_t s) {
      return RnntGradientRow<Scalar>::Of(pxg, pyg, b, t, s, S, T, T1,
                                         constrained, emit, clamp, d[b]);
    };

    // Tiles over the whole grid: the gradient is zero outside a sequence's
    // boundary (no path uses those cells) and FormTile skips such cells.
    std::vector<int64_t> grid(4 * B);
    for (int64_t b = 0; b < B; ++b) {
      grid[4 * b] = 0;
      grid[4 * b + 1] = 0;
      grid[4 * b + 2] = S;
      grid[4 * b + 3] = T;
    }
    const std::vector<Tile> tiles = MakeTiles(grid.data(), B);
    const int64_t shards = std::max<int64_t>(
        1, std::min<int64_t>(tiles.size(), Workers(ctx)->NumThreads()));
    // Per shard: dW [J, C], dc [C], dp [B, S + 1, J]; de [B, T, J] is one
    // buffer (each frame belongs to one tile).
    const int64_t per_shard = J * C + C + B * (S + 1) * J;
    const tensorflow::DataType dt = tensorflow::DataTypeToEnum<Scalar>::value;
    // W^T [C, J], once: the products dh = G W^T then read it row by row.
    Tensor weight_t;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(dt, TensorShape({C, J}), &weight_t));
    Scalar* wt = weight_t.flat<Scalar>().data();
    for (int64_t j = 0; j < J; ++j) {
      for (int64_t c = 0; c < C; ++c) wt[c * J + j] = in.weight[j * C + c];
    }
    Tensor sums, d_encoder;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_temp(dt, TensorShape({shards * per_shard}), &sums));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_temp(dt, TensorShape({B * T * J}), &d_encoder));
    Scalar* acc = sums.flat<Scalar>().data();
    Scalar* de = d_encoder.flat<Scalar>().data();
    std::fill(acc, acc + shards * per_shard, Scalar(0));
    std::fill(de, de + B * T * J, Scalar(0));

    const auto shard_work = [&](int64_t shard) {
      Scalar* dw = acc + shard * per_shard;
      Scalar* dc = dw + J * C;
      Scalar* dp = dc + C;
      TileBuffers<Scalar> buf;
      const int64_t first = tiles.size() * shard / shards;
      const int64_t last = tiles.size() * (shard + 1) / shards;
      for (int64_t i = first; i < last; ++i) {
        const Tile& tile = tiles[i];
        const int64_t b = tile.b;
        const auto used = [&](int64_t t, int64_t s) {
          const auto g = row_gradient(b, t, s);
          return g.gx + g.gy != Scalar(0);
        };
        const int64_t rows = FormTile(in, tile, used, &buf);
        if (rows == 0) continue;
        // l -> G in place (rnnt_loss_op.cc's pass 3 on each row).
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t t = buf.t[r], s = buf.s[r];
          const auto g = row_gradient(b, t, s);
          Scalar* l = buf.logits.data() + r * C;
          ScaledNegativeSoftmax(l, C, n[(b * T + t) * (S + 1) + s], g.gx + g.gy,
                                l);
          if (s < S) l[sym[b * S + s]] += g.gx;
          l[attrs_.blank] += g.gy;
          if (clamp > 0) {
            for (int64_t c = 0; c < C; ++c) l[c] = g.Clamped(l[c], clamp);
          }
          for (int64_t c = 0; c < C; ++c) dc[c] += l[c];
        }
        const Scalar* G = buf.logits.data();
        tile_gemm::Gemm(J, C, rows, tile_gemm::Transposed(buf.hidden.data(), J),
                        tile_gemm::RowMajor(G, C), dw, C, /*accumulate=*/true);
        buf.d_hidden.resize(rows * J);
        tile_gemm::Gemm(rows, J, C, tile_gemm::RowMajor(G, C),
                        tile_gemm::RowMajor<Scalar>(wt, J), buf.d_hidden.data(),
                        J, /*accumulate=*/false);
        ThroughActivation(in.activation, buf.hidden.data(), buf.d_hidden.data(),
                          rows * J);
        for (int64_t r = 0; r < rows; ++r) {
          const Scalar* da = buf.d_hidden.data() + r * J;
          Scalar* de_row = de + (b * T + buf.t[r]) * J;
          Scalar* dp_row = dp + (b * (S + 1) + buf.s[r]) * J;
          for (int64_t j = 0; j < J; ++j) {
            de_row[j] += da[j];
            dp_row[j] += da[j];
          }
        }
      }
    };
    Workers(ctx)->ParallelFor(
        shards,
        ThreadPool::SchedulingParams(
            ThreadPool::SchedulingStrategy::kFixedBlockSize, std::nullopt, 1),
        [&](int64_t begin, int64_t end) {
          for (int64_t shard = begin; shard < end; ++shard) shard_work(shard);
        });

    // The shards' sums into the outputs, in the inputs' type.
    const auto write = [&](Tensor* out, const Scalar* first, int64_t size,
                           int64_t stride, int64_t count) {
      L* dst = const_cast<L*>(TensorData<TfL>(*out));
      for (int64_t k = 0; k < size; ++k) {
        Scalar total = first[k];
        for (int64_t i = 1; i < count; ++i) total += first[i * stride + k];
        dst[k] = Narrow<L>(total);
      }
    };
    write(outputs[0], de, B * T * J, 0, 1);
    write(outputs[1], acc + J * C + C, B * (S + 1) * J, per_shard, shards);
    write(outputs[2], acc, J * C, per_shard, shards);
    write(outputs[3], acc + J * C, C, per_shard, shards);
  }

 private:
  JointAttrs attrs_;
};

// Inputs of type TL with the maths in T: (half, float), (bfloat16, float),
// (float, float), (double, double).
#define TF_TRANSDUCER_REGISTER_JOINT(TL, T)                     \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerRnntJointLoss")     \
                              .Device(DEVICE_CPU)               \
                              .TypeConstraint<TL>("T")          \
                              .TypeConstraint<T>("Tacc"),       \
                          RnntJointLossOp<TL, T>);              \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerRnntJointLossGrad") \
                              .Device(DEVICE_CPU)               \
                              .TypeConstraint<TL>("T")          \
                              .TypeConstraint<T>("Tacc"),       \
                          RnntJointLossGradOp<TL, T>)

TF_TRANSDUCER_REGISTER_JOINT(Eigen::half, float);
TF_TRANSDUCER_REGISTER_JOINT(tensorflow::bfloat16, float);
TF_TRANSDUCER_REGISTER_JOINT(float, float);
TF_TRANSDUCER_REGISTER_JOINT(double, double);
#undef TF_TRANSDUCER_REGISTER_JOINT

#if GOOGLE_CUDA
// The GPU kernels (gpu/rnnt_joint.cu): the same checks on the host (symbols,
// boundary and delay_penalty are host memory), then the cells are planned
// into chunks on the host and each chunk's kernels enqueued on TensorFlow's
// stream.  Scratch beyond O(B T S): one chunk's h and l (and dh), at most
// gpu::kJointScratchBytes, and partial sums of dW.
namespace {

using functor::GpuStream;
using functor::LaunchResult;

// n elements of T in device scratch `t`.
template <typename T>
absl::Status Scratch(OpKernelContext* ctx, int64_t n, Tensor* t, T** out) {
  TF_RETURN_IF_ERROR(ctx->allocate_temp(tensorflow::DataTypeToEnum<T>::value,
                                        TensorShape({n}), t));
  *out = t->flat<T>().data();
  return absl::OkStatus();
}

// The buffers a RnntJointProblem points into.
struct GpuJointScratch {
  Tensor wide_weight, wide_bias, hidden, logits, row_cells, pieces;
};

// The joint's inputs (device) and the scratch of `plan`'s chunks.
template <typename Scalar, typename TfL>
absl::Status MakeGpuJointProblem(
    OpKernelContext* ctx, const JointTensors& x, JointActivation activation,
    bool allow_tf32, const gpu::JointPlan& plan, GpuJointScratch* s,
    gpu::RnntJointProblem<Scalar, typename StorageOf<TfL>::type>* p) {
  using L = typename StorageOf<TfL>::type;
  static_assert(sizeof(gpu::JointPiece) == 4 * sizeof(int64_t));
  p->B = x.B;
  p->T_len = x.T_len;
  p->S = x.S;
  p->C = x.C;
  p->J = x.J;
  p->encoder = TensorData<TfL>(*x.encoder);
  p->predictor = TensorData<TfL>(*x.predictor);
  p->weight = TensorData<TfL>(*x.weight);
  p->bias = TensorData<TfL>(*x.bias);
  p->activation = activation;
  // Tensor cores for 16-bit inputs, as every framework's 16-bit products;
  // for float32 only when asked (TF32).
  constexpr bool kHalfWidth =
      std::is_same_v<L, Half> || std::is_same_v<L, BFloat16>;
  constexpr bool kFloat = std::is_same_v<L, float>;
  p->products = kHalfWidth || (kFloat && allow_tf32)
                    ? gpu::JointProducts::kTensorCores
                    : gpu::JointProducts::kExact;
  p->wide_weight = p->wide_bias = nullptr;
  if constexpr (!std::is_same_v<Scalar, L>) {
    TF_RETURN_IF_ERROR(
        Scratch(ctx, x.J * x.C, &s->wide_weight, &p->wide_weight));
    TF_RETURN_IF_ERROR(Scratch(ctx, x.C, &s->wide_bias, &p->wide_bias));
  }
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows * x.J, &s->hidden, &p->hidden));
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows * x.C, &s->logits, &p->logits));
  TF_RETURN_IF_ERROR(Scratch(ctx, plan.max_rows, &s->row_cells, &p->row_cells));
  int64_t* pieces;
  TF_RETURN_IF_ERROR(
      Scratch(ctx, 4 * int64_t(plan.pieces.size()), &s->pieces, &pieces));
  p->pieces = reinterpret_cast<gpu::JointPiece*>(pieces);
  return absl::OkStatus();
}

}  // namespace

template <typename TfL, typename Scalar>
class RnntJointLossGpuOp : public OpKernel {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit RnntJointLossGpuOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), attrs_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    JointTensors x;
    const Tensor* boundary;
    Scalar delay_penalty;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx,
                   CheckLossInputs(ctx, attrs_, x, &boundary, &delay_penalty));
    const int64_t B = x.B, T = x.T_len, S = x.S;
    const int64_t T1 = attrs_.type == RnntType::kRegular ? T + 1 : T;
    Tensor *scores, *px_grad, *py_grad, *norms;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({B}), &scores));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, TensorShape({B, S, T1}), &px_grad));
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(2, TensorShape({B, S + 1, T}), &py_grad));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(3, TensorShape({B, T, S + 1}), &norms));

    const int64_t* host_boundary = boundary->flat<int64_t>().data();
    const std::vector<int64_t> ranges =
        gpu::JointBoundaryRanges(host_boundary, B, T);
    const gpu::JointPlan plan = gpu::PlanJointChunks(
        ranges.data(), B * T, T,
        gpu::JointChunkCapacity(x.J, x.C, sizeof(Scalar), false));
    GpuJointScratch scratch;
    gpu::RnntJointProblem<Scalar, L> joint;
    OP_REQUIRES_OK(ctx, (MakeGpuJointProblem<Scalar, TfL>(
                            ctx, x, attrs_.activation, attrs_.allow_tf32, plan,
                            &scratch, &joint)));

    RnntProblem<Scalar, Scalar> pr;
    Tensor px, py, symbols_copy, boundary_copy;
    pr.B = B;
    pr.T_len = T;
    pr.S = S;
    pr.C = x.C;
    pr.R = S + 1;
    pr.T1 = T1;
    pr.logits = nullptr;  // each row comes from a chunk
    pr.ranges = nullptr;
    OP_REQUIRES_OK(ctx, functor::Int64Input<functor::GpuDevice>()(
                            ctx, x.symbols->flat<int64_t>().data(), B * S,
                            &symbols_copy, &pr.symbols));
    OP_REQUIRES_OK(
        ctx, functor::Int64Input<functor::GpuDevice>()(
                 ctx, host_boundary, 4 * B, &boundary_copy, &pr.boundary));
    OP_REQUIRES_OK(ctx, Scratch(ctx, B * S * T1, &px, &pr.px));
    OP_REQUIRES_OK(ctx, Scratch(ctx, B * (S + 1) * T, &py, &pr.py));
    pr.norms = norms->flat<Scalar>().data();
    pr.blank = attrs_.blank;
    pr.type = attrs_.type;
    pr.delay_penalty = delay_penalty;
    OP_REQUIRES_OK(ctx, LaunchResult(gpu::RnntJointLogProbs(joint, pr, plan,
                                                            GpuStream(ctx)),
                                     "the joint RNN-T loss's first pass"));
    OP_REQUIRES_OK(ctx, (JointRecursion<functor::GpuDevice, Scalar>(
                            ctx, B, S, T, T1, pr.px, pr.py, pr.boundary, scores,
                            px_grad, py_grad)));
  }

 private:
  JointAttrs attrs_;
};

template <typename TfL, typename Scalar>
class RnntJointLossGradGpuOp : public OpKernel {
  using L = typename StorageOf<TfL>::type;

 public:
  explicit RnntJointLossGradGpuOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), attrs_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    JointTensors x;
    JointGradTensors in;
    OP_REQUIRES_OK(ctx, GetJointTensors(ctx, &x));
    OP_REQUIRES_OK(ctx, CheckGradInputs(ctx, attrs_, x, &in));
    const int64_t B = x.B, T = x.T_len, S = x.S, C = x.C, J = x.J;
    const int64_t sizes[4] = {B * T * J, B * (S + 1) * J, J * C, C};
    const TensorShape shapes[4] = {TensorShape({B, T, J}),
                                   TensorShape({B, S + 1, J}),
                                   TensorShape({J, C}), TensorShape({C})};
    L* outputs[4];
    for (int i = 0; i < 4; ++i) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, shapes[i], &out));
      outputs[i] = const_cast<L*>(TensorData<TfL>(*out));
    }

    gpu::RnntJointGradientProblem<Scalar, L> p;
    RnntGradientProblem<Scalar, Scalar>& rows = p.rows;
    Tensor symbols_copy;
    rows.B = B;
    rows.T_len = T;
    rows.S = S;
    rows.C = C;
    rows.R = S + 1;
    rows.T1 = attrs_.type == RnntType::kRegular ? T + 1 : T;
    rows.logits = nullptr;  // each row comes from a chunk
    rows.ranges = nullptr;
    rows.grad = nullptr;
    OP_REQUIRES_OK(ctx, functor::Int64Input<functor::GpuDevice>()(
                            ctx, x.symbols->flat<int64_t>().data(), B * S,
                            &symbols_copy, &rows.symbols));
    rows.px_grad = in.px_grad->flat<Scalar>().data();
    rows.py_grad = in.py_grad->flat<Scalar>().data();
    rows.norms = in.norms->flat<Scalar>().data();
    rows.scale = in.scale->flat<Scalar>().data();
    rows.blank = attrs_.blank;
    rows.constrained = attrs_.type == RnntType::kConstrained;
    rows.emit = Scalar(1) + Scalar(attrs_.fastemit_lambda);
    rows.clamp = Scalar(attrs_.clamp);

    // The cells whose gradient is not zero, frame by frame, planned on the
    // host.
    Tensor device_ranges;
    int64_t* ranges;
    OP_REQUIRES_OK(ctx, Scratch(ctx, 2 * B * T, &device_ranges, &ranges));
    OP_REQUIRES_OK(
        ctx, LaunchResult(gpu::RnntJointUsedRanges(p, ranges, GpuStream(ctx)),
                          "the joint RNN-T gradient's used cells"));
    std::vector<int64_t> host_ranges(2 * B * T);
    OP_REQUIRES_OK(
        ctx, LaunchResult(
                 gpu::CopyToHost(host_ranges.data(), ranges,
                                 2 * B * T * sizeof(int64_t), GpuStream(ctx)),
                 "a copy from the GPU"));
    const gpu::JointPlan plan = gpu::PlanJointChunks(
        host_ranges.data(), B * T, T,
        gpu::JointChunkCapacity(J, C, sizeof(Scalar), true));
    GpuJointScratch scratch;
    OP_REQUIRES_OK(ctx, (MakeGpuJointProblem<Scalar, TfL>(
                            ctx, x, attrs_.activation, attrs_.allow_tf32, plan,
                            &scratch, &p.joint)));
    Tensor d_hidden, partial, sums[4];
    OP_REQUIRES_OK(ctx,
                   Scratch(ctx, plan.max_rows * J, &d_hidden, &p.d_hidden));
    p.max_splits = gpu::JointWeightSplits(J, C, sizeof(Scalar));
    OP_REQUIRES_OK(
        ctx, Scratch(ctx, p.max_splits > 1 ? p.max_splits * (J * C + C) : 0,
                     &partial, &p.partial));
    Scalar* acc[4];
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<Scalar, L>) {
        acc[i] = outputs[i];
      } else {
        OP_REQUIRES_OK(ctx, Scratch(ctx, sizes[i], &sums[i], &acc[i]));
      }
    }
    p.acc_encoder = acc[0];
    p.acc_predictor = acc[1];
    p.acc_weight = acc[2];
    p.acc_bias = acc[3];
    p.d_encoder = outputs[0];
    p.d_predictor = outputs[1];
    p.d_weight = outputs[2];
    p.d_bias = outputs[3];
    OP_REQUIRES_OK(ctx,
                   LaunchResult(gpu::RnntJointGradient(p, plan, GpuStream(ctx)),
                                "the joint RNN-T loss's gradient"));
  }

 private:
  JointAttrs attrs_;
};

// The integer inputs and the delay penalty stay on the host, where they are
// checked before anything is launched.
#define TF_TRANSDUCER_REGISTER_JOINT_GPU(TL, T)                 \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerRnntJointLoss")     \
                              .Device(tensorflow::DEVICE_GPU)   \
                              .HostMemory("symbols")            \
                              .HostMemory("boundary")           \
                              .HostMemory("delay_penalty")      \
                              .TypeConstraint<TL>("T")          \
                              .TypeConstraint<T>("Tacc"),       \
                          RnntJointLossGpuOp<TL, T>);           \
  REGISTER_KERNEL_BUILDER(Name("TfTransducerRnntJointLossGrad") \
                              .Device(tensorflow::DEVICE_GPU)   \
                              .HostMemory("symbols")            \
                              .TypeConstraint<TL>("T")          \
                              .TypeConstraint<T>("Tacc"),       \
                          RnntJointLossGradGpuOp<TL, T>)

TF_TRANSDUCER_REGISTER_JOINT_GPU(Eigen::half, float);
TF_TRANSDUCER_REGISTER_JOINT_GPU(tensorflow::bfloat16, float);
TF_TRANSDUCER_REGISTER_JOINT_GPU(float, float);
TF_TRANSDUCER_REGISTER_JOINT_GPU(double, double);
#undef TF_TRANSDUCER_REGISTER_JOINT_GPU
#endif  // GOOGLE_CUDA

}  // namespace tf_transducer
