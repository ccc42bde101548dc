// SPDX-License-Identifier: Apache-2.0
// A standalone check and benchmark of the CUDA kernels of cc/kernels/gpu,
// without TensorFlow (README.md next to this file):
//
//   harness [check [--fail-fast] [--quick]]
//                            the CUDA launchers against the same maths on the
//                            CPU (the shared headers), seeded random cases;
//                            float, double, half and bfloat16 logits, the
//                            joint's products exact and on tensor cores;
//                            --quick: a subset for the slow sanitizer builds
//   harness bench [--repeats N] [--shapes B,T,U,V;...]
//                 [--dtype float|half|bfloat16]
//                            times of the fused RNN-T loss, float32 maths
//   harness compare DIR      loss and gradient of the inputs in DIR
//   harness bench-joint [--repeats N] [--shapes B,T,U,V,J;...]
//                 [--dtype float|half|bfloat16]
//                 [--products exact|tensor_cores]
//                            times and memory of the joint loss
//                            (rnnt_joint.cu), float32 maths; products as
//                            the op runs them (16-bit on tensor cores)
//                            unless --products says
//   harness compare-joint DIR  joint loss and its four gradients of DIR's
//                            inputs
//
// Exit codes: 0 success, 1 failure, 2 no CUDA device.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cc/kernels/gpu/launch.h"
#include "cc/kernels/gpu/launchers.h"
#include "cc/kernels/mutual_information.h"
#include "cc/kernels/rnnt_joint.h"
#include "cc/kernels/rnnt_loss.h"
#include "cc/kernels/tdt_loss.h"

