// SPDX-License-Identifier: Apache-2.0
// A CPU emulator of the part of CUDA that cc/kernels/gpu uses, so that the
// kernels' exact sources compile with g++ against this folder instead of
// CUDA's headers (-I cc/gpu_emu) and run, under AddressSanitizer,
// UndefinedBehaviorSanitizer or ThreadSanitizer, on a machine without a GPU.
// This file is CUDA's face (types, intrinsics, runtime calls); emulator.h is
// the engine, fiber.h its execution contexts, mma.h the tensor-core API.
//
//   - A launch runs synchronously on the calling thread, its blocks one
//     after another (TT_GPU_EMU_ORDER: forward, the default, reverse, or
//     shuffle[:SEED]), each thread of a block a fiber of a pool kept across
//     launches (emulator.h says how they are scheduled).
//   - __syncthreads (and its _or / _and / _count forms) is a barrier of the
//     block's live threads: a thread that has returned no longer counts, as
//     on sm_70 and later.
//   - Warp operations (shuffles, votes, __syncwarp, and mma.h's) are
//     collectives of the lanes their mask names.  A mask that leaves out its
//     caller or names a lane that has exited or does not exist, lanes of one
//     warp at different warp operations, a shuffle reading a lane outside
//     the mask, and a lane that returns while a collective waits for it are
//     reported.
//   - When every live thread of a block waits, the emulator reports a
//     deadlock (which lanes wait where) instead of hanging; a launch in
//     which no thread switches for TT_GPU_EMU_TIMEOUT_S seconds (default
//     600) is reported too.  A report exits the process with status 1.
//   - __shared__ variables are static: one copy, used by the one block that
//     runs at a time.
//   - cudaMalloc returns an allocation of exactly the requested size (256-byte
//     aligned, as CUDA's), filled with 0xff bytes (NaN in floating point, -1 in
//     integers), so that AddressSanitizer flags any access outside it and a
//     read of an unwritten element shows.  Copies and fills check that their
//     device range lies in one allocation.  Streams and events exist; work runs
//     as it is enqueued.
//   - A bad launch configuration (no threads, more than 1024 per block, grid
//     dimensions out of range, dynamic shared memory, which no kernel here
//     uses) is printed and returned by cudaGetLastError as
//     cudaErrorInvalidConfiguration, as CUDA returns it; a stream that was
//     not created, as cudaErrorInvalidResourceHandle.
//
// Standard C++17, POSIX threads and ucontext only.  Kernels are launched
// through TT_LAUNCH (cc/kernels/gpu/launch.h), which is <<<...>>> under
// nvcc and TT_GPU_EMU_LAUNCH here.

#ifndef TF_TRANSDUCER_CC_GPU_EMU_CUDA_RUNTIME_H_
#define TF_TRANSDUCER_CC_GPU_EMU_CUDA_RUNTIME_H_

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cc/gpu_emu/emulator.h"

#define TF_TRANSDUCER_GPU_EMU 1

// CUDA's qualifiers.  __shared__ makes a kernel's variable static: shared by
// the threads of the block that runs.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

constexpr int warpSize = 32;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major, minor;
  int multiProcessorCount;
};

struct CUstream_st {
  int unused;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when;
  bool recorded;
};
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

namespace tf_transducer {
namespace gpu_emu {

// A grid or block dimension given as a number (checked: CUDA would truncate
// it silently) or a dim3; returns what is wrong with it, or "".
template <typename D>
std::string ToDim3(const D& d, const char* what, dim3* out) {
  if constexpr (std::is_integral_v<D>) {
    if (d < 1 || uint64_t(d) > 0xffffffffull) {
      return Format("%s of %lld", what, (long long)d);
    }
    *out = dim3(unsigned(d));
  } else {
    *out = dim3(d);
  }
  return "";
}

// What TT_GPU_EMU_LAUNCH returns: called with the kernel's arguments, it
// checks the configuration and runs the grid.
template <typename Kernel>
class Launcher {
 public:
  Launcher(const char* name, dim3 grid, dim3 block, const std::string& error,
           cudaError_t error_code, Kernel* kernel)
      : name_(name),
        grid_(grid),
        block_(block),
        error_(error),
        error_code_(error_code),
        kernel_(kernel) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    if (!error_.empty()) {
      Device::Get().SetLaunchError(error_, error_code_);
      return;
    }
    // The arguments as the kernel's parameters take them (by value), each
    // thread's call copying them again.
    const auto params = std::make_tuple(std::decay_t<Args>(args)...);
    const std::function<void()> body = [&] { std::apply(*kernel_, params); };
    Device::Get().Run(name_, grid_, block_, body);
  }

