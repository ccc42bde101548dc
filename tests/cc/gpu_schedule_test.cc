// SPDX-License-Identifier: Apache-2.0
// The CUDA kernels' schedules, emulated on the CPU with the functions they
// call (mutual_information_cell.h, rnnt_loss.h), against the CPU kernels'
// code and against plain float64 references.  Exits non-zero and prints the
// failing case when a check fails.  Built with g++ (no CUDA, no TensorFlow)
// and run by tests/cc/test_cc_units.py.
//
// Covered, for 1, 3 and 32 emulated threads:
//   - the MI kernel (gpu/mutual_information.cu): a thread per cell of a
//     diagonal, threads in two different orders (their results must be
//     bitwise equal: no cell of a diagonal reads another of the same
//     diagonal), forward then backward; against the CPU tiles
//     (mutual_information.h) and a textbook float64 recursion;
//   - the RNN-T first pass (gpu/rnnt_loss.cu): a row's logsumexp split over
//     lanes (LaneMax, LaneExpSum, LogSumOf), NaN and -inf rows included;
//   - half_types.h: every 16-bit value converts to float and back
//     unchanged, and random floats round to the nearest half / bfloat16
//     (ties to even);
//   - the whole fused loss (pass 1, FinishPxRow, the recursion, the gradient
//     of every row by ElementOfRow) against central finite differences of
//     the float64 score, for every rnnt type, FastEmit off.
// Not covered: the warps' shuffle trees (emulated here as lane partials
// combined in lane order, so sums round differently on the GPU), barriers
// and memory visibility (__syncthreads), the NaN-flag kernel and the
// memsets; the GPU harness (cc/gpu_harness) checks those, on a GPU and on
// the CPU emulator (make gpu-emu-check).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "cc/kernels/half_types.h"
#include "cc/kernels/mutual_information.h"
#include "cc/kernels/mutual_information_cell.h"
#include "cc/kernels/rnnt_loss.h"

namespace tt = tf_transducer;

namespace {

int failures = 0;

void Expect(bool ok, const char* what, double got, double want) {
  if (!ok) {
    ++failures;
    std::printf("FAIL %s: got %.17g, want %.17g\n", what, got, want);
  }
}

bool Close(double a, double b, double tol) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= tol * std::max(1.0, std::abs(b));
}

// An MI problem with its buffers.
template <typename T>
struct MiCase {
  int64_t B, S, Tl, T1;
  std::vector<T> px, py, scores, px_grad, py_grad, alpha, e;
  std::vector<int64_t> boundary;

  tt::MutualInformationProblem<T> Problem() {
    tt::MutualInformationProblem<T> p;
    p.batch = B;
    p.S = S;
    p.T_len = Tl;
    p.T1 = T1;
    p.px = px.data();
    p.py = py.data();
    p.boundary = boundary.data();
    scores.assign(B, T(0));
    px_grad.assign(px.size(), T(0));
    py_grad.assign(py.size(), T(0));
    alpha.assign(p.buffer_size(), T(0));
    e.assign(p.buffer_size(), T(0));
    p.scores = scores.data();
    p.px_grad = px_grad.data();
    p.py_grad = py_grad.data();
    p.alpha = alpha.data();
    p.e = e.data();
    return p;
  }
};

template <typename T>
MiCase<T> RandomMiCase(std::mt19937_64& gen, bool regular) {
  std::uniform_int_distribution<int64_t> size(1, 9);
  std::normal_distribution<double> normal(0, 2);
  MiCase<T> c;
  c.B = 3;
  c.S = size(gen);
  c.Tl = size(gen) + (regular ? 0 : c.S);  // modified needs room for S steps
  c.T1 = regular ? c.Tl + 1 : c.Tl;
  for (int64_t i = 0; i < c.B * c.S * c.T1; ++i) {
    c.px.push_back(gen() % 11 == 0 ? -INFINITY : T(normal(gen)));
  }
  for (int64_t i = 0; i < c.B * (c.S + 1) * c.Tl; ++i) {
    c.py.push_back(gen() % 11 == 0 ? -INFINITY : T(normal(gen)));
  }
  for (int64_t b = 0; b < c.B; ++b) {
    // b = 0: the whole grid; others: a rectangle with non-zero begins.
    const int64_t s0 = b == 0 ? 0 : gen() % (c.S + 1);
    const int64_t t0 = b == 0 ? 0 : gen() % (c.Tl + 1);
    const int64_t s1 = b == 0 ? c.S : s0 + gen() % (c.S - s0 + 1);
    const int64_t t1 = b == 0 ? c.Tl : t0 + gen() % (c.Tl - t0 + 1);
    c.boundary.insert(c.boundary.end(), {s0, t0, s1, t1});
  }
  return c;
}