// Exits naming the call that failed: a cudaError_t or a launcher's status.
#define CHECK(call)                                                      \
  do {                                                                   \
    const int status_ = static_cast<int>(call);                          \
    if (status_ != 0) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, \
                   #call, cudaGetErrorString(cudaError_t(status_)));     \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

namespace tf_transducer {
namespace {

constexpr uint64_t kSeed = 20240607;
// MutualInformation leaves the score of a sequence with a NaN as it was.
constexpr double kScoreSentinel = 12345.0;

// Bytes held by DeviceBuffers now, and the most held at once.
struct {
  size_t now = 0, peak = 0;
} tally;

template <typename T>
class DeviceBuffer {
 public:
  // n elements, a copy of `init` unless it is empty.
  explicit DeviceBuffer(size_t n, const std::vector<T>& init = {}) : n_(n) {
    if (n_ > 0) CHECK(cudaMalloc(&ptr_, bytes()));
    tally.now += bytes();
    tally.peak = std::max(tally.peak, tally.now);
    if (!init.empty()) {
      CHECK(gpu::CopyToDevice(ptr_, init.data(), bytes(), nullptr));
      CHECK(gpu::Synchronize(nullptr));
    }
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    tally.now -= bytes();
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }  // null when empty
  size_t bytes() const { return n_ * sizeof(T); }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    CHECK(gpu::CopyToHost(host.data(), ptr_, bytes(), nullptr));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

// Host memory with DeviceBuffer's interface, for the CPU reference.
template <typename T>
class HostBuffer {
 public:
  explicit HostBuffer(size_t n, const std::vector<T>& init = {})
      : data_(init.empty() ? std::vector<T>(n) : init) {}
  T* get() const { return data_.empty() ? nullptr : data_.data(); }
  std::vector<T> Download() const { return data_; }

 private:
  mutable std::vector<T> data_;
};

// The three passes on the CPU, as the CPU op runs them
// (rnnt_loss_op.cc, mutual_information_cpu.h), in plain loops over the
// functions the CUDA kernels share.  Logits of type L are widened on read and
// the gradient rounded to L on write, as in the kernels.
struct Cpu {
  template <typename T>
  using Buffer = HostBuffer<T>;

  template <typename T, typename L>
  static void LogProbs(const RnntProblem<T, L>& p) {
    std::fill(p.px, p.px + p.B * p.S * p.T1, T(-INFINITY));
    std::fill(p.py, p.py + p.B * (p.S + 1) * p.T_len, T(-INFINITY));
    for (int64_t row = 0; row < p.B * p.T_len * p.R; ++row) {
      const int64_t b = row / (p.T_len * p.R), t = row / p.R % p.T_len;
      const int64_t s = p.PositionOf(row);
      if (!p.RowUsed(b, t, s)) {
        p.norms[row] = T(0);
        continue;
      }
      bool nan;
      const L* x = p.logits + row * p.C;
      const T m = LaneMax(x, p.C, 0, 1, &nan);
      p.WriteRow(b, t, row, s, m,
                 LogSumOf(m, nan, LaneExpSum(x, p.C, 0, 1, m)));
    }
    for (int64_t b = 0; b < p.B; ++b) {
      for (int64_t s = 0; s < p.S; ++s) p.FinishPxRow(b, s);
    }
  }

  // Sequence by sequence; one with a NaN or +inf is skipped (zero gradients,
  // score left as is).
  template <typename T>
  static void MutualInformation(const MutualInformationProblem<T>& p,
                                char* illegal) {
    const int64_t nx = p.S * p.T1, ny = p.width() * p.T_len;
    const MutualInformationTile whole{0, p.width(), 0, p.T_len + 1};
    for (int64_t b = 0; b < p.batch; ++b) {
      bool bad = false;
      for (int64_t i = 0; i < nx; ++i)
        bad |= mi_internal::IsIllegal(p.px[b * nx + i]);
      for (int64_t i = 0; i < ny; ++i)
        bad |= mi_internal::IsIllegal(p.py[b * ny + i]);
      illegal[b] = bad;
      if (bad) {
        std::fill(p.px_grad + b * nx, p.px_grad + (b + 1) * nx, T(0));
        std::fill(p.py_grad + b * ny, p.py_grad + (b + 1) * ny, T(0));
        continue;
      }
      MutualInformationForwardTile(p, b, whole);
      p.scores[b] = MutualInformationScore(p, b);
      MutualInformationBackwardTile(p, b, whole);
    }
  }

  // The TDT loss's passes, as the CPU op runs them (defined below).
  template <typename T, typename L>
  static void Tdt(const TdtProblem<T, L>& p, char* illegal);

  template <typename T, typename L>
  static void Gradient(const RnntGradientProblem<T, L>& p) {
    for (int64_t row = 0; row < p.B * p.T_len * p.R; ++row) {
      const int64_t b = row / (p.T_len * p.R), t = row / p.R % p.T_len;
      const int64_t s = p.ranges ? p.ranges[row] : row % p.R;
      const auto g = RnntGradientRow<T>::Of(p.px_grad, p.py_grad, b, t, s, p.S,
                                            p.T_len, p.T1, p.constrained,
                                            p.emit, p.clamp, p.scale[b]);
      const int64_t symbol = s < p.S ? p.symbols[b * p.S + s] : -1;
      for (int64_t c = 0; c < p.C; ++c) {
        p.grad[row * p.C + c] = Narrow<L>(
            g.ElementOfRow(Widen(p.logits[row * p.C + c]), p.norms[row], c,
                           symbol, p.blank, p.clamp));
      }
    }
  }
};

// The CUDA launchers, on the default stream.
struct Gpu {
  template <typename T>
  using Buffer = DeviceBuffer<T>;
  template <typename T, typename L>
  static void LogProbs(const RnntProblem<T, L>& p) {
    CHECK(gpu::RnntLogProbs(p, nullptr));
  }
  template <typename T>
  static void MutualInformation(const MutualInformationProblem<T>& p,
                                char* illegal) {
    CHECK(gpu::MutualInformation(p, illegal, nullptr));
  }
  template <typename T, typename L>
  static void Gradient(const RnntGradientProblem<T, L>& p) {
    CHECK(gpu::RnntGradient(p, nullptr));
  }
  template <typename T, typename L>
  static void Tdt(const TdtProblem<T, L>& p, char* illegal);
};

// The MI recursion's outputs and scratch; px, py and boundary are the
// caller's.
template <typename Backend, typename T>
struct Mi {
  template <typename U>
  using Buffer = typename Backend::template Buffer<U>;
  MutualInformationProblem<T> p;
  Buffer<T> scores, px_grad, py_grad, alpha, e;
  Buffer<char> illegal;

  Mi(int64_t B, int64_t S, int64_t T_len, int64_t T1, const T* px, const T* py,
     const int64_t* boundary)
      : p{B,        S,       T_len,   T1,      px,      py,
          boundary, nullptr, nullptr, nullptr, nullptr, nullptr},
        scores(B, std::vector<T>(B, T(kScoreSentinel))),
        px_grad(B * S * T1),
        py_grad(B * (S + 1) * T_len),
        alpha(p.buffer_size()),
        e(p.buffer_size()),
        illegal(B) {
    p.scores = scores.get(), p.px_grad = px_grad.get();
    p.py_grad = py_grad.get(), p.alpha = alpha.get(), p.e = e.get();
  }
  void Run() { Backend::MutualInformation(p, illegal.get()); }
};

// Everything a case compares; a 16-bit gradient widened to T.
template <typename T>
struct Outputs {
  std::vector<T> px, py, norms, scores, px_grad, py_grad, grad;
  std::vector<char> illegal;
};

// The name of a logits type, and the tolerance of a case's comparisons in
// it: for 16-bit logits, one unit in the last place of the gradient.
template <typename L>
struct TypeInfo;
template <>
struct TypeInfo<float> {
  static constexpr const char* kName = "float";
  static constexpr double kTolerance = 1e-4;
};
template <>
struct TypeInfo<double> {
  static constexpr const char* kName = "double";
  static constexpr double kTolerance = 1e-10;
};
template <>
struct TypeInfo<Half> {
  static constexpr const char* kName = "half";
  static constexpr double kTolerance = 2e-3;
};
template <>
struct TypeInfo<BFloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr double kTolerance = 1e-2;
};

// Float inputs whose products run in TF32 (10 mantissa bits, as half).
constexpr double kTf32Tolerance = 2e-3;

// x rounded to L (a copy for L = T), and x widened to T.
template <typename L, typename T>
std::vector<L> NarrowAll(const std::vector<T>& x) {
  std::vector<L> out;
  for (T v : x) out.push_back(Narrow<L>(v));
  return out;
}
template <typename T, typename L>
std::vector<T> WidenAll(const std::vector<L>& x) {
  std::vector<T> out;
  for (L v : x) out.push_back(T(Widen(v)));
  return out;
}

template <typename Backend, typename T>
Outputs<T> RunMi(int64_t B, int64_t S, int64_t T_len, int64_t T1,
                 const std::vector<T>& px, const std::vector<T>& py,
                 const std::vector<int64_t>& boundary) {
  typename Backend::template Buffer<T> d_px(px.size(), px), d_py(py.size(), py);
  typename Backend::template Buffer<int64_t> d_boundary(4 * B, boundary);
  Mi<Backend, T> mi(B, S, T_len, T1, d_px.get(), d_py.get(), d_boundary.get());
  mi.Run();
  Outputs<T> out;
  out.scores = mi.scores.Download(), out.px_grad = mi.px_grad.Download();
  out.py_grad = mi.py_grad.Download(), out.illegal = mi.illegal.Download();
  return out;
}

template <typename T>
struct RnntInputs {
  int64_t B, T_len, S, C, R, T1;
  std::vector<T> logits{}, scale{};                      // [B, T, R, C], [B]
  std::vector<int64_t> symbols{}, ranges{}, boundary{};  // ranges empty: full
  int blank = 0;
  RnntType type = RnntType::kRegular;
  T delay_penalty = 0, clamp = 0, emit = 1;
};

// The fused loss's buffers and passes: 1 and 2 (Forward), 3 (Backward), with
// logits and gradient of type L (in.logits rounded to L).  Empty in.logits:
// left uninitialised.  `in_place`: the gradient overwrites the logits.
template <typename Backend, typename T, typename L = T>
struct Rnnt {
  template <typename U>
  using Buffer = typename Backend::template Buffer<U>;
  Buffer<L> logits, grad;
  Buffer<T> scale, px, py, norms;
  Buffer<int64_t> symbols, ranges, boundary;
  Mi<Backend, T> mi;
  RnntProblem<T, L> pr;
  RnntGradientProblem<T, L> gp;

  Rnnt(const RnntInputs<T>& in, bool in_place)
      : logits(in.B * in.T_len * in.R * in.C, NarrowAll<L>(in.logits)),
        grad(in_place ? 0 : in.B * in.T_len * in.R * in.C),
        scale(in.B, in.scale),
        px(in.B * in.S * in.T1),
        py(in.B * (in.S + 1) * in.T_len),
        norms(in.B * in.T_len * in.R),
        symbols(in.B * in.S, in.symbols),
        ranges(in.ranges.size(), in.ranges),
        boundary(4 * in.B, in.boundary),
        mi(in.B, in.S, in.T_len, in.T1, px.get(), py.get(), boundary.get()),
        pr{in.B,         in.T_len,       in.S,         in.C,
           in.R,         in.T1,          logits.get(), symbols.get(),
           ranges.get(), boundary.get(), px.get(),     py.get(),
           norms.get(),  in.blank,       in.type,      in.delay_penalty},
        gp{in.B,         in.T_len,
           in.S,         in.C,
           in.R,         in.T1,
           logits.get(), symbols.get(),
           ranges.get(), mi.p.px_grad,
           mi.p.py_grad, norms.get(),
           scale.get(),  in_place ? logits.get() : grad.get(),
           in.blank,     in.type == RnntType::kConstrained,
           in.emit,      in.clamp} {}
  void Forward() {
    Backend::LogProbs(pr);
    mi.Run();
  }
  void Backward() { Backend::Gradient(gp); }
  Outputs<T> Download() const {
    Outputs<T> out;
    out.px = px.Download(), out.py = py.Download();
    out.norms = norms.Download(), out.scores = mi.scores.Download();
    out.px_grad = mi.px_grad.Download(), out.py_grad = mi.py_grad.Download();
    out.illegal = mi.illegal.Download();
    out.grad = WidenAll<T>(gp.grad == logits.get() ? logits.Download()
                                                   : grad.Download());
    return out;
  }
};

template <typename Backend, typename T, typename L = T>
Outputs<T> RunRnnt(const RnntInputs<T>& in, bool in_place) {
  Rnnt<Backend, T, L> loss(in, in_place);
  loss.Forward();
  loss.Backward();
  return loss.Download();
}

// ---------------------------------------------------------------------------
// check

// splitmix64: the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * double(Next() >> 11) * 0x1.0p-53;
  }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + int64_t(Next() % uint64_t(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

// max |a - b| / max(1, |b|); equal values (infinities too) and two NaNs
// count as 0, any other non-finite mismatch as +inf.
template <typename T>
double MaxRelError(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    worst = std::max(worst, std::isfinite(a) && std::isfinite(b)
                                ? std::fabs(a - b) / std::max(1.0, std::fabs(b))
                                : INFINITY);
  }
  return worst;
}

// Compares GPU and CPU outputs, checks the illegal flags, prints one line.
// The gradient is of logits type L (widened); everything else is of type T.
template <typename T, typename L = T>
bool Report(const std::string& name, const Outputs<T>& gpu,
            const Outputs<T>& cpu, int64_t B, int64_t nan_batch) {
  using Field = std::vector<T> Outputs<T>::*;
  const std::pair<const char*, Field> fields[] = {
      {"px", &Outputs<T>::px},           {"py", &Outputs<T>::py},
      {"norms", &Outputs<T>::norms},     {"scores", &Outputs<T>::scores},
      {"px_grad", &Outputs<T>::px_grad}, {"py_grad", &Outputs<T>::py_grad},
      {"grad", &Outputs<T>::grad}};
  // The field furthest over (or least under) its tolerance.
  double worst = 0, worst_ratio = 0;
  const char* worst_field = "-";
  for (const auto& [what, field] : fields) {
    if ((cpu.*field).empty()) continue;
    const double err = MaxRelError(gpu.*field, cpu.*field);
    const double ratio =
        err / (field == &Outputs<T>::grad ? TypeInfo<L>::kTolerance
                                          : TypeInfo<T>::kTolerance);
    if (ratio > worst_ratio || *worst_field == '-') {
      worst = err, worst_ratio = ratio, worst_field = what;
    }
  }
  // Exactly sequence nan_batch (-1: none) must be flagged, on both sides.
  bool cpu_flags = true, gpu_flags = true;
  int finite = 0;
  for (int64_t b = 0; b < B; ++b) {
    cpu_flags &= bool(cpu.illegal[b]) == (b == nan_batch);
    gpu_flags &= bool(gpu.illegal[b]) == (b == nan_batch);
    finite += std::isfinite(cpu.scores[b]) && b != nan_batch;
  }
  const std::string problems =
      std::string(cpu_flags ? "" : " [CPU illegal flags wrong]") +
      (gpu_flags ? "" : " [GPU illegal flags wrong]");
  const bool ok = worst_ratio <= 1 && problems.empty();
  std::printf("%s %-11s %-72s max rel err %.2e (%s) finite scores %d/%lld%s\n",
              ok ? "PASS" : "FAIL", TypeInfo<L>::kName, name.c_str(), worst,
              worst_field, finite, (long long)B, problems.c_str());
  return ok;
}

// [B, 4] boundaries; sequence 0 spans everything.  `general`: non-zero
// s_begin / t_begin; `fit`: t_end - t_begin >= s_end - s_begin (a path
// exists for modified px).
std::vector<int64_t> RandomBoundary(Rng& rng, int64_t B, int64_t S, int64_t T,
                                    bool general, bool fit) {
  std::vector<int64_t> bnd;
  for (int64_t b = 0; b < B; ++b) {
    int64_t s0 = 0, t0 = 0, s1 = S, t1 = T;
    if (b > 0) {
      s0 = general ? rng.Int(0, S / 3) : 0;
      t0 = general ? rng.Int(0, T / 3) : 0;
      s1 = rng.Int(std::min(s0 + 1, S), S);
      t1 = rng.Int(std::min(t0 + 1, T), T);
    }
    if (fit) s1 = std::min(s1, s0 + (t1 - t0));
    bnd.insert(bnd.end(), {s0, t0, s1, t1});
  }
  return bnd;
}

struct MiCase {
  const char* name;
  int64_t B, S, T;
  bool modified;
  double neg_inf;     // fraction of px and py set to -inf
  int64_t nan_batch;  // a NaN in this sequence's px; -1: none
};

template <typename T>
bool RunMiCase(const MiCase& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t T1 = c.modified ? c.T : c.T + 1;
  auto random = [&](int64_t n) {
    std::vector<T> x(n);
    for (T& v : x) {
      v = rng.Uniform(0, 1) < c.neg_inf ? -INFINITY : T(rng.Uniform(-3, 1));
    }
    return x;
  };
  std::vector<T> px = random(c.B * c.S * T1),
                 py = random(c.B * (c.S + 1) * c.T);
  const auto bnd = RandomBoundary(rng, c.B, c.S, c.T, true, c.modified);
  if (c.nan_batch >= 0) px[(c.nan_batch * c.S + c.S / 2) * T1 + c.T / 2] = NAN;
  return Report(std::string("mi ") + c.name,
                RunMi<Gpu>(c.B, c.S, c.T, T1, px, py, bnd),
                RunMi<Cpu>(c.B, c.S, c.T, T1, px, py, bnd), c.B, c.nan_batch);
}

struct RnntCase {
  RnntType type;
  int64_t B, T, S, C, R;  // R = 0: full logits, R = S + 1
  int blank;
  double delay_penalty, clamp, fastemit;
  bool general_boundary = false, in_place = false, neg_inf_logits = false;
  int64_t nan_batch = -1;  // a NaN logit in a used row of this sequence

  std::string Name() const {
    const char* types[] = {"regular", "modified", "constrained"};
    char text[128];
    std::snprintf(text, sizeof(text), "rnnt %s B=%lld T=%lld S=%lld C=%lld",
                  types[int(type)], (long long)B, (long long)T, (long long)S,
                  (long long)C);
    std::string name = text;
    if (R > 0) name += " pruned R=" + std::to_string(R);
    if (blank > 0) name += " blank=" + std::to_string(blank);
    if (delay_penalty > 0) name += " delay";
    if (clamp > 0) name += " clamp";
    if (fastemit > 0) name += " fastemit";
    if (general_boundary) name += " begin>0";
    if (in_place) name += " in-place";
    if (neg_inf_logits) name += " -inf";
    if (nan_batch >= 0) name += " NaN@" + std::to_string(nan_batch);
    return name;
  }
};

// What the cases of both losses (RnntCase, JointCase) draw alike, in this
// order: their options, a boundary and symbols other than the blank; R rows
// of logits per frame.
template <typename T, typename Case>
RnntInputs<T> RandomRnntInputs(const Case& c, int64_t R, Rng& rng) {
  RnntInputs<T> in{c.B, c.T, c.S,
                   c.C, R,   c.type == RnntType::kRegular ? c.T + 1 : c.T};
  in.blank = c.blank, in.type = c.type;
  in.delay_penalty = c.delay_penalty, in.clamp = c.clamp;
  in.emit = T(1) + T(c.fastemit);
  in.boundary = RandomBoundary(rng, c.B, c.S, c.T, c.general_boundary,
                               c.type != RnntType::kRegular);
  for (int64_t i = 0; i < c.B * c.S; ++i) {
    int64_t y;
    do y = rng.Int(0, c.C - 1);
    while (y == c.blank);
    in.symbols.push_back(y);
  }
  return in;
}

template <typename T>
RnntInputs<T> MakeRnntInputs(const RnntCase& c, Rng& rng) {
  RnntInputs<T> in = RandomRnntInputs<T>(c, c.R > 0 ? c.R : c.S + 1, rng);
  for (int64_t b = 0; c.R > 0 && b < c.B; ++b) {
    // Consecutive positions around the diagonal of b's rectangle.
    const int64_t* bnd = &in.boundary[4 * b];
    const int64_t frames = std::max<int64_t>(1, bnd[3] - bnd[1] - 1);
    for (int64_t t = 0; t < c.T; ++t) {
      const int64_t centre = bnd[0] + std::max<int64_t>(0, t - bnd[1]) *
                                          (bnd[2] - bnd[0]) / frames;
      const int64_t r0 = std::min(std::max<int64_t>(0, centre - (c.R - 1) / 2),
                                  c.S - (c.R - 1));
      for (int64_t j = 0; j < c.R; ++j) in.ranges.push_back(r0 + j);
    }
  }
  for (int64_t i = 0; i < c.B * c.T * in.R * c.C; ++i) {
    const bool neg_inf = c.neg_inf_logits && rng.Uniform(0, 1) < 0.03;
    in.logits.push_back(neg_inf ? -INFINITY : T(rng.Uniform(-3, 3)));
  }
  auto used_row = [&](int64_t b, int64_t skip) {  // the skip-th used row of b
    for (int64_t row = b * c.T * in.R; row < (b + 1) * c.T * in.R; ++row) {
      const int64_t s = in.ranges.empty() ? row % in.R : in.ranges[row];
      const int64_t t = row / in.R % c.T, *bnd = &in.boundary[4 * b];
      if (s >= bnd[0] && s <= bnd[2] && t >= bnd[1] && t < bnd[3] && !skip--) {
        return row;
      }
    }
    return int64_t(0);
  };
  if (c.neg_inf_logits) {  // also a whole row of -inf
    const int64_t row = used_row(0, c.T * in.R / 2);
    std::fill_n(in.logits.begin() + row * c.C, c.C, T(-INFINITY));
  }
  if (c.nan_batch >= 0) in.logits[used_row(c.nan_batch, 1) * c.C + 1] = NAN;
  for (int64_t b = 0; b < c.B; ++b) in.scale.push_back(rng.Uniform(-2, 2));
  return in;
}

// Logits of type L: the float inputs rounded to L, the same on both sides.
template <typename T, typename L = T>
bool RunRnntCase(const RnntCase& c, uint64_t seed) {
  Rng rng(seed);
  const RnntInputs<T> in = MakeRnntInputs<T>(c, rng);
  return Report<T, L>(c.Name(), RunRnnt<Gpu, T, L>(in, c.in_place),
                      RunRnnt<Cpu, T, L>(in, false), c.B, c.nan_batch);
}

// ---------------------------------------------------------------------------
// The TDT loss (gpu/tdt_loss.cu) against the CPU op's passes (tdt_loss_op.cc)
// in plain loops over tdt_loss.h: pass 1 row by row, then each utterance's
// lattice node by node.

template <typename T>
struct TdtInputs {
  int64_t B, T_len, S, C, R;  // R rows of logits a frame
  std::vector<int64_t> durations;
  std::vector<T> tokens{}, durs{};  // [B, T, R, C] (empty: px, py), [.., K]
  std::vector<T> px{}, py{};        // [B, S, T], [B, S + 1, T]
  std::vector<int64_t> symbols{}, ranges{}, frames{}, labels{};
  int blank = 0;
  T sigma = 0, clamp = 0, emit = 1;
};

template <typename Backend, typename T, typename L>
struct Tdt {
  template <typename U>
  using Buffer = typename Backend::template Buffer<U>;
  Buffer<L> tokens, durs;
  Buffer<T> px, py;
  Buffer<int64_t> symbols, ranges, frames, labels;
  Buffer<T> lab, blk, dur, norms, alpha, beta, scores, label_occ, blank_occ,
      d_dur;
  Buffer<char> illegal;
  TdtProblem<T, L> p{};

  explicit Tdt(const TdtInputs<T>& in)
      : tokens(in.tokens.size(), NarrowAll<L>(in.tokens)),
        durs(in.durs.size(), NarrowAll<L>(in.durs)),
        px(in.px.size(), in.px),
        py(in.py.size(), in.py),
        symbols(in.symbols.size(), in.symbols),
        ranges(in.ranges.size(), in.ranges),
        frames(in.B, in.frames),
        labels(in.B, in.labels),
        lab(Nodes(in)),
        blk(Nodes(in)),
        dur(Nodes(in) * in.durations.size()),
        norms(in.tokens.empty() ? 0 : in.B * in.T_len * in.R),
        alpha(Nodes(in)),
        beta(Nodes(in)),
        scores(in.B, std::vector<T>(in.B, T(kScoreSentinel))),
        label_occ(in.B * in.S * in.T_len),
        blank_occ(in.B * (in.S + 1) * in.T_len),
        d_dur(Nodes(in) * in.durations.size()),
        illegal(in.B) {
    TdtLattice<T>& g = p.lattice;
    g.B = in.B, g.T_len = in.T_len, g.S = in.S;
    g.K = int64_t(in.durations.size());
    std::copy(in.durations.begin(), in.durations.end(), g.durations);
    g.frames = frames.get(), g.labels = labels.get();
    g.lab = p.lab = lab.get(), g.blk = p.blk = blk.get();
    g.dur = p.dur = dur.get();
    g.emit = in.emit, g.clamp = in.clamp;
    p.C = in.C, p.R = in.R, p.token_logits = tokens.get();
    p.duration_logits = durs.get(), p.ranges = ranges.get();
    p.px = px.get(), p.py = py.get();
    p.symbols = symbols.get(), p.blank = in.blank, p.sigma = in.sigma;
    p.norms = norms.get(), p.alpha = alpha.get(), p.beta = beta.get();
    p.scores = scores.get(), p.label_occ = label_occ.get();
    p.blank_occ = blank_occ.get(), p.d_dur = d_dur.get();
  }
  static int64_t Nodes(const TdtInputs<T>& in) {
    return in.B * in.T_len * (in.S + 1);
  }
  Outputs<T> Run() {
    Backend::Tdt(p, illegal.get());
    Outputs<T> out;
    out.norms = norms.Download(), out.scores = scores.Download();
    out.px_grad = label_occ.Download(), out.py_grad = blank_occ.Download();
    out.grad = d_dur.Download(), out.illegal = illegal.Download();
    return out;
  }
};

template <typename T, typename L>
void Cpu::Tdt(const TdtProblem<T, L>& p, char* illegal) {
  const TdtLattice<T>& g = p.lattice;
  const int64_t nodes = g.B * g.T_len * (g.S + 1);
  std::fill(p.label_occ, p.label_occ + g.B * g.S * g.T_len, T(0));
  std::fill(p.blank_occ, p.blank_occ + g.B * (g.S + 1) * g.T_len, T(0));
  std::fill(p.d_dur, p.d_dur + nodes * g.K, T(0));
  if (p.ranges != nullptr) {
    std::fill(p.lab, p.lab + nodes, T(-INFINITY));
    std::fill(p.blk, p.blk + nodes, T(-INFINITY));
    std::fill(p.dur, p.dur + nodes * g.K, T(-INFINITY));
  }
  for (int64_t row = 0; row < p.Rows(); ++row) {
    int64_t b, t, u;
    p.Locate(row, &b, &t, &u);
    if (!p.RowUsed(b, t, u)) {
      if (p.token_logits != nullptr) p.norms[row] = T(0);
    } else if (p.token_logits == nullptr) {
      p.WriteLogProbs(b, t, u);
    } else {
      bool nan;
      const L* x = p.token_logits + row * p.C;
      const T m = LaneMax(x, p.C, 0, 1, &nan);
      p.WriteRow(row, b, t, u, m,
                 LogSumOf(m, nan, LaneExpSum(x, p.C, 0, 1, m)));
    }
  }
  for (int64_t b = 0; b < g.B; ++b) {
    const T score = g.Forward(b, p.alpha);
    p.scores[b] = score;
    illegal[b] = score != score || score == T(INFINITY);
    if (!illegal[b]) {
      g.Backward(b, p.alpha, score, p.beta, p.label_occ, p.blank_occ, p.d_dur);
    }
  }
}

template <typename T, typename L>
void Gpu::Tdt(const TdtProblem<T, L>& p, char* illegal) {
  CHECK(gpu::TdtLoss(p, illegal, nullptr));
}

struct TdtCase {
  int64_t B, T, S, C;
  std::vector<int64_t> durations;
  int blank;
  double sigma, clamp, fastemit;
  int64_t R = 0;                // pruned rows a frame (0: all S + 1)
  bool log_probs = false;       // px and py instead of token logits
  bool neg_inf_logits = false;  // scattered -inf, and whole rows of -inf
  int64_t nan_batch = -1;       // a NaN token input in this utterance

  std::string Name() const {
    char text[128];
    std::snprintf(text, sizeof(text), "tdt B=%lld T=%lld S=%lld C=%lld D=[",
                  (long long)B, (long long)T, (long long)S, (long long)C);
    std::string name = text;
    for (size_t k = 0; k < durations.size(); ++k) {
      name += (k ? "," : "") + std::to_string(durations[k]);
    }
    name += "]";
    if (R > 0) name += " pruned R=" + std::to_string(R);
    if (log_probs) name += " px/py";
    if (blank > 0) name += " blank=" + std::to_string(blank);
    if (sigma > 0) name += " sigma";
    if (clamp > 0) name += " clamp";
    if (fastemit > 0) name += " fastemit";
    if (neg_inf_logits) name += " -inf";
    if (nan_batch >= 0) name += " NaN@" + std::to_string(nan_batch);
    return name;
  }
};

// Utterance 0 spans the padding; the others are shorter at random.  Pruned
// rows follow the diagonal of each utterance's lattice.
template <typename T>
TdtInputs<T> MakeTdtInputs(const TdtCase& c, Rng& rng) {
  const int64_t R = c.R > 0 ? c.R : c.S + 1, K = c.durations.size();
  TdtInputs<T> in{c.B, c.T, c.S, c.C, R, c.durations};
  in.blank = c.blank, in.sigma = c.sigma, in.clamp = c.clamp;
  in.emit = T(1) + T(c.fastemit);
  for (int64_t b = 0; b < c.B; ++b) {
    in.frames.push_back(b == 0 ? c.T : rng.Int(1, c.T));
    in.labels.push_back(b == 0 ? c.S : rng.Int(0, c.S));
  }
  for (int64_t i = 0; i < c.B * c.S; ++i) {
    int64_t y;
    do y = rng.Int(0, c.C - 1);
    while (y == c.blank);
    in.symbols.push_back(y);
  }
  for (int64_t b = 0; c.R > 0 && b < c.B; ++b) {
    for (int64_t t = 0; t < c.T; ++t) {
      const int64_t centre = std::min(t, in.frames[b] - 1) * in.labels[b] /
                             std::max<int64_t>(1, in.frames[b] - 1);
      const int64_t r0 =
          std::min(std::max<int64_t>(0, centre - (R - 1) / 2), c.S - (R - 1));
      for (int64_t j = 0; j < R; ++j) in.ranges.push_back(r0 + j);
    }
  }
  const auto random = [&](int64_t n, double lo, double hi) {
    std::vector<T> x;
    for (int64_t i = 0; i < n; ++i) {
      const bool neg_inf = c.neg_inf_logits && rng.Uniform(0, 1) < 0.03;
      x.push_back(neg_inf ? -INFINITY : T(rng.Uniform(lo, hi)));
    }
    return x;
  };
  const int64_t rows = c.B * c.T * R;
  if (c.log_probs) {
    in.px = random(c.B * c.S * c.T, -4, -0.1);
    in.py = random(c.B * (c.S + 1) * c.T, -4, -0.1);
  } else {
    in.tokens = random(rows * c.C, -3, 3);
  }
  in.durs = random(rows * K, -2, 2);
  // Row (t, j) of utterance b, within its frames.
  const auto row = [&](int64_t b, int64_t t, int64_t j) {
    return (b * c.T + t % in.frames[b]) * R + j % (in.labels[b] + 1) % R;
  };
  if (c.neg_inf_logits && !c.log_probs) {  // a whole token and duration row
    std::fill_n(in.tokens.begin() + row(0, c.T / 2, c.S / 2) * c.C, c.C,
                T(-INFINITY));
    std::fill_n(in.durs.begin() + row(0, c.T / 3, c.S / 3) * K, K,
                T(-INFINITY));
  }
  if (c.nan_batch >= 0) {
    const int64_t b = c.nan_batch;
    if (c.log_probs) {
      in.py[(b * (c.S + 1)) * c.T] = NAN;  // node (0, 0)
    } else {
      in.tokens[row(b, 0, 0) * c.C + 1] = NAN;
    }
  }
  return in;
}

template <typename T, typename L = T>
bool RunTdtCase(const TdtCase& c, uint64_t seed) {
  Rng rng(seed);
  const TdtInputs<T> in = MakeTdtInputs<T>(c, rng);
  return Report<T, L>(c.Name(), Tdt<Gpu, T, L>(in).Run(),
                      Tdt<Cpu, T, L>(in).Run(), c.B, c.nan_batch);
}

// ---------------------------------------------------------------------------
// The RNN-T loss fused with its joint network (gpu/rnnt_joint.cu): the GPU
// launchers as the op runs them, a CPU reference in plain loops (every
// cell's h and l formed whole, the fused loss's CPU passes on them, then the
// chain rule through the joint), the check cases and the benchmark.

// The joint loss's inputs: everything of RnntInputs but the logits, and the
// joint's (values already rounded to the inputs' type).
template <typename T>
struct JointData {
  RnntInputs<T> rnnt;
  int64_t J;
  JointActivation activation;
  std::vector<T> encoder, predictor, weight,
      bias;  // [B,T,J] [B,S+1,J] [J,C] [C]
};

// The loss's outputs (Outputs::grad unused) and the four gradients, widened
// to T.
template <typename T>
struct JointOutputs {
  Outputs<T> loss;
  std::vector<T> d_encoder, d_predictor, d_weight, d_bias;
};

// The op's GPU path on the default stream: pass 1 (RnntJointLogProbs) and
// the recursion, then the used ranges, the plan and pass 3
// (RnntJointGradient).  Inputs of type L; empty vectors leave a buffer
// uninitialised (bench fills it on the device).  `capacity`: rows per chunk
// (0: JointChunkCapacity); `max_splits`: partial sums of dW (0:
// JointWeightSplits).
template <typename T, typename L>
class JointGpu {
 public:
  JointGpu(const JointData<T>& d, int64_t capacity, int64_t max_splits,
           gpu::JointProducts products = gpu::JointProducts::kExact)
      : in_(d.rnnt),
        products_(products),
        J_(d.J),
        activation_(d.activation),
        capacity_(capacity),
        max_splits_(max_splits > 0
                        ? max_splits
                        : gpu::JointWeightSplits(J_, in_.C, sizeof(T))),
        encoder_(in_.B * in_.T_len * J_, NarrowAll<L>(d.encoder)),
        predictor_(in_.B * (in_.S + 1) * J_, NarrowAll<L>(d.predictor)),
        weight_(J_ * in_.C, NarrowAll<L>(d.weight)),
        bias_(in_.C, NarrowAll<L>(d.bias)),
        scale_(in_.B, in_.scale),
        px_(in_.B * in_.S * in_.T1),
        py_(in_.B * (in_.S + 1) * in_.T_len),
        norms_(in_.B * in_.T_len * (in_.S + 1)),
        symbols_(in_.B * in_.S, in_.symbols),
        boundary_(4 * in_.B, in_.boundary),
        ranges_(2 * in_.B * in_.T_len),
        mi_(in_.B, in_.S, in_.T_len, in_.T1, px_.get(), py_.get(),
            boundary_.get()),
        d_encoder_(in_.B * in_.T_len * J_),
        d_predictor_(in_.B * (in_.S + 1) * J_),
        d_weight_(J_ * in_.C),
        d_bias_(in_.C),
        acc_encoder_(kWide ? 0 : in_.B * in_.T_len * J_),
        acc_predictor_(kWide ? 0 : in_.B * (in_.S + 1) * J_),
        acc_weight_(kWide ? 0 : J_ * in_.C),
        acc_bias_(kWide ? 0 : in_.C) {}

  Mi<Gpu, T>& mi() { return mi_; }
  DeviceBuffer<L>* inputs(int i) {
    DeviceBuffer<L>* all[4] = {&encoder_, &predictor_, &weight_, &bias_};
    return all[i];
  }
  // Rows of the last forward plan (the cells the loss formed).
  int64_t forward_rows() const { return forward_rows_; }

  void Forward() {
    const std::vector<int64_t> ranges =
        gpu::JointBoundaryRanges(in_.boundary.data(), in_.B, in_.T_len);
    const gpu::JointPlan plan = Plan(ranges, false);
    forward_rows_ = 0;
    for (const gpu::JointChunk& chunk : plan.chunks)
      forward_rows_ += chunk.rows;
    const RnntProblem<T, T> pr{
        in_.B,        in_.T_len,       in_.S,     in_.C,
        in_.S + 1,    in_.T1,          nullptr,   symbols_.get(),
        nullptr,      boundary_.get(), px_.get(), py_.get(),
        norms_.get(), in_.blank,       in_.type,  in_.delay_penalty};
    CHECK(gpu::RnntJointLogProbs(Problem(plan), pr, plan, nullptr));
    mi_.Run();
  }

  void Backward() {
    gpu::RnntJointGradientProblem<T, L> p;
    p.rows = RnntGradientProblem<T, T>{
        in_.B,         in_.T_len,
        in_.S,         in_.C,
        in_.S + 1,     in_.T1,
        nullptr,       symbols_.get(),
        nullptr,       mi_.p.px_grad,
        mi_.p.py_grad, norms_.get(),
        scale_.get(),  nullptr,
        in_.blank,     in_.type == RnntType::kConstrained,
        in_.emit,      in_.clamp};
    CHECK(gpu::RnntJointUsedRanges(p, ranges_.get(), nullptr));
    const gpu::JointPlan plan = Plan(ranges_.Download(), true);
    p.joint = Problem(plan);
    p.d_hidden = gradient_->d_hidden.get();
    p.partial = gradient_->partial.get();
    p.max_splits = max_splits_;
    p.d_encoder = d_encoder_.get(), p.d_predictor = d_predictor_.get();
    p.d_weight = d_weight_.get(), p.d_bias = d_bias_.get();
    if constexpr (kWide) {
      p.acc_encoder = d_encoder_.get(), p.acc_predictor = d_predictor_.get();
      p.acc_weight = d_weight_.get(), p.acc_bias = d_bias_.get();
    } else {
      p.acc_encoder = acc_encoder_.get();
      p.acc_predictor = acc_predictor_.get();
      p.acc_weight = acc_weight_.get(), p.acc_bias = acc_bias_.get();
    }
    CHECK(gpu::RnntJointGradient(p, plan, nullptr));
  }

  JointOutputs<T> Download() const {
    JointOutputs<T> out;
    out.loss.px = px_.Download(), out.loss.py = py_.Download();
    out.loss.norms = norms_.Download(), out.loss.scores = mi_.scores.Download();
    out.loss.px_grad = mi_.px_grad.Download();
    out.loss.py_grad = mi_.py_grad.Download();
    out.loss.illegal = mi_.illegal.Download();
    out.d_encoder = WidenAll<T>(d_encoder_.Download());
    out.d_predictor = WidenAll<T>(d_predictor_.Download());
    out.d_weight = WidenAll<T>(d_weight_.Download());
    out.d_bias = WidenAll<T>(d_bias_.Download());
    return out;
  }

 private:
  static constexpr bool kWide = std::is_same_v<T, L>;

  // Chunk scratch, kept while a plan fits it (repeated runs plan alike; the
  // forward and the gradient keep the larger of their plans).
  struct Scratch {
    int64_t rows, pieces;
    DeviceBuffer<T> wide_weight, wide_bias, hidden, logits;
    DeviceBuffer<int64_t> row_cells, piece_buffer;
    Scratch(int64_t rows_in, int64_t pieces_in, int64_t J, int64_t C)
        : rows(rows_in),
          pieces(pieces_in),
          wide_weight(kWide ? 0 : J * C),
          wide_bias(kWide ? 0 : C),
          hidden(rows * J),
          logits(rows * C),
          row_cells(rows),
          piece_buffer(4 * pieces) {}
  };

  // The gradient's own scratch: dh [rows, J] and the partial sums of dW.
  struct GradientScratch {
    int64_t rows;
    DeviceBuffer<T> d_hidden, partial;
    GradientScratch(int64_t rows_in, int64_t J, int64_t C, int64_t splits)
        : rows(rows_in),
          d_hidden(rows * J),
          partial(splits > 1 ? splits * (J * C + C) : 0) {}
  };

  gpu::JointPlan Plan(const std::vector<int64_t>& ranges, bool gradient) {
    const int64_t capacity =
        capacity_ > 0 ? capacity_
                      : gpu::JointChunkCapacity(J_, in_.C, sizeof(T), gradient);
    gpu::JointPlan plan = gpu::PlanJointChunks(ranges.data(), in_.B * in_.T_len,
                                               in_.T_len, capacity);
    const int64_t pieces = int64_t(plan.pieces.size());
    if (!scratch_ || scratch_->rows < plan.max_rows ||
        scratch_->pieces < pieces) {
      const int64_t rows =
          std::max(plan.max_rows, scratch_ ? scratch_->rows : 0);
      const int64_t most = std::max(pieces, scratch_ ? scratch_->pieces : 0);
      scratch_.reset();  // the old buffers go first
      scratch_ = std::make_unique<Scratch>(rows, most, J_, in_.C);
    }
    if (gradient && (!gradient_ || gradient_->rows < plan.max_rows)) {
      gradient_.reset();
      gradient_ = std::make_unique<GradientScratch>(plan.max_rows, J_, in_.C,
                                                    max_splits_);
    }
    return plan;
  }

  gpu::RnntJointProblem<T, L> Problem(const gpu::JointPlan&) const {
    return gpu::RnntJointProblem<T, L>{
        {in_.B, in_.T_len, in_.S, in_.C, J_, encoder_.get(), predictor_.get(),
         weight_.get(), bias_.get(), activation_},
        scratch_->wide_weight.get(),
        scratch_->wide_bias.get(),
        scratch_->hidden.get(),
        scratch_->logits.get(),
        scratch_->row_cells.get(),
        reinterpret_cast<gpu::JointPiece*>(scratch_->piece_buffer.get()),
        products_};
  }

  RnntInputs<T> in_;
  gpu::JointProducts products_;
  int64_t J_;
  JointActivation activation_;
  int64_t capacity_, max_splits_;
  DeviceBuffer<L> encoder_, predictor_, weight_, bias_;
  DeviceBuffer<T> scale_, px_, py_, norms_;
  DeviceBuffer<int64_t> symbols_, boundary_, ranges_;
  Mi<Gpu, T> mi_;
  DeviceBuffer<L> d_encoder_, d_predictor_, d_weight_, d_bias_;
  DeviceBuffer<T> acc_encoder_, acc_predictor_, acc_weight_, acc_bias_;
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<GradientScratch> gradient_;
  int64_t forward_rows_ = 0;
};

template <typename T>
T ActivateCpu(JointActivation activation, T x) {
  switch (activation) {
    case JointActivation::kTanh:
      return std::tanh(x);
    case JointActivation::kRelu:
      return Max(x, T(0));
    default:
      return x;
  }
}

// A float rounded to TF32 (10 mantissa bits; to nearest, ties away from
// zero, as wmma::__float_to_tf32).
float RoundTf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// An operand of the joint's products as the GPU multiplies it: as it is
// (kExact), or as tensor cores take it: rounded to the inputs' 16-bit type
// L, or to TF32 for float inputs.
template <typename T, typename L>
T ProductOperand(gpu::JointProducts products, T x) {
  if (products == gpu::JointProducts::kExact) return x;
  if constexpr (std::is_same_v<L, Half> || std::is_same_v<L, BFloat16>) {
    return T(Widen(Narrow<L>(float(x))));
  } else {
    return T(RoundTf32(float(x)));
  }
}

// The reference: h and l of every cell, the fused loss's CPU passes
// (Rnnt<Cpu>) on l, then dW, dc, dh, de and dp in plain loops over the
// cells whose gradient is not zero (as the op skips the others, whose
// inputs may be padding); the gradients rounded to L.  The products' operands
// (h, W and the logits' gradient G) are rounded as `products` rounds them;
// act' and dc take them as they are.
template <typename T, typename L>
JointOutputs<T> RunJointCpu(const JointData<T>& d,
                            gpu::JointProducts products) {
  const auto q = [products](T x) { return ProductOperand<T, L>(products, x); };
  const RnntInputs<T>& in = d.rnnt;
  const int64_t B = in.B, Tn = in.T_len, S = in.S, C = in.C, J = d.J;
  const int64_t W = S + 1, cells = B * Tn * W;
  std::vector<T> hidden(cells * J), weight(J * C);
  for (int64_t i = 0; i < J * C; ++i) weight[i] = q(d.weight[i]);
  RnntInputs<T> full = in;
  full.logits.assign(cells * C, T(0));
  for (int64_t cell = 0; cell < cells; ++cell) {
    const int64_t frame = cell / W, s = cell % W, b = frame / Tn;
    T* h = &hidden[cell * J];
    for (int64_t j = 0; j < J; ++j) {
      h[j] = ActivateCpu(d.activation, d.encoder[frame * J + j] +
                                           d.predictor[(b * W + s) * J + j]);
    }
    for (int64_t c = 0; c < C; ++c) {
      T l = d.bias[c];
      for (int64_t j = 0; j < J; ++j) l += q(h[j]) * weight[j * C + c];
      full.logits[cell * C + c] = l;
    }
  }
  Rnnt<Cpu, T, T> loss(full, /*in_place=*/false);
  loss.Forward();
  loss.Backward();
  JointOutputs<T> out;
  out.loss = loss.Download();
  const std::vector<T> G = std::move(out.loss.grad);
  out.loss.grad.clear();
  std::vector<T> de(B * Tn * J, T(0)), dp(B * W * J, T(0)), dw(J * C, T(0)),
      dc(C, T(0)), dh(J);
  for (int64_t cell = 0; cell < cells; ++cell) {
    const int64_t frame = cell / W, s = cell % W, b = frame / Tn,
                  t = frame % Tn;
    const auto g = RnntGradientRow<T>::Of(
        out.loss.px_grad.data(), out.loss.py_grad.data(), b, t, s, S, Tn, in.T1,
        in.type == RnntType::kConstrained, in.emit, in.clamp, in.scale[b]);
    if (g.gx + g.gy == T(0)) continue;
    const T* g_row = &G[cell * C];
    const T* h = &hidden[cell * J];
    for (int64_t j = 0; j < J; ++j) {
      T sum = T(0);
      const T hq = q(h[j]);
      for (int64_t c = 0; c < C; ++c) {
        const T gq = q(g_row[c]);
        dw[j * C + c] += hq * gq;
        sum += gq * weight[j * C + c];
      }
      const T da = sum * ActivationSlope(d.activation, h[j]);
      de[frame * J + j] += da;
      dp[(b * W + s) * J + j] += da;
    }
    for (int64_t c = 0; c < C; ++c) dc[c] += g_row[c];
  }
  out.d_encoder = WidenAll<T>(NarrowAll<L>(de));
  out.d_predictor = WidenAll<T>(NarrowAll<L>(dp));
  out.d_weight = WidenAll<T>(NarrowAll<L>(dw));
  out.d_bias = WidenAll<T>(NarrowAll<L>(dc));
  return out;
}

struct JointCase {
  RnntType type;
  int64_t B, T, S, C, J;
  int blank;
  double delay_penalty, clamp, fastemit;
  JointActivation activation = JointActivation::kTanh;
  bool general_boundary = false;
  int64_t capacity = 0;      // rows per chunk (0: the op's)
  int64_t max_splits = 0;    // partial sums of dW (0: the op's)
  bool nan_padding = false;  // NaN inputs in every cell outside the boundary
  int64_t nan_batch = -1;    // a NaN encoder value in a used frame of it

  std::string Name() const {
    const char* types[] = {"regular", "modified", "constrained"};
    const char* acts[] = {"tanh", "relu", "identity"};
    char text[160];
    std::snprintf(text, sizeof(text),
                  "joint %s %s B=%lld T=%lld S=%lld C=%lld J=%lld",
                  types[int(type)], acts[int(activation)], (long long)B,
                  (long long)T, (long long)S, (long long)C, (long long)J);
    std::string name = text;
    if (blank > 0) name += " blank=" + std::to_string(blank);
    if (delay_penalty > 0) name += " delay";
    if (clamp > 0) name += " clamp";
    if (fastemit > 0) name += " fastemit";
    if (general_boundary) name += " begin>0";
    if (capacity > 0) name += " rows/chunk=" + std::to_string(capacity);
    if (max_splits > 0) name += " splits<=" + std::to_string(max_splits);
    if (nan_padding) name += " NaN-padding";
    if (nan_batch >= 0) name += " NaN@" + std::to_string(nan_batch);
    return name;
  }
};

// Random inputs of a case, rounded to L (the same values on both sides).
template <typename T, typename L>
JointData<T> MakeJointData(const JointCase& c, Rng& rng) {
  JointData<T> d{RandomRnntInputs<T>(c, c.S + 1, rng), c.J, c.activation};
  RnntInputs<T>& in = d.rnnt;
  for (int64_t b = 0; b < c.B; ++b) in.scale.push_back(rng.Uniform(-2, 2));
  const auto random = [&](int64_t n, double scale) {
    std::vector<T> x(n);
    for (T& v : x) v = T(Widen(Narrow<L>(T(scale * rng.Uniform(-1, 1)))));
    return x;
  };
  const int64_t W = c.S + 1;
  d.encoder = random(c.B * c.T * c.J, 1.0);
  d.predictor = random(c.B * W * c.J, 1.0);
  d.weight = random(c.J * c.C, 3.0 / std::sqrt(double(c.J)));
  d.bias = random(c.C, 0.5);
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t* bnd = &in.boundary[4 * b];
    for (int64_t t = 0; c.nan_padding && t < c.T; ++t) {
      if (t < bnd[1] || t >= bnd[3]) {
        std::fill_n(d.encoder.begin() + (b * c.T + t) * c.J, c.J, T(NAN));
      }
    }
    for (int64_t s = 0; c.nan_padding && s < W; ++s) {
      if (s < bnd[0] || s > bnd[2]) {
        std::fill_n(d.predictor.begin() + (b * W + s) * c.J, c.J, T(NAN));
      }
    }
    if (b == c.nan_batch) d.encoder[(b * c.T + bnd[1]) * c.J + c.J / 2] = NAN;
  }
  return d;
}

// The worst |gpu - cpu| / max(1, |cpu|) of a tensor and where it is.
struct Worst {
  double err = 0;
  size_t index = 0;
};

template <typename T>
Worst WorstError(const std::vector<T>& got, const std::vector<T>& want) {
  Worst w;
  if (got.size() != want.size()) return {INFINITY, 0};
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    const double err = std::isfinite(a) && std::isfinite(b)
                           ? std::fabs(a - b) / std::max(1.0, std::fabs(b))
                           : INFINITY;
    if (err > w.err) w = {err, i};
  }
  return w;
}

// One PASS / FAIL line for the case; under a FAIL, one line per tensor over
// its tolerance (with the worst element) and the illegal-flag problems.
template <typename T, typename L>
bool ReportJoint(const std::string& name, const JointOutputs<T>& gpu,
                 const JointOutputs<T>& cpu, int64_t B, int64_t nan_batch,
                 gpu::JointProducts products) {
  struct Field {
    const char* name;
    const std::vector<T>& got;
    const std::vector<T>& want;
    double tolerance;
  };
  // On tensor cores every tensor is held to the operands' precision: the
  // reference rounds them alike, but a device's tanh may round an operand
  // the other way.
  const bool tc = products == gpu::JointProducts::kTensorCores;
  const double tol_l =
      tc && std::is_same_v<L, float> ? kTf32Tolerance : TypeInfo<L>::kTolerance;
  const double tol = tc ? tol_l : TypeInfo<T>::kTolerance;
  const Field fields[] = {
      {"px", gpu.loss.px, cpu.loss.px, tol},
      {"py", gpu.loss.py, cpu.loss.py, tol},
      {"norms", gpu.loss.norms, cpu.loss.norms, tol},
      {"scores", gpu.loss.scores, cpu.loss.scores, tol},
      {"px_grad", gpu.loss.px_grad, cpu.loss.px_grad, tol},
      {"py_grad", gpu.loss.py_grad, cpu.loss.py_grad, tol},
      {"d_encoder", gpu.d_encoder, cpu.d_encoder, tol_l},
      {"d_predictor", gpu.d_predictor, cpu.d_predictor, tol_l},
      {"d_weight", gpu.d_weight, cpu.d_weight, tol_l},
      {"d_bias", gpu.d_bias, cpu.d_bias, tol_l}};
  std::string details;
  double worst_ratio = 0;
  const char* worst_field = "-";
  double worst = 0;
  for (const Field& f : fields) {
    const Worst w = WorstError(f.got, f.want);
    const double ratio = w.err / f.tolerance;
    if (ratio > worst_ratio || *worst_field == '-') {
      worst_ratio = ratio, worst_field = f.name, worst = w.err;
    }
    if (ratio > 1) {
      char line[200];
      std::snprintf(line, sizeof(line),
                    "\n    %s: max rel err %.2e > %.0e at [%zu] (gpu %.8g, cpu "
                    "%.8g, %zu elements)",
                    f.name, w.err, f.tolerance, w.index,
                    w.index < f.got.size() ? double(f.got[w.index]) : NAN,
                    w.index < f.want.size() ? double(f.want[w.index]) : NAN,
                    f.want.size());
      details += line;
    }
  }
  bool cpu_flags = true, gpu_flags = true;
  int finite = 0;
  for (int64_t b = 0; b < B; ++b) {
    cpu_flags &= bool(cpu.loss.illegal[b]) == (b == nan_batch);
    gpu_flags &= bool(gpu.loss.illegal[b]) == (b == nan_batch);
    finite += std::isfinite(cpu.loss.scores[b]) && b != nan_batch;
  }
  if (!cpu_flags) details += "\n    [CPU illegal flags wrong]";
  if (!gpu_flags) details += "\n    [GPU illegal flags wrong]";
  const bool ok = details.empty();
  const std::string type =
      std::string(TypeInfo<L>::kName) +
      (tc ? (std::is_same_v<L, float> ? "-tf32" : "-tc") : "");
  std::printf("%s %-11s %-72s max rel err %.2e (%s) finite scores %d/%lld%s\n",
              ok ? "PASS" : "FAIL", type.c_str(), name.c_str(), worst,
              worst_field, finite, (long long)B, details.c_str());
  return ok;
}

// The products of 16-bit inputs run on tensor cores, as the op runs them.
template <typename L>
constexpr gpu::JointProducts kDefaultProducts =
    std::is_same_v<L, Half> || std::is_same_v<L, BFloat16>
        ? gpu::JointProducts::kTensorCores
        : gpu::JointProducts::kExact;

template <typename T, typename L = T>
bool RunJointCase(const JointCase& c, uint64_t seed,
                  gpu::JointProducts products = kDefaultProducts<L>) {
  Rng rng(seed);
  const JointData<T> d = MakeJointData<T, L>(c, rng);
  JointGpu<T, L> gpu(d, c.capacity, c.max_splits, products);
  gpu.Forward();
  gpu.Backward();
  return ReportJoint<T, L>(c.Name(), gpu.Download(),
                           RunJointCpu<T, L>(d, products), c.B, c.nan_batch,
                           products);
}

// The check's counts and options: with fail_fast, the first failure ends
// the run; with quick, only the cases of each list named in quick_cases run
// (for the slow sanitizer builds: every kernel in every type, and each path
// of them: rows longer than a block, pruned logits, NaN, chunks, split dW).
struct Tally {
  int passed = 0, total = 0;
  bool fail_fast = false, quick = false;
  bool Wants(const std::vector<int>& quick_cases, int index) const {
    return !quick || std::find(quick_cases.begin(), quick_cases.end(), index) !=
                         quick_cases.end();
  }
  void Add(bool ok) {
    ++total;
    passed += ok;
    if (!ok && fail_fast) {
      std::printf("SUMMARY: stopped at the first failure (--fail-fast)\n");
      std::exit(1);
    }
  }
};

void CheckJoint(uint64_t seed, Tally* tally) {
  using RT = RnntType;
  using JA = JointActivation;
  // clang-format off
  const JointCase cases[] = {
      // type, B, T, S, C, J, blank, delay_penalty, clamp, fastemit
      // [, activation, general_boundary, capacity, max_splits, nan_padding,
      //  nan_batch]
      {RT::kRegular, 3, 9, 4, 20, 12, 0, 0, 0, 0},
      {RT::kRegular, 3, 10, 5, 33, 17, 4, 0.2, 0, 0.3, JA::kRelu},
      {RT::kRegular, 3, 8, 5, 21, 9, 2, 0, 0.05, 0, JA::kIdentity},
      {RT::kRegular, 3, 11, 6, 19, 10, 0, 0, 0, 0, JA::kTanh, true, 5},
      {RT::kRegular, 4, 12, 6, 24, 16, 1, 0, 0, 0, JA::kTanh, false, 0, 0,
       true},
      {RT::kRegular, 3, 8, 4, 12, 8, 0, 0, 0, 0, JA::kTanh, false, 0, 0, false,
       1},
      // 1280 rows in one chunk: dW split in partial sums; tile edges in
      // every dimension.
      {RT::kRegular, 2, 40, 15, 130, 70, 3, 0, 0, 0.1},
      {RT::kRegular, 2, 40, 15, 130, 70, 3, 0.1, 0.2, 0, JA::kRelu, true, 300,
       3, true},
      {RT::kModified, 3, 12, 5, 20, 11, 2, 0, 0, 0.5},
      {RT::kModified, 3, 14, 6, 25, 13, 0, 0.1, 0.5, 0, JA::kTanh, true, 7},
      {RT::kConstrained, 3, 12, 5, 20, 14, 0, 0, 0, 0},
      {RT::kConstrained, 3, 14, 6, 30, 9, 4, 0.2, 0.1, 0.3, JA::kRelu, true,
       11, 0, true},
      // S = 0: every transcript empty, blank steps alone.
      {RT::kRegular, 3, 7, 0, 11, 6, 0, 0, 0, 0},
      {RT::kConstrained, 3, 6, 0, 9, 5, 1, 0, 0.1, 0, JA::kRelu, true},
  };
  // clang-format on
  int index = 0;
  for (const JointCase& c : cases) {
    ++seed;
    if (!tally->Wants({0, 4, 5, 6, 7, 11}, index++)) continue;
    tally->Add(RunJointCase<float>(c, seed));
    tally->Add(RunJointCase<double>(c, seed));
    tally->Add(RunJointCase<float, Half>(c, seed));
    tally->Add(RunJointCase<float, BFloat16>(c, seed));
    tally->Add(RunJointCase<float>(c, seed, gpu::JointProducts::kTensorCores));
  }
}

void CheckTdt(uint64_t seed, Tally* tally) {
  const std::vector<int64_t> d5 = {0, 1, 2, 3, 4}, d2 = {0, 1},
                             sparse = {0, 1, 3, 7};
  // clang-format off
  const TdtCase cases[] = {
      // B, T, S, C, durations, blank, sigma, clamp, fastemit
      // [, R, log_probs, neg_inf_logits, nan_batch]
      {3, 9, 4, 20, d5, 0, 0, 0, 0},
      {4, 12, 6, 33, d5, 5, 0.05, 0, 0.3},
      {3, 10, 5, 17, d2, 0, 0, 0.02, 0},
      {3, 16, 5, 21, sparse, 2, 0, 0, 0, 0, false, true},
      {3, 8, 4, 12, d5, 0, 0, 0, 0, 0, false, false, 1},
      // More positions than the lattice kernel's threads.
      {2, 8, 130, 5, {0, 1, 2}, 1, 0.1, 0, 0.2},
      // S = 0: every transcript empty, blank steps alone.
      {3, 7, 0, 9, d5, 0, 0, 0.1, 0},
      // Pruned rows (the other nodes take no step).
      {3, 12, 7, 19, d5, 0, 0, 0, 0, 3},
      {3, 14, 8, 23, sparse, 4, 0.05, 0.05, 0.2, 2, false, true},
      {3, 9, 5, 11, d5, 0, 0, 0, 0, 2, false, false, 2},
  };
  // Token log-probs px and py instead of logits (float and double only).
  const TdtCase log_prob_cases[] = {
      {3, 10, 5, 2, d5, 0, 0, 0, 0, 0, true},
      {3, 12, 6, 2, sparse, 0, 0.1, 0.05, 0.3, 0, true, true},
      {3, 8, 4, 2, d2, 0, 0, 0, 0, 0, true, false, 1},
  };
  // clang-format on
  int index = 0;
  for (const TdtCase& c : cases) {
    ++seed;
    if (!tally->Wants({0, 3, 4, 5, 8}, index++)) continue;
    tally->Add(RunTdtCase<float>(c, seed));
    tally->Add(RunTdtCase<double>(c, seed));
    tally->Add(RunTdtCase<float, Half>(c, seed));
    tally->Add(RunTdtCase<float, BFloat16>(c, seed));
  }
  index = 0;
  for (const TdtCase& c : log_prob_cases) {
    ++seed;
    if (!tally->Wants({1, 2}, index++)) continue;
    tally->Add(RunTdtCase<float>(c, seed));
    tally->Add(RunTdtCase<double>(c, seed));
  }
}

int Check(bool fail_fast, bool quick) {
  const MiCase mi_cases[] = {
      {"regular", 4, 7, 15, false, 0.05, -1},
      {"modified", 4, 6, 14, true, 0.05, -1},
      {"regular NaN@1", 3, 5, 9, false, 0.0, 1},
      {"modified NaN@2", 3, 5, 9, true, 0.05, 2},
      {"modified S+1 > 512 threads", 2, 520, 530, true, 0.0, -1},
      {"regular S=0", 3, 0, 6, false, 0.05, -1},
      {"modified S=0", 2, 0, 5, true, 0.0, -1},
  };
  using RT = RnntType;
  // clang-format off
  const RnntCase rnnt_cases[] = {
      // type, B, T, S, C, R (0: full), blank, delay_penalty, clamp,
      // fastemit[, general_boundary, in_place, neg_inf_logits, nan_batch]
      {RT::kRegular, 3, 12, 5, 20, 0, 0, 0, 0, 0},
      {RT::kRegular, 3, 10, 6, 24, 0, 7, 0.3, 0, 0.2},
      {RT::kRegular, 3, 9, 4, 33, 0, 0, 0, 0.05, 0, false, true, true},
      {RT::kRegular, 4, 14, 6, 100, 3, 0, 0, 0, 0},
      {RT::kRegular, 3, 12, 7, 40, 2, 5, 0.2, 0.5, 0.1},
      {RT::kRegular, 3, 12, 6, 16, 0, 3, 0.1, 0, 0, true},
      {RT::kRegular, 3, 8, 4, 12, 0, 0, 0, 0, 0, false, false, false, 1},
      {RT::kModified, 3, 12, 5, 20, 0, 2, 0, 0, 0.5},
      {RT::kModified, 3, 14, 6, 25, 2, 0, 0.1, 0.5, 0},
      {RT::kConstrained, 3, 12, 5, 20, 0, 0, 0, 0, 0},
      {RT::kConstrained, 3, 14, 6, 30, 3, 4, 0.2, 0.1, 0.3},
      {RT::kConstrained, 3, 11, 5, 18, 0, 1, 0, 0, 0.2, true, true},
      // S = 0: every transcript empty, blank steps alone.
      {RT::kRegular, 3, 7, 0, 9, 0, 0, 0.2, 0, 0.3},
      {RT::kRegular, 3, 7, 0, 9, 1, 2, 0, 0.1, 0, false, true},
      {RT::kModified, 3, 6, 0, 8, 0, 0, 0, 0, 0, true},
  };
  // clang-format on
  Tally tally;
  tally.fail_fast = fail_fast;
  tally.quick = quick;
  uint64_t seed = kSeed;
  int index = 0;
  for (const MiCase& c : mi_cases) {
    ++seed;
    if (!tally.Wants({0, 2, 4}, index++)) continue;
    tally.Add(RunMiCase<float>(c, seed));
    tally.Add(RunMiCase<double>(c, seed));
  }
  index = 0;
  for (const RnntCase& c : rnnt_cases) {
    ++seed;
    if (!tally.Wants({0, 2, 3, 6, 11}, index++)) continue;
    tally.Add(RunRnntCase<float>(c, seed));
    tally.Add(RunRnntCase<double>(c, seed));
    tally.Add(RunRnntCase<float, Half>(c, seed));
    tally.Add(RunRnntCase<float, BFloat16>(c, seed));
  }
  CheckJoint(seed, &tally);
  CheckTdt(seed + 100, &tally);
  std::printf("SUMMARY: %d passed, %d failed\n", tally.passed,
              tally.total - tally.passed);
  return tally.passed == tally.total ? 0 : 1;
}

// ---------------------------------------------------------------------------
// bench: the fused loss, full logits, regular, maths in float32; logits
// float32, half or bfloat16.

struct Shape {
  int64_t B, T, U, V;
};

template <typename L>
__global__ void FillUniform(L* x, int64_t n, uint64_t seed, float lo,
                            float hi) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    uint64_t z = (uint64_t(i) + seed) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 29;
    x[i] = Narrow<L>(lo + (hi - lo) * float(z >> 40) * 0x1.0p-24f);
  }
}

