// SPDX-License-Identifier: Apache-2.0
// functor::MutualInformation<Device, T>: runs the MI recursion of a
// MutualInformationProblem whose pointers Device's kernels can read (see
// op_device.h), and returns for each sequence whether its px or py held a
// NaN or +inf (such a sequence is not computed; the caller reports it).
// Shared by the MI op and the fused RNN-T loss ops.

#ifndef TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_FUNCTOR_H_
#define TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_FUNCTOR_H_

#include <vector>

#include "cc/kernels/mutual_information_cell.h"
#include "cc/kernels/mutual_information_cpu.h"
#include "cc/kernels/op_device.h"

namespace tf_transducer {
namespace functor {

template <typename Device, typename T>
struct MutualInformation;

template <typename T>
struct MutualInformation<CpuDevice, T> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const MutualInformationProblem<T>& p,
                          std::vector<char>* illegal) {
    illegal->assign(p.batch, 0);
    RunMutualInformationCpu(p, CpuWorkers(ctx), illegal->data());
    return absl::OkStatus();
  }
};

#if GOOGLE_CUDA
template <typename T>
struct MutualInformation<GpuDevice, T> {
  absl::Status operator()(tensorflow::OpKernelContext* ctx,
                          const MutualInformationProblem<T>& p,
                          std::vector<char>* illegal) {
    tensorflow::Tensor flags;
    TF_RETURN_IF_ERROR(ctx->allocate_temp(
        tensorflow::DT_INT8, tensorflow::TensorShape({p.batch}), &flags));
    char* device_flags = reinterpret_cast<char*>(flags.flat<int8_t>().data());
    void* stream = GpuStream(ctx);
    TF_RETURN_IF_ERROR(
        LaunchResult(gpu::MutualInformation(p, device_flags, stream),
                     "the mutual-information recursion"));
    // The flags decide between a result and an error: wait for them.
    illegal->resize(p.batch);
    return LaunchResult(
        gpu::CopyToHost(illegal->data(), device_flags, p.batch, stream),
        "a copy from the GPU");
  }
};
#endif  // GOOGLE_CUDA

}  // namespace functor
}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_MUTUAL_INFORMATION_FUNCTOR_H_