// The MI kernel's schedule: a block per sequence, `threads` threads taking
// cells lo + tid, lo + tid + threads, ... of each diagonal; `reversed` runs
// the threads in the opposite order.
template <typename T>
void EmulateMiKernel(const tt::MutualInformationProblem<T>& p, int threads,
                     bool reversed) {
  namespace mi = tt::mi_internal;
  for (int64_t b = 0; b < p.batch; ++b) {
    const mi::Rect rc = mi::RectOf(p, b);
    const tt::MutualInformationTile whole{0, p.width(), 0, p.T_len + 1};
    int64_t k_begin, k_end, lo, hi;
    mi::DiagonalSpan(p, b, &k_begin, &k_end);
    auto each_thread = [&](auto&& cell) {
      for (int i = 0; i < threads; ++i) {
        const int tid = reversed ? threads - 1 - i : i;
        for (int64_t s = lo + tid; s <= hi; s += threads) cell(s);
      }
    };
    for (int64_t k = k_begin; k <= k_end; ++k) {
      mi::DiagonalRange(rc, whole, p.r(), k, &lo, &hi);
      each_thread([&](int64_t s) { mi::ForwardCell(p, b, k, s); });
    }
    p.scores[b] = tt::MutualInformationScore(p, b);
    for (int64_t k = k_end; k >= k_begin; --k) {
      mi::DiagonalRange(rc, whole, p.r(), k, &lo, &hi);
      each_thread([&](int64_t s) { mi::BackwardCell(p, b, k, s); });
    }
  }
}

template <typename T>
void RunCpuTiles(const tt::MutualInformationProblem<T>& p) {
  const tt::MutualInformationTile whole{0, p.width(), 0, p.T_len + 1};
  for (int64_t b = 0; b < p.batch; ++b) {
    tt::MutualInformationForwardTile(p, b, whole);
    p.scores[b] = tt::MutualInformationScore(p, b);
    tt::MutualInformationBackwardTile(p, b, whole);
  }
}

double LogAdd(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

// The textbook recursion in float64 over (s, t), for sequence b.
template <typename T>
double ReferenceScore(const MiCase<T>& c, int64_t b) {
  const int64_t* bd = c.boundary.data() + 4 * b;
  const int64_t r = c.T1 == c.Tl + 1 ? 1 : 0;
  std::vector<double> a((c.S + 1) * (c.Tl + 1), -INFINITY);
  auto at = [&](int64_t s, int64_t t) -> double& {
    return a[s * (c.Tl + 1) + t];
  };
  for (int64_t s = bd[0]; s <= bd[2]; ++s) {
    for (int64_t t = bd[1]; t <= bd[3]; ++t) {
      if (s == bd[0] && t == bd[1]) {
        at(s, t) = 0;
        continue;
      }
      double v = -INFINITY;
      const int64_t tx = t - 1 + r;
      if (s > bd[0] && tx >= bd[1]) {
        v = LogAdd(v, at(s - 1, tx) + c.px[(b * c.S + s - 1) * c.T1 + tx]);
      }
      if (t > bd[1]) {
        v = LogAdd(v, at(s, t - 1) + c.py[(b * (c.S + 1) + s) * c.Tl + t - 1]);
      }
      at(s, t) = v;
    }
  }
  return at(bd[2], bd[3]);
}

template <typename T>
void CheckMi(const char* name, double tol) {
  std::mt19937_64 gen(7);
  for (int trial = 0; trial < 60; ++trial) {
    const bool regular = trial % 2 == 0;
    MiCase<T> tiles = RandomMiCase<T>(gen, regular);
    RunCpuTiles(tiles.Problem());
    for (int threads : {1, 3, 32}) {
      MiCase<T> fwd = tiles, rev = tiles;
      EmulateMiKernel(fwd.Problem(), threads, false);
      EmulateMiKernel(rev.Problem(), threads, true);
      Expect(fwd.scores == rev.scores && fwd.px_grad == rev.px_grad &&
                 fwd.py_grad == rev.py_grad,
             "MI thread order changes the result", threads, 0);
      for (int64_t b = 0; b < tiles.B; ++b) {
        Expect(Close(fwd.scores[b], tiles.scores[b], tol), name, fwd.scores[b],
               tiles.scores[b]);
        const double want = ReferenceScore(tiles, b);
        Expect(Close(fwd.scores[b], want, tol * 10), name, fwd.scores[b], want);
      }
      for (size_t i = 0; i < tiles.px_grad.size(); ++i) {
        Expect(Close(fwd.px_grad[i], tiles.px_grad[i], tol), name,
               fwd.px_grad[i], tiles.px_grad[i]);
      }
      for (size_t i = 0; i < tiles.py_grad.size(); ++i) {
        Expect(Close(fwd.py_grad[i], tiles.py_grad[i], tol), name,
               fwd.py_grad[i], tiles.py_grad[i]);
      }
    }
  }
}

// A row's logsumexp split over `lanes` (LogProbsKernel's warp).
template <typename T>
void LaneLogSum(const T* x, int64_t n, int lanes, T* m, T* log_sum) {
  T max = -std::numeric_limits<T>::infinity(), sum = 0;
  bool nan = false;
  for (int lane = 0; lane < lanes; ++lane) {
    bool lane_nan;
    const T lane_max = tt::LaneMax(x, n, lane, lanes, &lane_nan);
    max = lane_max > max ? lane_max : max;
    nan |= lane_nan;
  }
  for (int lane = 0; lane < lanes; ++lane) {
    sum += tt::LaneExpSum(x, n, lane, lanes, max);
  }
  *m = max;
  *log_sum = tt::LogSumOf(max, nan, sum);
}

template <typename T>
void CheckLogSum(const char* name, double tol) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> normal(0, 5);
  constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = 1 + gen() % 70;
    std::vector<T> x(n);
    for (T& v : x) v = gen() % 7 == 0 ? -INFINITY : T(normal(gen));
    double want_max = -INFINITY, sum = 0;
    for (T v : x) want_max = std::max<double>(want_max, v);
    for (T v : x) sum += want_max == -INFINITY ? 0 : std::exp(v - want_max);
    const double want = want_max == -INFINITY ? 0 : std::log(sum);
    for (int lanes : {1, 3, 32}) {
      T m, log_sum;
      LaneLogSum(x.data(), n, lanes, &m, &log_sum);
      Expect(m == T(want_max) && Close(log_sum, want, tol), name, log_sum,
             want);
      // A NaN anywhere makes the row NaN, also among -inf.
      std::vector<T> bad = x;
      bad[gen() % n] = kNaN;
      LaneLogSum(bad.data(), n, lanes, &m, &log_sum);
      Expect(std::isnan(log_sum), "NaN row", log_sum, NAN);
      std::vector<T> empty(n, -INFINITY);
      LaneLogSum(empty.data(), n, lanes, &m, &log_sum);
      Expect(m == -INFINITY && log_sum == 0, "row of -inf", log_sum, 0);
      empty[gen() % n] = kNaN;
      LaneLogSum(empty.data(), n, lanes, &m, &log_sum);
      Expect(std::isnan(log_sum), "NaN among -inf", log_sum, NAN);
    }
  }
}