// Median time of f() in ms, after two warm-up runs.
template <typename F>
double MedianMs(F&& f, int repeats) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  f(), f();
  std::vector<float> ms(repeats);
  for (float& m : ms) {
    CHECK(cudaEventRecord(start, nullptr));
    f();
    CHECK(cudaEventRecord(stop, nullptr));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&m, start, stop));
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return 0.5 * (ms[(repeats - 1) / 2] + ms[repeats / 2]);
}

// Peak DRAM bandwidth in bytes/s from the device attributes (two transfers
// per memory clock), or 0 when unknown.
double PeakBandwidth() {
  int dev = 0, khz = 0, bits = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev)) {
    cudaGetLastError();
    return 0;
  }
  return 2.0 * khz * 1e3 * bits / 8;
}

template <typename L>
void BenchShape(const Shape& sh, int repeats, double peak_bw) {
  const int64_t B = sh.B, Tn = sh.T, S = sh.U, C = sh.V, R = S + 1, T1 = Tn + 1;
  const int64_t n_logits = B * Tn * R * C;
  constexpr double kLogitBytes = sizeof(L);
  size_t free_before, free_after, total;
  CHECK(cudaMemGetInfo(&free_before, &total));
  const size_t held_before = tally.now;
  tally.peak = tally.now;
  RnntInputs<float> in{B, Tn, S, C, R, T1};  // blank 0, regular
  in.scale.assign(B, -1.0f);
  Rng rng(kSeed);
  for (int64_t i = 0; i < B * S; ++i) in.symbols.push_back(rng.Int(1, C - 1));
  for (int64_t b = 0; b < B; ++b) {
    in.boundary.insert(in.boundary.end(), {0, 0, S, Tn});
  }
  Rnnt<Gpu, float, L> loss(in, /*in_place=*/false);
  TT_LAUNCH(4096, 256, 0, nullptr, FillUniform<L>)(loss.logits.get(), n_logits,
                                                   kSeed, -3, 3);
  CHECK(cudaGetLastError());
  CHECK(cudaMemGetInfo(&free_after, &total));
  const double fwd = MedianMs([&] { loss.Forward(); }, repeats);
  const double bwd = MedianMs([&] { loss.Backward(); }, repeats);
  const double mi_ms = MedianMs([&] { loss.mi.Run(); }, repeats);
  int finite = 0;
  for (float s : loss.mi.scores.Download()) finite += std::isfinite(s);
  for (char bad : loss.mi.illegal.Download()) finite -= bad;
  // Bytes of px + py (= of px_grad + py_grad); the gradient pass reads the
  // logits, writes the gradient and reads norms, px_grad and py_grad; the
  // recursion must read px and py, write px_grad and py_grad, and write then
  // read alpha and e at every cell.
  const double small = (B * S * T1 + B * (S + 1) * Tn) * 4.0;
  const double grad_bytes =
      2 * n_logits * kLogitBytes + B * Tn * R * 4.0 + small;
  const double mi_bytes = 2 * small + 4.0 * B * (S + 1) * (Tn + 1) * 4;
  char bound[32] = "unknown";
  if (peak_bw > 0) {
    std::snprintf(bound, sizeof(bound), "%.4f", mi_bytes / peak_bw * 1e3);
  }
  std::printf(
      "B=%lld T=%lld U=%lld V=%lld fwd_ms=%.3f bwd_ms=%.3f total_ms=%.3f "
      "mi_ms=%.3f mi_bound_ms=%s peak_mb=%.1f memgetinfo_mb=%.1f "
      "logits_mb=%.1f grad_gbps=%.1f finite=%d/%lld\n",
      (long long)B, (long long)Tn, (long long)S, (long long)C, fwd, bwd,
      fwd + bwd, mi_ms, bound, (tally.peak - held_before) / 1e6,
      (double(free_before) - double(free_after)) / 1e6,
      n_logits * kLogitBytes / 1e6, grad_bytes / (bwd * 1e-3) / 1e9, finite,
      (long long)B);
  std::fflush(stdout);
}

