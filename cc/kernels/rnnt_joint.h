// SPDX-License-Identifier: Apache-2.0
// The RNN-T loss fused with its joint network (rnnt_joint_op.cc has the
// formulas): the joint's activations and its inputs as the kernels read
// them, shared by the CPU tiles (rnnt_joint_cpu.h), the CUDA kernels
// (gpu/rnnt_joint.cu) and the GPU harness.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_

#include <cstdint>
#include <string>

#include "cc/kernels/device.h"

namespace tf_transducer {

enum class JointActivation { kTanh, kRelu, kIdentity };

inline JointActivation ParseJointActivation(const std::string& name) {
  return name == "tanh"   ? JointActivation::kTanh
         : name == "relu" ? JointActivation::kRelu
                          : JointActivation::kIdentity;
}

// act'(x) from the activation's output h = act(x): tanh' = 1 - h^2,
// relu' = [h > 0], identity' = 1.
template <typename T>
TT_HOST_DEVICE inline T ActivationSlope(JointActivation activation, T h) {
  switch (activation) {
    case JointActivation::kTanh:
      return T(1) - h * h;
    case JointActivation::kRelu:
      return h > T(0) ? T(1) : T(0);
    default:
      return T(1);
  }
}

// One call's joint inputs, of type L (float, double, Half, BFloat16), where
// the device's kernels read them (device pointers on the GPU).
template <typename L>
struct RnntJointInputs {
  int64_t B, T_len, S, C, J;
  const L* encoder;    // [B, T, J]
  const L* predictor;  // [B, S + 1, J]
  const L* weight;     // [J, C]
  const L* bias;       // [C]
  JointActivation activation;
};

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_
