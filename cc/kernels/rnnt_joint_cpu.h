// SPDX-License-Identifier: Apache-2.0
// The joint loss's passes 1 and 3 on a TensorFlow CPU thread pool (the
// formulas are in rnnt_joint_op.cc).  Neither the logits l nor the hidden h
// is ever stored whole: the cells of a sequence's boundary are cut into
// tiles of a few frames (about kTileRows cells), and a tile's h and l are
// formed in buffers of the thread that works on it, with the matrix
// products of tile_gemm.h.  Pass 1 keeps of each tile only its normalisers,
// px and py (O(B T S) in all); pass 3 forms each tile again (the recompute
// costs a fourth matrix product and saves writing and reading
// [B, T, S + 1, C] twice), turns l into G in place, and adds the tile's dW,
// dc and dp into accumulators of its shard (one copy of W's size per
// shard), summed at the end.  Used by functor::RnntJointLoss<CpuDevice> and
// functor::RnntJointLossGrad<CpuDevice> (rnnt_joint_functor.h), which
// allocate the buffers.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_CPU_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_CPU_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/row_math.h"
#include "cc/kernels/tile_gemm.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace tf_transducer {
namespace joint_cpu {

using ::tensorflow::thread::ThreadPool;

// Cells per tile: enough rows for the products to run at full speed, few
// enough that a tile's h and l stay small (kTileRows x (J + C) values).
constexpr int64_t kTileRows = 384;

// Frames [t0, t1) of sequence b, rows s_begin ..= s_end of each.
struct Tile {
  int64_t b, t0, t1, s_begin, s_end;
  int64_t rows() const { return (t1 - t0) * (s_end - s_begin + 1); }
};

// The tiles of every sequence's boundary (none for an empty one).
inline std::vector<Tile> MakeTiles(const int64_t* boundary, int64_t B) {
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

// The joint's inputs as the tiles read them: the inputs of type L, and
// weight and bias in the maths' type T (the inputs themselves when L is T,
// else copies the functor widened).
template <typename T, typename L>
struct TileInputs : RnntJointInputs<L> {
  const T* wide_weight;  // [J, C]
  const T* wide_bias;    // [C]
};

// A thread's buffers for its tiles.
template <typename T>
struct TileBuffers {
  std::vector<T> hidden, logits, d_hidden;
  std::vector<int64_t> t, s;  // each row's cell
};

// bfloat16 inputs multiply in bfloat16 (float32 sums) where the CPU can, as
// TensorFlow's own bfloat16 matmuls do; float16 and wider ones in T.
template <typename L>
constexpr bool kBf16Products = std::is_same_v<L, BFloat16>;

// The joint's weight [J, C] packed for the products h W, once per op call.
template <typename T, typename L>
tile_gemm::PackedB<T> PackWeight(const TileInputs<T, L>& in) {
  return tile_gemm::PackForProducts(
      in.J, in.C, tile_gemm::RowMajor(in.wide_weight, in.C), kBf16Products<L>);
}

// The tile's rows (the cells with keep(t, s)), their h [rows, J] and l
// [rows, C] in `buf`; returns the number of rows.  weight: PackWeight(in).
template <typename T, typename L, typename Keep>
int64_t FormTile(const TileInputs<T, L>& in,
                 const tile_gemm::PackedB<T>& weight, const Tile& tile,
                 Keep keep, TileBuffers<T>* buf) {
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
  tile_gemm::Gemm(rows, tile_gemm::RowMajor(buf->hidden.data(), J), weight,
                  buf->logits.data(), C, /*accumulate=*/false);
  for (int64_t r = 0; r < rows; ++r) {
    T* l = buf->logits.data() + r * C;
    for (int64_t c = 0; c < C; ++c) l[c] += in.wide_bias[c];
  }
  return rows;
}

// dh[0, n) *= act'(x), from the activation's output h[0, n) (one loop per
// activation, so that each vectorises).
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

// Pass 1: pr's px and py filled with -inf and its normalisers with 0, then
// every row inside a boundary written tile by tile, then the px rows
// finished.  pr.logits and pr.ranges are unused (R = S + 1).
template <typename T, typename L>
void JointLogProbs(const TileInputs<T, L>& in, const RnntProblem<T, T>& pr,
                   ThreadPool* pool) {
  const int64_t B = in.B, T_len = in.T_len, S = in.S, C = in.C;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  std::fill(pr.px, pr.px + B * S * pr.T1, kNegInf);
  std::fill(pr.py, pr.py + B * (S + 1) * T_len, kNegInf);
  std::fill(pr.norms, pr.norms + B * T_len * (S + 1), T(0));
  const std::vector<Tile> tiles = MakeTiles(pr.boundary, B);
  const tile_gemm::PackedB<T> weight = PackWeight(in);
  const auto all = [](int64_t, int64_t) { return true; };
  pool->ParallelFor(
      tiles.size(),
      ThreadPool::SchedulingParams::Adaptive(kTileRows * in.J * C * 2),
      [&](int64_t begin, int64_t end) {
        TileBuffers<T> buf;
        for (int64_t i = begin; i < end; ++i) {
          const Tile& tile = tiles[i];
          const int64_t rows = FormTile(in, weight, tile, all, &buf);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = buf.t[r], s = buf.s[r];
            const T* l = buf.logits.data() + r * C;
            T m, log_sum;
            LogSumExpParts(l, C, &m, &log_sum);
            pr.WriteRowOf(l, tile.b, t, (tile.b * T_len + t) * (S + 1) + s, s,
                          m, log_sum);
          }
        }
      });
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) pr.FinishPxRow(b, s);
  }
}