template <typename L>
int Bench(const std::vector<Shape>& shapes, int repeats) {
  const double peak_bw = PeakBandwidth();
  const std::string dtype =
      std::is_same_v<L, float>
          ? "float32"
          : std::string(TypeInfo<L>::kName) + " logits, float32 maths";
  std::printf(
      "%s, full logits, regular, times: medians of %d runs after 2 "
      "warm-ups\n"
      "  fwd: RnntLogProbs + MutualInformation; bwd: RnntGradient; mi: "
      "MutualInformation alone\n"
      "  mi_bound: bytes the recursion must touch / peak DRAM bandwidth",
      dtype.c_str(), repeats);
  if (peak_bw > 0) {
    std::printf(" (%.0f GB/s: memory clock x bus width)\n", peak_bw / 1e9);
  } else {
    std::printf(" (unknown)\n");
  }
  std::printf(
      "  peak_mb: the harness's device buffers (logits, grad, px, py, norms, "
      "px_grad, py_grad, alpha, e, ...); memgetinfo_mb: free memory before "
      "minus after allocating them\n"
      "  grad_gbps: bytes the gradient pass reads and writes / bwd time\n");
  for (const Shape& sh : shapes) BenchShape<L>(sh, repeats, peak_bw);
  return 0;
}

// ---------------------------------------------------------------------------
// bench-joint: the joint loss (tanh joint, regular, full lengths), float32
// maths; inputs and gradients float32, half or bfloat16.

