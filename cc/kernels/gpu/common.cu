// SPDX-License-Identifier: Apache-2.0
// Copies between host and device, and error names, for the TensorFlow glue
// (which includes no CUDA header).

#include <cuda_runtime.h>

#include "cc/kernels/gpu/launchers.h"

namespace tf_transducer {
namespace gpu {

const char* LaunchErrorString(LaunchStatus status) {
  return cudaGetErrorString(static_cast<cudaError_t>(status));
}

LaunchStatus CopyToDevice(void* device_dst, const void* host_src, size_t bytes,
                          void* stream) {
  if (bytes == 0) return cudaSuccess;
  return cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice,
                         static_cast<cudaStream_t>(stream));
}

LaunchStatus Synchronize(void* stream) {
  return cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
}

LaunchStatus CopyToHost(void* host_dst, const void* device_src, size_t bytes,
                        void* stream) {
  if (bytes == 0) return cudaSuccess;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaError_t status =
      cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, s);
  if (status != cudaSuccess) return status;
  return cudaStreamSynchronize(s);
}

}  // namespace gpu
}  // namespace tf_transducer