// The fused loss in float64 through the GPU kernels' functions: pass 1 by
// lanes, FinishPxRow per (b, s), the emulated MI kernel, and the gradient
// element by element.  Returns the scores; fills grad when given.
struct RnntCase {
  int64_t B, Tl, S, C;
  tt::RnntType type;
  int blank;
  double delay_penalty;
  std::vector<int64_t> symbols, boundary;
};

std::vector<double> RnntScores(const RnntCase& c,
                               const std::vector<double>& logits, int lanes,
                               std::vector<double>* grad) {
  const int64_t R = c.S + 1;
  const int64_t T1 = c.type == tt::RnntType::kRegular ? c.Tl + 1 : c.Tl;
  std::vector<double> px(c.B * c.S * T1, -INFINITY);
  std::vector<double> py(c.B * (c.S + 1) * c.Tl, -INFINITY);
  std::vector<double> norms(c.B * c.Tl * R);
  tt::RnntProblem<double> pr;
  pr.B = c.B;
  pr.T_len = c.Tl;
  pr.S = c.S;
  pr.C = c.C;
  pr.R = R;
  pr.T1 = T1;
  pr.logits = logits.data();
  pr.symbols = c.symbols.data();
  pr.ranges = nullptr;
  pr.boundary = c.boundary.data();
  pr.px = px.data();
  pr.py = py.data();
  pr.norms = norms.data();
  pr.blank = c.blank;
  pr.type = c.type;
  pr.delay_penalty = c.delay_penalty;
  for (int64_t row = 0; row < c.B * c.Tl * R; ++row) {
    const int64_t b = row / (c.Tl * R), t = row / R % c.Tl;
    const int64_t s = pr.PositionOf(row);
    if (!pr.RowUsed(b, t, s)) {
      norms[row] = 0;
      continue;
    }
    double m, log_sum;
    LaneLogSum(logits.data() + row * c.C, c.C, lanes, &m, &log_sum);
    pr.WriteRow(b, t, row, s, m, log_sum);
  }
  for (int64_t i = 0; i < c.B * c.S; ++i) pr.FinishPxRow(i / c.S, i % c.S);
  MiCase<double> mi;
  mi.B = c.B;
  mi.S = c.S;
  mi.Tl = c.Tl;
  mi.T1 = T1;
  mi.px = px;
  mi.py = py;
  mi.boundary = c.boundary;
  const auto p = mi.Problem();
  EmulateMiKernel(p, lanes, false);
  if (grad) {
    grad->assign(logits.size(), 0);
    const double scale = 1;
    for (int64_t row = 0; row < c.B * c.Tl * R; ++row) {
      const int64_t b = row / (c.Tl * R), t = row / R % c.Tl, s = row % R;
      const auto g = tt::RnntGradientRow<double>::Of(
          mi.px_grad.data(), mi.py_grad.data(), b, t, s, c.S, c.Tl, T1,
          c.type == tt::RnntType::kConstrained, 1.0, -1.0, scale);
      const int64_t symbol = s < c.S ? c.symbols[b * c.S + s] : -1;
      for (int64_t k = 0; k < c.C; ++k) {
        (*grad)[row * c.C + k] = g.ElementOfRow(
            logits[row * c.C + k], norms[row], k, symbol, c.blank, -1.0);
      }
    }
  }
  return mi.scores;
}