struct JointShape {
  int64_t B, T, U, V, J;
};

template <typename L>
void BenchJointShape(const JointShape& sh, int repeats,
                     gpu::JointProducts products) {
  const int64_t B = sh.B, Tn = sh.T, S = sh.U, C = sh.V, J = sh.J, W = S + 1;
  size_t free_before, free_after, total;
  CHECK(cudaMemGetInfo(&free_before, &total));
  const size_t held_before = tally.now;
  tally.peak = tally.now;
  JointData<float> d{RnntInputs<float>{B, Tn, S, C, W, Tn + 1}, J,
                     JointActivation::kTanh};
  d.rnnt.scale.assign(B, -1.0f);  // the gradient of the summed losses
  Rng rng(kSeed);
  for (int64_t i = 0; i < B * S; ++i)
    d.rnnt.symbols.push_back(rng.Int(1, C - 1));
  for (int64_t b = 0; b < B; ++b) {
    d.rnnt.boundary.insert(d.rnnt.boundary.end(), {0, 0, S, Tn});
  }
  JointGpu<float, L> loss(d, 0, 0, products);  // inputs filled below
  const int64_t sizes[4] = {B * Tn * J, B * W * J, J * C, C};
  const float limits[4] = {1.0f, 1.0f, float(std::sqrt(3.0 / J)), 0.1f};
  for (int i = 0; i < 4; ++i) {
    TT_LAUNCH(4096, 256, 0, nullptr, FillUniform<L>)(
        loss.inputs(i)->get(), sizes[i], kSeed + i, -limits[i], limits[i]);
  }
  CHECK(cudaGetLastError());
  const double fwd = MedianMs([&] { loss.Forward(); }, repeats);
  const double bwd = MedianMs([&] { loss.Backward(); }, repeats);
  CHECK(cudaMemGetInfo(&free_after, &total));
  int finite = 0;
  for (float s : loss.mi().scores.Download()) finite += std::isfinite(s);
  for (char bad : loss.mi().illegal.Download()) finite -= bad;
  // The products: l = h W once forward; again, h^T G and G W^T backward.
  const double gemm_flops = 2.0 * loss.forward_rows() * J * C;
  const double inputs_mb =
      (sizes[0] + sizes[1] + sizes[2] + sizes[3]) * double(sizeof(L)) / 1e6;
  std::printf(
      "B=%lld T=%lld U=%lld V=%lld J=%lld fwd_ms=%.3f bwd_ms=%.3f "
      "total_ms=%.3f peak_mb=%.1f memgetinfo_mb=%.1f inputs_mb=%.1f "
      "tflops=%.2f finite=%d/%lld\n",
      (long long)B, (long long)Tn, (long long)S, (long long)C, (long long)J,
      fwd, bwd, fwd + bwd, (tally.peak - held_before) / 1e6,
      (double(free_before) - double(free_after)) / 1e6, inputs_mb,
      4 * gemm_flops / ((fwd + bwd) * 1e-3) / 1e12, finite, (long long)B);
  std::fflush(stdout);
}