// How pass 3 splits its work: tiles over the whole grid (the gradient is
// zero outside a sequence's boundary, and FormTile skips such cells), summed
// in `shards` accumulators of `per_shard` values each: dW [J, C], dc [C] and
// dp [B, S + 1, J].  de [B, T, J] is one buffer (each frame belongs to one
// tile).
struct GradientPlan {
  std::vector<Tile> tiles;
  int64_t shards, per_shard;

  GradientPlan(int64_t B, int64_t T_len, int64_t S, int64_t C, int64_t J,
               int threads) {
    std::vector<int64_t> grid(4 * B);
    for (int64_t b = 0; b < B; ++b) {
      grid[4 * b] = 0;
      grid[4 * b + 1] = 0;
      grid[4 * b + 2] = S;
      grid[4 * b + 3] = T_len;
    }
    tiles = MakeTiles(grid.data(), B);
    shards = std::max<int64_t>(1, std::min<int64_t>(tiles.size(), threads));
    per_shard = J * C + C + B * (S + 1) * J;
  }
};

// Pass 3: the gradients of encoder, predictor, weight and bias (type L) of
// sum_b rows.scale[b] * scores[b].  Scratch: sums [plan.shards *
// plan.per_shard] and d_encoder [B, T, J] (any contents).
template <typename T, typename L>
void JointGradient(const TileInputs<T, L>& in,
                   const RnntGradientProblem<T, T>& p, const GradientPlan& plan,
                   T* sums, T* d_encoder, L* const outputs[4],
                   ThreadPool* pool) {
  const int64_t B = in.B, T_len = in.T_len, S = in.S, C = in.C, J = in.J;
  const int64_t shards = plan.shards, per_shard = plan.per_shard;
  const std::vector<Tile>& tiles = plan.tiles;
  const auto row_gradient = [&](int64_t b, int64_t t, int64_t s) {
    return RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, S, T_len, p.T1,
                                  p.constrained, p.emit, p.clamp, p.scale[b]);
  };
  // W for the recomputed logits and W^T for dh = G W^T, packed once.
  const tile_gemm::PackedB<T> weight = PackWeight(in);
  const tile_gemm::PackedB<T> weight_t = tile_gemm::PackForProducts(
      C, J, tile_gemm::Transposed(in.wide_weight, C), kBf16Products<L>);
  std::fill(sums, sums + shards * per_shard, T(0));
  std::fill(d_encoder, d_encoder + B * T_len * J, T(0));

  const auto shard_work = [&](int64_t shard) {
    T* dw = sums + shard * per_shard;
    T* dc = dw + J * C;
    T* dp = dc + C;
    TileBuffers<T> buf;
    const int64_t first = tiles.size() * shard / shards;
    const int64_t last = tiles.size() * (shard + 1) / shards;
    for (int64_t i = first; i < last; ++i) {
      const Tile& tile = tiles[i];
      const int64_t b = tile.b;
      const auto used = [&](int64_t t, int64_t s) {
        const auto g = row_gradient(b, t, s);
        return g.gx + g.gy != T(0);
      };
      const int64_t rows = FormTile(in, weight, tile, used, &buf);
      if (rows == 0) continue;
      // l -> G in place (rnnt_loss_op.cc's pass 3 on each row).
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = buf.t[r], s = buf.s[r];
        const auto g = row_gradient(b, t, s);
        T* l = buf.logits.data() + r * C;
        ScaledNegativeSoftmax(l, C, p.norms[(b * T_len + t) * (S + 1) + s],
                              g.gx + g.gy, l);
        if (s < S) l[p.symbols[b * S + s]] += g.gx;
        l[p.blank] += g.gy;
        if (p.clamp > 0) {
          for (int64_t c = 0; c < C; ++c) l[c] = g.Clamped(l[c], p.clamp);
        }
        for (int64_t c = 0; c < C; ++c) dc[c] += l[c];
      }
      const T* G = buf.logits.data();
      tile_gemm::Gemm(J, C, rows, tile_gemm::Transposed(buf.hidden.data(), J),
                      tile_gemm::RowMajor(G, C), dw, C, /*accumulate=*/true,
                      kBf16Products<L>);
      buf.d_hidden.resize(rows * J);
      tile_gemm::Gemm(rows, tile_gemm::RowMajor(G, C), weight_t,
                      buf.d_hidden.data(), J, /*accumulate=*/false);
      ThroughActivation(in.activation, buf.hidden.data(), buf.d_hidden.data(),
                        rows * J);
      for (int64_t r = 0; r < rows; ++r) {
        const T* da = buf.d_hidden.data() + r * J;
        T* de_row = d_encoder + (b * T_len + buf.t[r]) * J;
        T* dp_row = dp + (b * (S + 1) + buf.s[r]) * J;
        for (int64_t j = 0; j < J; ++j) {
          de_row[j] += da[j];
          dp_row[j] += da[j];
        }
      }
    }
  };
  pool->ParallelFor(
      shards,
      ThreadPool::SchedulingParams(
          ThreadPool::SchedulingStrategy::kFixedBlockSize, std::nullopt, 1),
      [&](int64_t begin, int64_t end) {
        for (int64_t shard = begin; shard < end; ++shard) shard_work(shard);
      });

  // The shards' sums into the outputs, in the inputs' type.
  const auto write = [&](L* dst, const T* first, int64_t size, int64_t stride,
                         int64_t count) {
    for (int64_t k = 0; k < size; ++k) {
      T total = first[k];
      for (int64_t i = 1; i < count; ++i) total += first[i * stride + k];
      dst[k] = Narrow<L>(total);
    }
  };
  write(outputs[0], d_encoder, B * T_len * J, 0, 1);
  write(outputs[1], sums + J * C + C, B * (S + 1) * J, per_shard, shards);
  write(outputs[2], sums, J * C, per_shard, shards);
  write(outputs[3], sums + J * C, C, per_shard, shards);
}

}  // namespace joint_cpu
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_CPU_H_
