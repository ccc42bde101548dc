// SPDX-License-Identifier: Apache-2.0
// The CPU emulator's own test (g++ -I cc/gpu_emu; `make gpu-emu-check`
// runs it): what it must compute as a GPU does, and each misuse it must
// report instead of hanging or computing garbage, each run in a child
// process whose exit status and message are checked.
//
//   selftest            every case; exit status 1 when one fails
//   selftest CASE       one misuse case (what the parent runs)

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cc/kernels/gpu/launch.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  failures += !ok;
}

// ------------------------------------------------------------- semantics

// out[t] = the barrier reductions of (t % 3 == 0) over the threads that are
// still there: threads >= live return first, as on sm_70+.
__global__ void BarrierKernel(int live, int* out) {
  const int t = threadIdx.x;
  if (t >= live) return;
  const int pred = t % 3 == 0;
  const int count = __syncthreads_count(pred);
  const int any = __syncthreads_or(pred);
  const int all = __syncthreads_and(pred);
  __syncthreads();
  out[4 * t] = count;
  out[4 * t + 1] = any;
  out[4 * t + 2] = all;
  out[4 * t + 3] = 1;
}

// Lane l of each warp: xor, down, up and indexed shuffles within halves of
// 16 lanes, and the ballot of odd lanes.
__global__ void ShuffleKernel(int* out) {
  const int lane = threadIdx.x % 32;
  const int v = 100 * int(threadIdx.x);
  int* o = out + 5 * threadIdx.x;
  o[0] = __shfl_xor_sync(0xffffffffu, v, 1);
  o[1] = __shfl_down_sync(0xffffffffu, v, 3, 16);
  o[2] = __shfl_up_sync(0xffffffffu, v, 2, 16);
  o[3] = __shfl_sync(0xffffffffu, v, 5, 16);
  o[4] = int(__ballot_sync(0xffffffffu, lane % 2));
}