template <typename L>
int BenchJoint(const std::vector<JointShape>& shapes, int repeats,
               gpu::JointProducts products) {
  const bool tc = products == gpu::JointProducts::kTensorCores;
  std::printf(
      "joint loss (tanh joint, regular, full lengths), %s inputs and "
      "gradients, float32 maths, products %s; times: medians of %d runs "
      "after 2 warm-ups\n"
      "  fwd: RnntJointLogProbs + MutualInformation (plan included); bwd: "
      "RnntJointUsedRanges + plan + RnntJointGradient\n"
      "  peak_mb: the harness's device buffers (inputs, outputs, O(B T U) "
      "buffers, chunk scratch); memgetinfo_mb: free memory before minus "
      "after the runs\n"
      "  tflops: the four products (l = h W twice, h^T G, G W^T) / total "
      "time\n",
      TypeInfo<L>::kName,
      !tc                        ? "exact (CUDA cores)"
      : std::is_same_v<L, float> ? "on tensor cores (TF32)"
                                 : "on tensor cores (16-bit operands)",
      repeats);
  for (const JointShape& sh : shapes) {
    BenchJointShape<L>(sh, repeats, products);
  }
  return 0;
}

bool ParseJointShapes(const std::string& text,
                      std::vector<JointShape>* shapes) {
  shapes->clear();
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find(';', begin), text.size());
    long long b, t, u, v, j;
    char extra;
    if (std::sscanf(text.substr(begin, end - begin).c_str(),
                    "%lld,%lld,%lld,%lld,%lld%c", &b, &t, &u, &v, &j,
                    &extra) != 5 ||
        b < 1 || t < 1 || u < 1 || v < 2 || j < 1) {
      return false;
    }
    shapes->push_back({b, t, u, v, j});
    begin = end + 1;
  }
  return true;
}