 private:
  const char* name_;
  dim3 grid_, block_;
  std::string error_;
  cudaError_t error_code_;
  Kernel* kernel_;
};

template <typename G, typename B, typename Kernel>
Launcher<Kernel> Launch(const char* name, const G& grid_in, const B& block_in,
                        size_t shared_bytes, cudaStream_t stream,
                        Kernel* kernel) {
  dim3 grid, block;
  std::string error;
  cudaError_t code = cudaSuccess;
  const auto bad = [&](const std::string& why,
                       cudaError_t e = cudaErrorInvalidConfiguration) {
    if (error.empty()) {
      error = Format("launch of %s: %s (%s)", name, why.c_str(),
                     e == cudaErrorInvalidConfiguration
                         ? "cudaErrorInvalidConfiguration"
                         : "cudaErrorInvalidResourceHandle");
      code = e;
    }
  };
  for (const std::string& why :
       {ToDim3(grid_in, "a grid of blocks", &grid),
        ToDim3(block_in, "a block of threads", &block)}) {
    if (!why.empty()) bad(why);
  }
  const unsigned g[3] = {grid.x, grid.y, grid.z};
  const unsigned b[3] = {block.x, block.y, block.z};
  for (int i = 0; i < 3; ++i) {
    if (g[i] < 1 || g[i] > kMaxGridDim[i]) {
      bad(Format("grid dimension %d is %u, not in [1, %u]", i, g[i],
                 kMaxGridDim[i]));
    }
    if (b[i] < 1 || b[i] > kMaxBlockDim[i]) {
      bad(Format("block dimension %d is %u, not in [1, %u]", i, b[i],
                 kMaxBlockDim[i]));
    }
  }
  if (uint64_t(block.x) * block.y * block.z > kMaxThreadsPerBlock) {
    bad(Format("%u x %u x %u threads per block, more than %d", block.x, block.y,
               block.z, kMaxThreadsPerBlock));
  }
  if (shared_bytes != 0) {
    bad(Format("%zu bytes of dynamic shared memory (not emulated)",
               shared_bytes));
  }
  if (!Device::Get().IsStream(stream, name)) {
    bad("the stream was not created", cudaErrorInvalidResourceHandle);
  }
  return Launcher<Kernel>(name, grid, block, error, code, kernel);
}

// ----------------------------------------------------- warp collectives
template <typename T>
struct ShuffleIn {
  T value;
  int src;  // the lane to read (in the caller's segment of `width` lanes)
};

template <typename T>
std::string ShuffleCombine(const void* const* in, void* const* out,
                           unsigned mask) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    const int src = static_cast<const ShuffleIn<T>*>(in[lane])->src;
    if (!(mask >> src & 1u)) {
      return Format("lane %d reads lane %d, which the mask leaves out", lane,
                    src);
    }
    *static_cast<T*>(out[lane]) =
        static_cast<const ShuffleIn<T>*>(in[src])->value;
  }
  return "";
}

template <typename T>
T Shuffle(const char* op, unsigned mask, T value, int src) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "shuffles move values of at most 8 bytes");
  ShuffleIn<T> in{value, src};
  T out;
  Device::Get().WarpCollective(op, mask, &ShuffleCombine<T>, &in, &out,
                               /*orders_memory=*/false);
  return out;
}

inline int LaneId() {
  return int(threadIdx.x +
             blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) %
         32;
}