// A tree sum over shared memory: wrong without its barriers.
__global__ void SharedSumKernel(const float* in, float* out) {
  __shared__ float s[256];
  const int t = threadIdx.x;
  s[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int half = 128; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

namespace wmma = nvcuda::wmma;

// D = A B + C for one 16 x 16 x 16 tile of halves (A row-major, B
// column-major, C and D row-major), and for one 16 x 16 x 8 TF32 tile.
__global__ void HalfMma(const __half* a, const __half* b, const float* c,
                        float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}

__global__ void Tf32Mma(const float* a, const float* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32,
                 wmma::row_major>
      fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32,
                 wmma::row_major>
      fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, 16, wmma::mem_col_major);
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  T* d;
  cudaMalloc(&d, host.size() * sizeof(T));
  cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

template <typename T>
std::vector<T> HostCopy(const T* d, size_t n) {
  std::vector<T> host(n);
  cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

void Semantics() {
  {  // 200 of 256 threads take part in the barriers
    int* out;
    cudaMalloc(&out, 4 * 256 * sizeof(int));
    TT_LAUNCH(1, 256, 0, nullptr, BarrierKernel)(200, out);
    const std::vector<int> got = HostCopy(out, 4 * 256);
    bool ok = cudaGetLastError() == cudaSuccess;
    for (int t = 0; t < 256; ++t) {
      const bool live = t < 200;
      ok &= got[4 * t + 3] == (live ? 1 : -1);  // 0xff bytes: never written
      if (live)
        ok &= got[4 * t] == 67 && got[4 * t + 1] == 1 && got[4 * t + 2] == 0;
    }
    Expect(ok, "barriers of the live threads: count 67 of 200, or 1, and 0");
    cudaFree(out);
  }
  {
    int* out;
    cudaMalloc(&out, 5 * 64 * sizeof(int));
    TT_LAUNCH(1, 64, 0, nullptr, ShuffleKernel)(out);
    const std::vector<int> got = HostCopy(out, 5 * 64);
    bool ok = true;
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, half = lane / 16 * 16, base = t - lane;
      const int down = lane + 3 < half + 16 ? t + 3 : t;
      const int up = lane - 2 >= half ? t - 2 : t;
      ok &= got[5 * t] == 100 * (t ^ 1);
      ok &= got[5 * t + 1] == 100 * down;
      ok &= got[5 * t + 2] == 100 * up;
      ok &= got[5 * t + 3] == 100 * (base + half + 5);
      ok &= unsigned(got[5 * t + 4]) == 0xaaaaaaaau;
    }
    Expect(ok, "shuffles (xor, down, up, indexed; width 16) and ballot");
    cudaFree(out);
  }
  {
    std::vector<float> in(3 * 256);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 7);
    float* d_in = DeviceCopy(in);
    float* d_out;
    cudaMalloc(&d_out, 3 * sizeof(float));
    TT_LAUNCH(3, 256, 0, nullptr, SharedSumKernel)(d_in, d_out);
    const std::vector<float> got = HostCopy(d_out, 3);
    bool ok = true;
    for (int b = 0; b < 3; ++b) {
      float want = 0;
      for (int i = 0; i < 256; ++i) want += in[b * 256 + i];
      ok &= got[b] == want;
    }
    Expect(ok, "a tree sum through __shared__ memory, three blocks");
    cudaFree(d_in);
    cudaFree(d_out);
  }
  {  // small integers and halves: every product and sum exact in float
    std::vector<__half> a(256), b(256);
    std::vector<float> c(256);
    for (int i = 0; i < 256; ++i) {
      a[i] = __float2half_rn(float(i % 5) - 2);
      b[i] = __float2half_rn(0.5f * float(i % 7));
      c[i] = float(i % 3);
    }
    __half *d_a = DeviceCopy(a), *d_b = DeviceCopy(b);
    float *d_c = DeviceCopy(c), *d_d;
    cudaMalloc(&d_d, 256 * sizeof(float));
    TT_LAUNCH(1, 32, 0, nullptr, HalfMma)(d_a, d_b, d_c, d_d);
    const std::vector<float> got = HostCopy(d_d, 256);
    bool ok = true;
    for (int r = 0; r < 16; ++r) {
      for (int col = 0; col < 16; ++col) {
        float want = c[r * 16 + col];
        for (int k = 0; k < 16; ++k) {
          want += __half2float(a[r * 16 + k]) * __half2float(b[col * 16 + k]);
        }
        ok &= got[r * 16 + col] == want;
      }
    }
    Expect(ok, "wmma 16x16x16 half: D = A B + C (B column-major)");
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    cudaFree(d_d);
  }
  {  // TF32 reads 10 mantissa bits: 1 + 2^-12 counts as 1
    std::vector<float> a(16 * 8, 1.0f + 0x1p-12f), b(8 * 16, 1.0f);
    float *d_a = DeviceCopy(a), *d_b = DeviceCopy(b), *d_d;
    cudaMalloc(&d_d, 256 * sizeof(float));
    TT_LAUNCH(1, 32, 0, nullptr, Tf32Mma)(d_a, d_b, d_d);
    const std::vector<float> got = HostCopy(d_d, 256);
    bool ok = true;
    for (float v : got) ok &= v == 8.0f;
    Expect(ok && wmma::__float_to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f &&
               wmma::__float_to_tf32(1.0f + 0x1p-12f) == 1.0f,
           "wmma 16x16x8 tf32: low mantissa bits dropped; __float_to_tf32 "
           "rounds half away from zero");
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_d);
  }
  {
    bool ok = true;
    for (float f : {0.0f, -0.0f, 1.0f, 1.0f / 3.0f, 65504.0f, 65519.0f,
                    65520.0f, 6e-8f, 2.9802322e-08f, 1e-10f, -3.14159f}) {
      const float h = __half2float(__float2half_rn(f));
      const float want = f == 65520.0f         ? INFINITY
                         : f == 65519.0f       ? 65504.0f
                         : f == 2.9802322e-08f ? 0.0f  // 2^-25, a tie: even
                         : f == 6e-8f          ? 5.9604645e-08f
                         : f == 1e-10f         ? 0.0f
                         : f == 1.0f / 3.0f    ? 0.333251953125f
                         : f == -3.14159f      ? -3.140625f
                                               : f;
      ok &= h == want && std::signbit(h) == std::signbit(want);
    }
    Expect(ok, "__float2half_rn: ties to even, subnormals, overflow");
  }
  {
    float* d;
    cudaMalloc(&d, 4 * sizeof(float));
    Expect(std::isnan(HostCopy(d, 4)[3]), "cudaMalloc fills with NaN bytes");
    std::vector<float> big(8);
    Expect(cudaMemcpy(d, big.data(), 8 * sizeof(float),
                      cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "a copy past an allocation's end is refused");
    cudaFree(d);
  }
  {
    int* out;
    cudaMalloc(&out, 4 * sizeof(int));
    TT_LAUNCH(1, 2048, 0, nullptr, BarrierKernel)(1, out);
    Expect(cudaGetLastError() == cudaErrorInvalidConfiguration &&
               cudaGetLastError() == cudaSuccess,
           "2048 threads per block: cudaErrorInvalidConfiguration, once");
    TT_LAUNCH(0, 32, 0, nullptr, BarrierKernel)(1, out);
    Expect(cudaGetLastError() == cudaErrorInvalidConfiguration,
           "a grid of 0 blocks: cudaErrorInvalidConfiguration");
    TT_LAUNCH(dim3(1, 70000), 32, 0, nullptr, BarrierKernel)(1, out);
    Expect(cudaGetLastError() == cudaErrorInvalidConfiguration,
           "grid.y of 70000: cudaErrorInvalidConfiguration");
    cudaFree(out);
  }
}

// ------------------------------------------------------------- misuse

__global__ void Deadlock() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __shfl_xor_sync(0xffffffffu, 1, 1);
  }
}

__global__ void ExitedLanes() {
  if (threadIdx.x >= 16) return;
  __shfl_xor_sync(0xffffffffu, 1, 1);
}

// Lane 31 completes the barrier, runs on and returns before the others
// reach the shuffle.
__global__ void ExitedAfterBarrier() {
  __syncthreads();
  if (threadIdx.x >= 16) return;
  __shfl_xor_sync(0xffffffffu, 1, 1);
}

