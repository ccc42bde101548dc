// SPDX-License-Identifier: Apache-2.0
// What the registrations of the RNN-T loss ops share (rnnt_ops.cc,
// rnnt_joint_ops.cc): the shape-inference names, the attributes every
// loss op takes, and the loss ops' four outputs and their shapes.

#ifndef TF_TRANSDUCER_CC_OPS_RNNT_OP_SHAPES_H_
#define TF_TRANSDUCER_CC_OPS_RNNT_OP_SHAPES_H_

#include <string>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// The attributes of every RNN-T loss op and its gradient, chained after
// REGISTER_OP(...)'s inputs and outputs: .TF_TRANSDUCER_RNNT_ATTRS().
#define TF_TRANSDUCER_RNNT_ATTRS()                                           \
  Attr("T: {half, bfloat16, float, double}")                                 \
      .Attr("Tacc: {float, double} = DT_FLOAT")                              \
      .Attr("termination_symbol: int")                                       \
      .Attr("rnnt_type: {'regular', 'modified', 'constrained'} = 'regular'") \
      .Attr("clamp: float = -1.0")                                           \
      .Attr("fastemit_lambda: float = 0.0")

// The outputs of every RNN-T loss op (not its gradient), chained as
// .TF_TRANSDUCER_RNNT_LOSS_OUTPUTS(); SetLossOutputs gives their shapes.
#define TF_TRANSDUCER_RNNT_LOSS_OUTPUTS() \
  Output("scores: Tacc")                  \
      .Output("px_grad: Tacc")            \
      .Output("py_grad: Tacc")            \
      .Output("normalizers: Tacc")

// The inputs every gradient op takes from its loss op, after its own:
// .TF_TRANSDUCER_RNNT_GRAD_INPUTS().
#define TF_TRANSDUCER_RNNT_GRAD_INPUTS() \
  Input("px_grad: Tacc")                 \
      .Input("py_grad: Tacc")            \
      .Input("normalizers: Tacc")        \
      .Input("scale: Tacc")

// The loss ops' outputs: scores [B], px_grad [B, S, T (+ 1 if regular)],
// py_grad [B, S + 1, T] and normalizers [B, T, rows] (rows: S + 1, or
// s_range for pruned logits).
inline Status SetLossOutputs(InferenceContext* c, DimensionHandle batch,
                             DimensionHandle symbols, DimensionHandle frames,
                             DimensionHandle s_plus_1, DimensionHandle rows) {
  std::string rnnt_type;
  TF_RETURN_IF_ERROR(c->GetAttr("rnnt_type", &rnnt_type));
  DimensionHandle px_frames = frames;
  if (rnnt_type == "regular") {
    TF_RETURN_IF_ERROR(c->Add(frames, 1, &px_frames));
  }
  c->set_output(0, c->Vector(batch));
  c->set_output(1, c->MakeShape({batch, symbols, px_frames}));
  c->set_output(2, c->MakeShape({batch, s_plus_1, frames}));
  c->set_output(3, c->MakeShape({batch, frames, rows}));
  return Status();
}

}  // namespace tf_transducer

#endif  // TF_TRANSDUCER_CC_OPS_RNNT_OP_SHAPES_H_