// The source lane of a shuffle within segments of `width` lanes; the
// caller's own lane when the source falls outside its segment.
inline int SegmentLane(int lane, int target, int width) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    Fail("shuffle width %d is not a power of 2 in [1, 32]", width);
  }
  const int base = lane / width * width;
  return target >= base && target < base + width ? target : lane;
}

// Votes: each lane's predicate in, the mask of lanes with a true one out.
inline std::string BallotCombine(const void* const* in, void* const* out,
                                 unsigned mask) {
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) && *static_cast<const int*>(in[lane]) != 0) {
      ballot |= 1u << lane;
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    if (mask >> lane & 1u) *static_cast<unsigned*>(out[lane]) = ballot;
  }
  return "";
}

inline unsigned Ballot(const char* op, unsigned mask, int predicate,
                       bool orders_memory = false) {
  unsigned out = 0;
  Device::Get().WarpCollective(op, mask, &BallotCombine, &predicate, &out,
                               orders_memory);
  return out;
}

}  // namespace gpu_emu
}  // namespace tf_transducer

// -------------------------------------------------------------- intrinsics
// The barriers take their call site (a default argument) to report threads
// at different ones.
inline void __syncthreads(const char* file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  int arrived;
  tf_transducer::gpu_emu::Device::Get().Barrier("__syncthreads", 0, &arrived,
                                                file, line);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(),
                            int line = __builtin_LINE()) {
  int arrived;
  return tf_transducer::gpu_emu::Device::Get().Barrier(
             "__syncthreads_or", predicate, &arrived, file, line) > 0;
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  int arrived;
  const int count = tf_transducer::gpu_emu::Device::Get().Barrier(
      "__syncthreads_and", predicate, &arrived, file, line);
  return count == arrived;
}
inline int __syncthreads_count(int predicate,
                               const char* file = __builtin_FILE(),
                               int line = __builtin_LINE()) {
  int arrived;
  return tf_transducer::gpu_emu::Device::Get().Barrier(
      "__syncthreads_count", predicate, &arrived, file, line);
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  tf_transducer::gpu_emu::Ballot("__syncwarp", mask, 0,
                                 /*orders_memory=*/true);
}
inline int __any_sync(unsigned mask, int predicate) {
  return tf_transducer::gpu_emu::Ballot("__any_sync", mask, predicate) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return tf_transducer::gpu_emu::Ballot("__all_sync", mask, predicate) == mask;
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return tf_transducer::gpu_emu::Ballot("__ballot_sync", mask, predicate);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  namespace e = tf_transducer::gpu_emu;
  const int lane = e::LaneId();
  const int src =
      e::SegmentLane(lane, lane / width * width + src_lane % width, width);
  return e::Shuffle("__shfl_sync", mask, var, src);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  namespace e = tf_transducer::gpu_emu;
  const int lane = e::LaneId();
  return e::Shuffle("__shfl_up_sync", mask, var,
                    e::SegmentLane(lane, lane - int(delta), width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  namespace e = tf_transducer::gpu_emu;
  const int lane = e::LaneId();
  return e::Shuffle("__shfl_down_sync", mask, var,
                    e::SegmentLane(lane, lane + int(delta), width));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  namespace e = tf_transducer::gpu_emu;
  const int lane = e::LaneId();
  return e::Shuffle("__shfl_xor_sync", mask, var,
                    e::SegmentLane(lane, lane ^ lane_mask, width));
}

// ------------------------------------------------------------- launches
#define TT_GPU_EMU_LAUNCH(grid, block, shared_bytes, stream, ...)           \
  ::tf_transducer::gpu_emu::Launch(#__VA_ARGS__, grid, block, shared_bytes, \
                                   stream, &__VA_ARGS__)

// ------------------------------------------------------------ runtime API
inline cudaError_t cudaGetLastError() {
  return cudaError_t(tf_transducer::gpu_emu::Device::Get().TakeLastError());
}

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
  }
  return "unknown error";
}

inline cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

