// SPDX-License-Identifier: Apache-2.0
// The RNN-T loss fused with its joint network (rnnt_joint_op.cc has the
// formulas): the joint's activations.

#ifndef TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_
#define TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_

#include <string>

namespace tf_transducer {

enum class JointActivation { kTanh, kRelu, kIdentity };

inline JointActivation ParseJointActivation(const std::string& name) {
  return name == "tanh"   ? JointActivation::kTanh
         : name == "relu" ? JointActivation::kRelu
                          : JointActivation::kIdentity;
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_KERNELS_RNNT_JOINT_H_
