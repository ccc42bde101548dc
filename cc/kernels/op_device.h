// SPDX-License-Identifier: Apache-2.0
// The device side of the op kernels (the tensorflow/addons layout): an
// OpKernel<Device, T> checks its inputs, allocates its outputs and calls
// functor::X<Device, T>, whose CPU specialisation runs on TensorFlow's thread
// pool and whose GPU one (built with GOOGLE_CUDA, TT_CUDA=1 in setup.py)
// enqueues the CUDA launchers of gpu/launchers.h on TensorFlow's stream.
// The devices are tags: the functors need nothing of Eigen's devices.
//
// On the GPU the integer inputs (symbols, boundary, ranges) and the delay
// penalty are host memory (HostMemory in the kernel registrations): the
// kernel checks them on the host, as the CPU kernel does, before anything
// is launched, then copies them to device scratch.

#ifndef TF_TRANSDUCER_CC_KERNELS_OP_DEVICE_H_
#define TF_TRANSDUCER_CC_KERNELS_OP_DEVICE_H_

#include <cstdint>
#include <vector>

#include "cc/kernels/half_types.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/lib/core/errors.h"

#if GOOGLE_CUDA
#include "cc/kernels/gpu/launchers.h"
#include "xla/stream_executor/stream.h"
#endif

namespace tf_transducer {

// The kernels' type for a TensorFlow float type (half_types.h: same bits).
template <typename TfType>
struct StorageOf {
  using type = TfType;
};
template <>
struct StorageOf<Eigen::half> {
  using type = Half;
};
template <>
struct StorageOf<tensorflow::bfloat16> {
  using type = BFloat16;
};

// A tensor's data as the kernels' type.
template <typename TfType>
auto TensorData(const tensorflow::Tensor& t) {
  using Storage = typename StorageOf<TfType>::type;
  static_assert(sizeof(TfType) == sizeof(Storage));
  return reinterpret_cast<const Storage*>(t.flat<TfType>().data());
}

// TensorFlow's CPU thread pool for this op.
inline tensorflow::thread::ThreadPool* CpuWorkers(
    tensorflow::OpKernelContext* ctx) {
  return ctx->device()->tensorflow_cpu_worker_threads()->workers;
}

namespace functor {

struct CpuDevice {};
struct GpuDevice {};

// Copies x's elements (on `Device`) into `host`.
template <typename Device, typename T>
struct ReadToHost;

// Makes n int64 values in host memory readable by Device's kernels: on the
// CPU the same pointer; on the GPU a copy in `scratch`.
template <typename Device>
struct Int64Input;

template <>
struct Int64Input<CpuDevice> {
  absl::Status operator()(tensorflow::OpKernelContext*, const int64_t* host,
                          int64_t, tensorflow::Tensor*,
                          const int64_t** readable) {
    *readable = host;
    return absl::OkStatus();
  }
};

template <typename T>
struct ReadToHost<CpuDevice, T> {
  absl::Status operator()(tensorflow::OpKernelContext*,
                          const tensorflow::Tensor& x, std::vector<T>* host) {
    const T* data = x.flat<T>().data();
    host->assign(data, data + x.NumElements());
    return absl::OkStatus();
  }
};

#if GOOGLE_CUDA

// TensorFlow's CUDA stream for this op, as the launchers take it.
inline void* GpuStream(tensorflow::OpKernelContext* ctx) {
  return ctx->op_device_context()->stream()->platform_specific_handle().stream;
}

inline absl::Status LaunchResult(gpu::LaunchStatus status, const char* what) {
  if (status == 0) return absl::OkStatus();
  return tensorflow::errors::Internal("CUDA error in ", what, ": ",
                                      gpu::LaunchErrorString(status));
}

template <>
struct Int64Input<GpuDevice> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx, const int64_t* host,
                          int64_t n, tensorflow::Tensor* scratch,
                          const int64_t** readable) {
    TF_RETURN_IF_ERROR(ctx->allocate_temp(
        tensorflow::DT_INT64, tensorflow::TensorShape({n}), scratch));
    int64_t* out = scratch->flat<int64_t>().data();
    *readable = out;
    // The host buffer may be pinned memory, which an asynchronous copy reads
    // later: wait for the copy, so that the buffer may be released after
    // Compute returns.
    void* stream = GpuStream(ctx);
    TF_RETURN_IF_ERROR(
        LaunchResult(gpu::CopyToDevice(out, host, n * sizeof(int64_t), stream),
                     "a copy to the GPU"));
    return LaunchResult(gpu::Synchronize(stream), "a copy to the GPU");
  }
};

template <typename T>
struct ReadToHost<GpuDevice, T> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const tensorflow::Tensor& x, std::vector<T>* host) {
    host->resize(x.NumElements());
    return LaunchResult(
        gpu::CopyToHost(host->data(), x.flat<T>().data(),
                        x.NumElements() * sizeof(T), GpuStream(ctx)),
        "a copy from the GPU");
  }
};

#endif  // GOOGLE_CUDA

}  // namespace functor
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_OP_DEVICE_H_