bool ParseShapes(const std::string& text, std::vector<Shape>* shapes) {
  shapes->clear();
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find(';', begin), text.size());
    long long b, t, u, v;
    char extra;
    if (std::sscanf(text.substr(begin, end - begin).c_str(),
                    "%lld,%lld,%lld,%lld%c", &b, &t, &u, &v, &extra) != 4 ||
        b < 1 || t < 1 || u < 1 || v < 2) {
      return false;
    }
    shapes->push_back({b, t, u, v});
    begin = end + 1;
  }
  return true;
}

// ---------------------------------------------------------------------------
// compare: loss (-score) and d loss / d logits of DIR's inputs, float32,
// full logits, regular, boundary [0, 0, target_length, logit_length].

template <typename T>
std::vector<T> ReadFile(const std::string& path, int64_t n) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file || int64_t(file.tellg()) != n * int64_t(sizeof(T))) {
    std::fprintf(stderr, "%s: missing or not %lld bytes\n", path.c_str(),
                 (long long)(n * sizeof(T)));
    std::exit(1);
  }
  std::vector<T> x(n);
  file.seekg(0);
  file.read(reinterpret_cast<char*>(x.data()), n * sizeof(T));
  return x;
}

void WriteFile(const std::string& path, const std::vector<float>& x) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  if (!file) {
    std::fprintf(stderr, "%s: write failed\n", path.c_str());
    std::exit(1);
  }
}