namespace tf_transducer {
namespace gpu_emu {
// The machine's memory, the emulated device's.
inline size_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}
}  // namespace gpu_emu
}  // namespace tf_transducer

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  namespace e = tf_transducer::gpu_emu;
  if (device != 0) return cudaErrorInvalidValue;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name),
                "tf_transducer CPU emulator (cc/gpu_emu)");
  prop->totalGlobalMem = e::PhysicalMemory();
  prop->sharedMemPerBlock = 48 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = e::kMaxThreadsPerBlock;
  for (int i = 0; i < 3; ++i) {
    prop->maxThreadsDim[i] = int(e::kMaxBlockDim[i]);
    prop->maxGridSize[i] = int(e::kMaxGridDim[i]);
  }
  prop->major = 0;  // not a GPU
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr,
                                          int device) {
  if (device != 0 || value == nullptr) return cudaErrorInvalidValue;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = tf_transducer::gpu_emu::kMaxThreadsPerBlock;
      break;
    case cudaDevAttrWarpSize:
      *value = 32;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = 1;
      break;
    default:  // memory clock, bus width: unknown
      *value = 0;
  }
  return cudaSuccess;
}

inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const size_t total = tf_transducer::gpu_emu::PhysicalMemory();
  const size_t used = tf_transducer::gpu_emu::Device::Get().allocated();
  *total_bytes = total;
  *free_bytes = total > used ? total - used : 0;
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  *ptr = tf_transducer::gpu_emu::Device::Get().Malloc(bytes);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
inline cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  return tf_transducer::gpu_emu::Device::Get().Free(ptr)
             ? cudaSuccess
             : cudaErrorInvalidDevicePointer;
}

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes,
                                   cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
  auto& device = tf_transducer::gpu_emu::Device::Get();
  if (!device.IsStream(stream, "cudaMemcpyAsync")) {
    return cudaErrorInvalidResourceHandle;
  }
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) {
    std::fprintf(stderr,
                 "gpu_emu: cudaMemcpyAsync: kind %d (only host-to-device, "
                 "device-to-host and device-to-device are emulated)\n",
                 int(kind));
    return cudaErrorInvalidMemcpyDirection;
  }
  if (bytes == 0) return cudaSuccess;
  const bool dst_device =
      kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device =
      kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device &&
       !device.InDeviceMemory(dst, bytes, "cudaMemcpyAsync", "destination")) ||
      (src_device &&
       !device.InDeviceMemory(src, bytes, "cudaMemcpyAsync", "source"))) {
    return cudaErrorInvalidValue;
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes,
                              cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes,
                                   cudaStream_t stream = nullptr) {
  auto& device = tf_transducer::gpu_emu::Device::Get();
  if (!device.IsStream(stream, "cudaMemsetAsync")) {
    return cudaErrorInvalidResourceHandle;
  }
  if (bytes == 0) return cudaSuccess;
  if (!device.InDeviceMemory(ptr, bytes, "cudaMemsetAsync", "pointer")) {
    return cudaErrorInvalidValue;
  }
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st{0};
  tf_transducer::gpu_emu::Device::Get().AddStream(*stream);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!tf_transducer::gpu_emu::Device::Get().RemoveStream(stream)) {
    return cudaErrorInvalidResourceHandle;
  }
  delete stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return tf_transducer::gpu_emu::Device::Get().IsStream(stream,
                                                        "cudaStreamSynchronize")
             ? cudaSuccess
             : cudaErrorInvalidResourceHandle;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

inline cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st{{}, false};
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event,
                                   cudaStream_t stream = nullptr) {
  if (event == nullptr || !tf_transducer::gpu_emu::Device::Get().IsStream(
                              stream, "cudaEventRecord")) {
    return cudaErrorInvalidResourceHandle;
  }
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event != nullptr && event->recorded ? cudaSuccess
                                             : cudaErrorInvalidResourceHandle;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start,
                                        cudaEvent_t end) {
  if (start == nullptr || end == nullptr || !start->recorded ||
      !end->recorded) {
    return cudaErrorInvalidResourceHandle;
  }
  *ms =
      std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

#endif  // TF_TRANSDUCER_CC_GPU_EMU_CUDA_RUNTIME_H_