void CheckRnntGradient() {
  std::mt19937_64 gen(11);
  std::normal_distribution<double> normal(0, 1);
  const tt::RnntType types[] = {tt::RnntType::kRegular, tt::RnntType::kModified,
                                tt::RnntType::kConstrained};
  for (int trial = 0; trial < 6; ++trial) {
    RnntCase c;
    c.B = 2;
    c.S = 3;
    c.Tl = 5;
    c.C = 5;
    c.type = types[trial % 3];
    c.blank = trial < 3 ? 0 : 2;
    c.delay_penalty = trial < 3 ? 0.0 : 0.3;
    for (int64_t i = 0; i < c.B * c.S; ++i) c.symbols.push_back(gen() % c.C);
    // Sequence 1 is shorter than the padded sizes.
    c.boundary = {0, 0, c.S, c.Tl, 0, 0, c.S - 1, c.Tl - 1};
    std::vector<double> logits(c.B * c.Tl * (c.S + 1) * c.C);
    for (double& v : logits) v = normal(gen);
    for (int lanes : {1, 3, 32}) {
      std::vector<double> grad;
      RnntScores(c, logits, lanes, &grad);
      const double h = 1e-5;
      for (size_t i = 0; i < logits.size(); ++i) {
        std::vector<double> up = logits, down = logits;
        up[i] += h;
        down[i] -= h;
        const auto su = RnntScores(c, up, 1, nullptr);
        const auto sd = RnntScores(c, down, 1, nullptr);
        const int64_t b = i / (c.Tl * (c.S + 1) * c.C);
        const double fd = (su[b] - sd[b]) / (2 * h);
        Expect(std::abs(grad[i] - fd) < 1e-6, "RNN-T gradient vs differences",
               grad[i], fd);
      }
    }
  }
}

// x rounded to L is the nearest L, ties to even (neighbours by bits).
template <typename L>
void CheckNarrow(const char* name) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float wide = tt::Widen(L{static_cast<uint16_t>(bits)});
    if (std::isnan(wide)) {
      Expect(std::isnan(tt::Widen(tt::Narrow<L>(wide))), name, 0, NAN);
      continue;
    }
    Expect(tt::Narrow<L>(wide).bits == bits, name, tt::Narrow<L>(wide).bits,
           bits);
  }
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(unit(gen), int(gen() % 44) - 30);
    const L got = tt::Narrow<L>(x);
    const double err = std::abs(double(tt::Widen(got)) - x);
    for (int step : {-1, 1}) {
      const uint16_t next = static_cast<uint16_t>(got.bits + step);
      const float other = tt::Widen(L{next});
      if (std::isnan(other) || std::isinf(other)) continue;
      const double other_err = std::abs(double(other) - x);
      const bool ok = err < other_err || (err == other_err && !(got.bits & 1));
      Expect(ok, name, tt::Widen(got), x);
    }
  }
}

}  // namespace

int main() {
  CheckMi<float>("MI float: emulated GPU schedule vs CPU", 2e-5);
  CheckMi<double>("MI double: emulated GPU schedule vs CPU", 1e-12);
  CheckLogSum<float>("row logsumexp float by lanes", 2e-6);
  CheckLogSum<double>("row logsumexp double by lanes", 1e-13);
  CheckRnntGradient();
  CheckNarrow<tt::Half>("float -> half");
  CheckNarrow<tt::BFloat16>("float -> bfloat16");
  // Half's largest finite value is 65504; from 65520 on, the nearest is inf.
  Expect(tt::Widen(tt::Narrow<tt::Half>(65519.0f)) == 65504.0f, "half max",
         tt::Widen(tt::Narrow<tt::Half>(65519.0f)), 65504);
  Expect(std::isinf(tt::Widen(tt::Narrow<tt::Half>(-65520.0f))),
         "half overflow", tt::Widen(tt::Narrow<tt::Half>(-65520.0f)),
         -INFINITY);
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