// DIR's targets.i32 [B, U], logit_lengths.i32 [B] and target_lengths.i32
// [B] into in.symbols (padding as 0) and in.boundary rows (0, 0,
// target_length, logit_length), and in.scale = -1 (d loss = -d score);
// false, with a message, for a length or target out of range.
bool ReadLabels(const std::string& dir, RnntInputs<float>* in) {
  const int64_t B = in->B, Tn = in->T_len, U = in->S, V = in->C;
  const auto targets = ReadFile<int32_t>(dir + "/targets.i32", B * U);
  const auto logit_len = ReadFile<int32_t>(dir + "/logit_lengths.i32", B);
  const auto target_len = ReadFile<int32_t>(dir + "/target_lengths.i32", B);
  for (int64_t b = 0; b < B; ++b) {
    if (target_len[b] < 0 || target_len[b] > U || logit_len[b] < 0 ||
        logit_len[b] > Tn) {
      std::fprintf(stderr, "sequence %lld: length out of range\n",
                   (long long)b);
      return false;
    }
    in->boundary.insert(in->boundary.end(),
                        {0, 0, target_len[b], logit_len[b]});
    for (int64_t u = 0; u < U; ++u) {
      const int32_t y = targets[b * U + u];
      if (u < target_len[b] && (y < 0 || y >= V)) {
        std::fprintf(stderr, "targets[%lld, %lld] = %d is not in [0, V)\n",
                     (long long)b, (long long)u, y);
        return false;
      }
      in->symbols.push_back(y >= 0 && y < V ? y : 0);  // padding: unused
    }
  }
  in->scale.assign(B, -1.0f);
  return true;
}

int Compare(const std::string& dir) {
  long long B = 0, Tn = 0, U = 0, V = 0, blank = -1;
  std::ifstream shape_file(dir + "/shape.txt");
  if (!(shape_file >> B >> Tn >> U >> V >> blank) || B < 1 || Tn < 1 || U < 1 ||
      blank < 0 || blank >= V) {
    std::fprintf(stderr, "%s/shape.txt: need 'B T U V blank'\n", dir.c_str());
    return 1;
  }
  RnntInputs<float> in{B, Tn, U, V, U + 1, Tn + 1};  // regular
  in.blank = int(blank);
  in.logits = ReadFile<float>(dir + "/logits.f32", B * Tn * (U + 1) * V);
  if (!ReadLabels(dir, &in)) return 1;
  const Outputs<float> out = RunRnnt<Gpu>(in, /*in_place=*/true);
  std::vector<float> loss(B);
  for (int64_t b = 0; b < B; ++b)
    loss[b] = out.illegal[b] ? NAN : -out.scores[b];
  WriteFile(dir + "/loss.f32", loss);
  WriteFile(dir + "/grad.f32", out.grad);
  std::printf("compare: wrote %s/loss.f32 and %s/grad.f32\n", dir.c_str(),
              dir.c_str());
  return 0;
}

// ---------------------------------------------------------------------------
// compare-joint: the joint loss (tanh, regular, float32) of DIR's inputs and
// the gradients of the summed losses, for benchmarks/bench_gpu.py.

int CompareJoint(const std::string& dir) {
  long long B = 0, Tn = 0, U = 0, V = 0, J = 0, blank = -1;
  std::ifstream shape_file(dir + "/shape.txt");
  if (!(shape_file >> B >> Tn >> U >> V >> J >> blank) || B < 1 || Tn < 1 ||
      U < 1 || J < 1 || blank < 0 || blank >= V) {
    std::fprintf(stderr, "%s/shape.txt: need 'B T U V J blank'\n", dir.c_str());
    return 1;
  }
  JointData<float> d{RnntInputs<float>{B, Tn, U, V, U + 1, Tn + 1}, J,
                     JointActivation::kTanh};
  RnntInputs<float>& in = d.rnnt;
  in.blank = int(blank);
  d.encoder = ReadFile<float>(dir + "/encoder.f32", B * Tn * J);
  d.predictor = ReadFile<float>(dir + "/predictor.f32", B * (U + 1) * J);
  d.weight = ReadFile<float>(dir + "/weight.f32", J * V);
  d.bias = ReadFile<float>(dir + "/bias.f32", V);
  if (!ReadLabels(dir, &in)) return 1;
  JointGpu<float, float> loss(d, 0, 0);
  loss.Forward();
  loss.Backward();
  const JointOutputs<float> out = loss.Download();
  std::vector<float> losses(B);
  for (int64_t b = 0; b < B; ++b) {
    losses[b] = out.loss.illegal[b] ? NAN : -out.loss.scores[b];
  }
  WriteFile(dir + "/loss.f32", losses);
  WriteFile(dir + "/d_encoder.f32", out.d_encoder);
  WriteFile(dir + "/d_predictor.f32", out.d_predictor);
  WriteFile(dir + "/d_weight.f32", out.d_weight);
  WriteFile(dir + "/d_bias.f32", out.d_bias);
  std::printf("compare-joint: wrote loss.f32 and d_*.f32 in %s\n", dir.c_str());
  return 0;
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [check [--fail-fast] [--quick]]\n"
               "       %s bench [--repeats N] [--shapes B,T,U,V;...] "
               "[--dtype float|half|bfloat16]\n"
               "       %s bench-joint [--repeats N] [--shapes B,T,U,V,J;...] "
               "[--dtype float|half|bfloat16] [--products "
               "exact|tensor_cores]\n"
               "       %s compare DIR\n"
               "       %s compare-joint DIR\n",
               argv0, argv0, argv0, argv0, argv0);
  return 1;
}

}  // namespace
}  // namespace tf_transducer

int main(int argc, char** argv) {
  using namespace tf_transducer;
  const std::string mode = argc > 1 ? argv[1] : "check";
  const bool joint = mode == "bench-joint";
  std::vector<Shape> shapes = {
      {8, 150, 40, 500}, {32, 500, 100, 1024}, {16, 1000, 200, 4096}};
  std::vector<JointShape> joint_shapes = {{8, 150, 40, 500, 256},
                                          {32, 500, 100, 1024, 640}};
  int repeats = 10;
  std::string dtype = "float", products;
  bool fail_fast = false, quick = false;
  if (mode == "bench" || joint) {
    for (int i = 2; i < argc; i += 2) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) return Usage(argv[0]);
      if (flag == "--repeats") {
        repeats = std::atoi(argv[i + 1]);
        if (repeats < 1) return Usage(argv[0]);
      } else if (joint && flag == "--products") {
        products = argv[i + 1];
        if (products != "exact" && products != "tensor_cores") {
          return Usage(argv[0]);
        }
      } else if (flag == "--dtype") {
        dtype = argv[i + 1];
        if (dtype != "float" && dtype != "half" && dtype != "bfloat16") {
          return Usage(argv[0]);
        }
      } else if (flag != "--shapes" ||
                 !(joint ? ParseJointShapes(argv[i + 1], &joint_shapes)
                         : ParseShapes(argv[i + 1], &shapes))) {
        return Usage(argv[0]);
      }
    }
  } else if (mode == "check") {
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--fail-fast") {
        fail_fast = true;
      } else if (flag == "--quick") {
        quick = true;
      } else {
        return Usage(argv[0]);
      }
    }
  } else if (!((mode == "compare" || mode == "compare-joint") && argc == 3)) {
    return Usage(argv[0]);
  }

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n",
                cudaGetErrorString(status ? status : cudaErrorNoDevice));
    return 2;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d, %.1f GiB)\n", prop.name, prop.major,
              prop.minor, prop.totalGlobalMem / double(1 << 30));
  std::fflush(stdout);
  if (mode == "check") return Check(fail_fast, quick);
  if (mode == "bench") {
    if (dtype == "half") return Bench<Half>(shapes, repeats);
    if (dtype == "bfloat16") return Bench<BFloat16>(shapes, repeats);
    return Bench<float>(shapes, repeats);
  }
  if (joint) {
    // The op's choice unless --products says: tensor cores for 16-bit
    // inputs, exact float32 for float (TF32 with tensor_cores).
    const auto choice = [&](gpu::JointProducts fallback) {
      return products.empty()             ? fallback
             : products == "tensor_cores" ? gpu::JointProducts::kTensorCores
                                          : gpu::JointProducts::kExact;
    };
    if (dtype == "half") {
      return BenchJoint<Half>(joint_shapes, repeats,
                              choice(kDefaultProducts<Half>));
    }
    if (dtype == "bfloat16") {
      return BenchJoint<BFloat16>(joint_shapes, repeats,
                                  choice(kDefaultProducts<BFloat16>));
    }
    return BenchJoint<float>(joint_shapes, repeats,
                             choice(kDefaultProducts<float>));
  }
  if (mode == "compare-joint") return CompareJoint(argv[2]);
  return Compare(argv[2]);
}
