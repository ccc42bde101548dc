// SPDX-License-Identifier: Apache-2.0
// The TensorFlow names the op kernels (*_op.cc) use, declared once for all
// of them in namespace tf_transducer.

#ifndef TF_TRANSDUCER_CC_KERNELS_KERNEL_NAMES_H_
#define TF_TRANSDUCER_CC_KERNELS_KERNEL_NAMES_H_

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/errors.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace tf_transducer {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::errors::InvalidArgument;
using ::tensorflow::thread::ThreadPool;

// The (inputs' type, maths' type) pairs the loss kernels are registered
// for: half, bfloat16 and float inputs computed in float, double in double.
// X(TL, T) is called once per pair.
#define TF_TRANSDUCER_LOSS_TYPES(X) \
  X(Eigen::half, float);            \
  X(tensorflow::bfloat16, float);   \
  X(float, float);                  \
  X(double, double)

// Registers the kernel class (the variadic tail) of loss op `op` on
// `device` for inputs of type TL ("T") with the maths in T ("Tacc");
// `host` chains the op's .HostMemory(...) inputs (empty on the CPU).
#define TF_TRANSDUCER_REGISTER_LOSS_KERNEL(op, device, host, TL, T, ...)      \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name(op).Device(device) host.TypeConstraint<TL>("T").TypeConstraint<T>( \
          "Tacc"),                                                            \
      __VA_ARGS__)

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_KERNEL_NAMES_H_