__global__ void MissingLanes() { __any_sync(0xffffffffu, 1); }

__global__ void DivergentBarrier() {
  if (threadIdx.x < 64) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

__global__ void ReadOutsideMask() { __shfl_sync(0x0000ffffu, 1, 20); }

__global__ void DifferentOps() {
  if (threadIdx.x < 16) {
    __any_sync(0xffffffffu, 1);
  } else {
    __ballot_sync(0xffffffffu, 1);
  }
}

__global__ void MisalignedLoad(const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 1, 16);
}

__global__ void HalfWarpMma(const __half* a) {
  if (threadIdx.x >= 16) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, a, 16);
  wmma::fill_fragment(fc, 0.0f);
  wmma::mma_sync(fc, fa, fb, fc);
}

// Each lane loads from its own row: not one warp-wide load.
__global__ void NonUniformLoad(const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 16 * (threadIdx.x % 2), 16);
}

__global__ void Spin(const volatile int* flag) {
  while (*flag == 0) {
  }
}

struct Misuse {
  const char* name;
  const char* env;       // set in the child
  const char* expected;  // in its report
};

const Misuse kMisuses[] = {
    {"deadlock", "", "deadlock: every live thread waits"},
    {"exited-lanes", "", "wait for it at __shfl_xor_sync(mask 0xffffffff)"},
    {"exited-after-barrier", "TT_GPU_EMU_SCHEDULE=eager",
     "names exited lanes 31"},
    {"missing-lanes", "", "which a block of 48 threads does not have"},
    {"divergent-barrier", "", "while threads wait at"},
    {"read-outside-mask", "", "reads lane 20, which the mask leaves out"},
    {"different-ops", "", "is at __ballot_sync(mask 0xffffffff) while lanes"},
    {"misaligned-load", "", "is not 32-byte aligned"},
    {"half-warp-mma", "", "wait for it at wmma::mma_sync(mask 0xffffffff)"},
    {"non-uniform-load", "", "where another lane's call 0 was"},
    {"spin", "TT_GPU_EMU_TIMEOUT_S=2", "no thread switched for"},
    {"bad-order", "TT_GPU_EMU_ORDER=backwards", "TT_GPU_EMU_ORDER must be"},
};

int RunMisuse(const std::string& name) {
  if (name == "deadlock") {
    TT_LAUNCH(1, 32, 0, nullptr, Deadlock)();
  } else if (name == "exited-lanes") {
    TT_LAUNCH(1, 32, 0, nullptr, ExitedLanes)();
  } else if (name == "exited-after-barrier") {
    TT_LAUNCH(1, 32, 0, nullptr, ExitedAfterBarrier)();
  } else if (name == "missing-lanes") {
    TT_LAUNCH(1, 48, 0, nullptr, MissingLanes)();
  } else if (name == "divergent-barrier") {
    TT_LAUNCH(1, 128, 0, nullptr, DivergentBarrier)();
  } else if (name == "read-outside-mask") {
    TT_LAUNCH(1, 16, 0, nullptr, ReadOutsideMask)();
  } else if (name == "different-ops") {
    TT_LAUNCH(1, 32, 0, nullptr, DifferentOps)();
  } else if (name == "misaligned-load" || name == "half-warp-mma" ||
             name == "non-uniform-load") {
    __half* a;
    cudaMalloc(&a, 512 * sizeof(__half));
    if (name == "misaligned-load") {
      TT_LAUNCH(1, 32, 0, nullptr, MisalignedLoad)(a);
    } else if (name == "half-warp-mma") {
      TT_LAUNCH(1, 32, 0, nullptr, HalfWarpMma)(a);
    } else {
      TT_LAUNCH(1, 32, 0, nullptr, NonUniformLoad)(a);
    }
  } else if (name == "spin") {
    int* flag;
    cudaMalloc(&flag, sizeof(int));
    cudaMemset(flag, 0, sizeof(int));
    TT_LAUNCH(1, 1, 0, nullptr, Spin)(flag);
  } else if (name == "bad-order") {
    int* out;
    cudaMalloc(&out, sizeof(int));
  } else {
    std::fprintf(stderr, "selftest: no case '%s'\n", name.c_str());
    return 2;
  }
  std::printf("selftest: %s was not reported\n", name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) return RunMisuse(argv[1]);
  Semantics();
  for (const Misuse& m : kMisuses) {
    const std::string command =
        std::string(m.env) + " " + argv[0] + " " + m.name + " 2>&1";
    FILE* child = popen(command.c_str(), "r");
    std::string output;
    char buffer[512];
    while (child != nullptr && std::fgets(buffer, sizeof(buffer), child)) {
      output += buffer;
    }
    const int status = child != nullptr ? pclose(child) : -1;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
                    output.find(m.expected) != std::string::npos;
    Expect(ok, std::string("reported: ") + m.name);
    if (!ok) std::printf("  status %d, output:\n%s", status, output.c_str());
  }
  std::printf("SUMMARY: %d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
