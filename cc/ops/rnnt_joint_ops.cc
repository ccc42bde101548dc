// SPDX-License-Identifier: Apache-2.0
// Registration of the RNN-T loss fused with its joint network.

#include <string>

#include "cc/ops/rnnt_op_shapes.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

namespace {

// The joint's inputs, merged: encoder [B, T, J], predictor [B, S + 1, J],
// weight [J, C], bias [C], symbols [B, S].
struct JointDims {
  DimensionHandle batch, frames, rows, width, classes, symbols;
};

Status MergeJointInputs(InferenceContext* c, JointDims* d) {
  ShapeHandle encoder, predictor, weight, bias, symbols;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &encoder));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &predictor));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &weight));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &bias));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 2, &symbols));
  TF_RETURN_IF_ERROR(
      c->Merge(c->Dim(encoder, 0), c->Dim(predictor, 0), &d->batch));
  TF_RETURN_IF_ERROR(c->Merge(d->batch, c->Dim(symbols, 0), &d->batch));
  TF_RETURN_IF_ERROR(
      c->Merge(c->Dim(encoder, 2), c->Dim(predictor, 2), &d->width));
  TF_RETURN_IF_ERROR(c->Merge(d->width, c->Dim(weight, 0), &d->width));
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(weight, 1), c->Dim(bias, 0), &d->classes));
  TF_RETURN_IF_ERROR(c->Add(c->Dim(symbols, 1), 1, &d->rows));
  TF_RETURN_IF_ERROR(c->Merge(d->rows, c->Dim(predictor, 1), &d->rows));
  d->frames = c->Dim(encoder, 1);
  d->symbols = c->Dim(symbols, 1);
  return Status();
}

// scores [B], px_grad [B, S, T (+ 1 if regular)], py_grad [B, S + 1, T],
// normalizers [B, T, S + 1].
Status JointLossShapes(InferenceContext* c) {
  JointDims d;
  TF_RETURN_IF_ERROR(MergeJointInputs(c, &d));
  ShapeHandle boundary, penalty;
  DimensionHandle four;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &boundary));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(6), 0, &penalty));
  TF_RETURN_IF_ERROR(c->Merge(d.batch, c->Dim(boundary, 0), &d.batch));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(boundary, 1), 4, &four));
  return SetLossOutputs(c, d.batch, d.symbols, d.frames, d.rows, d.rows);
}

// The gradients have the shapes of encoder, predictor, weight and bias.
Status JointGradShapes(InferenceContext* c) {
  JointDims d;
  TF_RETURN_IF_ERROR(MergeJointInputs(c, &d));
  ShapeHandle scale;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(c->num_inputs() - 1), 1, &scale));
  TF_RETURN_IF_ERROR(c->Merge(d.batch, c->Dim(scale, 0), &d.batch));
  c->set_output(0, c->MakeShape({d.batch, d.frames, d.width}));
  c->set_output(1, c->MakeShape({d.batch, d.rows, d.width}));
  c->set_output(2, c->Matrix(d.width, d.classes));
  c->set_output(3, c->Vector(d.classes));
  return Status();
}

}  // namespace

REGISTER_OP("TfTransducerRnntJointLoss")
    .Input("encoder: T")
    .Input("predictor: T")
    .Input("weight: T")
    .Input("bias: T")
    .Input("symbols: int64")
    .Input("boundary: int64")
    .Input("delay_penalty: Tacc")
    .TF_TRANSDUCER_RNNT_LOSS_OUTPUTS()
    .TF_TRANSDUCER_RNNT_ATTRS()
    .Attr("activation: {'tanh', 'relu', 'identity'} = 'tanh'")
    .Attr("allow_tf32: bool = false")
    .SetShapeFn(JointLossShapes)
    .Doc(R"doc(
RNN-T log-likelihood of a joint network's inputs, fused with the joint: the
logits l[b, t, s] = activation(encoder[b, t] + predictor[b, s]) weight + bias
are formed a tile of (t, s) cells at a time, reduced to their log-softmax
normaliser and their symbol and blank log-probs, and dropped; the recursion
then runs as in TfTransducerRnntLoss.  Nothing of size [B, T, S + 1, C] or
[B, T, S + 1, J] is ever allocated.

encoder: [B, T, J] encoder projections (the joint's first input).
predictor: [B, S + 1, J] prediction-network projections.
weight: [J, C] and bias: [C], the joint's output layer.
symbols, boundary, delay_penalty, clamp, fastemit_lambda, termination_symbol,
  rnnt_type: as TfTransducerRnntLoss.
activation: the joint's activation.
allow_tf32: on a GPU, float32 inputs' matrix products run on tensor cores in
  TF32 (10 mantissa bits; float32 accumulation).  float16 and bfloat16
  inputs' products always run on tensor cores in their own type; float64 and
  the CPU kernels multiply exactly.
scores: [B]; px_grad, py_grad: the occupations; normalizers: [B, T, S + 1].
)doc");

REGISTER_OP("TfTransducerRnntJointLossGrad")
    .Input("encoder: T")
    .Input("predictor: T")
    .Input("weight: T")
    .Input("bias: T")
    .Input("symbols: int64")
    .TF_TRANSDUCER_RNNT_GRAD_INPUTS()
    .Output("encoder_grad: T")
    .Output("predictor_grad: T")
    .Output("weight_grad: T")
    .Output("bias_grad: T")
    .TF_TRANSDUCER_RNNT_ATTRS()
    .Attr("activation: {'tanh', 'relu', 'identity'} = 'tanh'")
    .Attr("allow_tf32: bool = false")
    .SetShapeFn(JointGradShapes)
    .Doc(R"doc(
The gradients of sum_b scale[b] * scores[b] of TfTransducerRnntJointLoss
with respect to encoder, predictor, weight and bias: each tile of logits is
formed again, turned into its gradient (clamped as TfTransducerRnntLossGrad
clamps) and carried back through the output layer and the activation.
)doc");

REGISTER_OP("TfTransducerRnntJointLogProbs")
    .Input("encoder: T")
    .Input("predictor: T")
    .Input("weight: T")
    .Input("bias: T")
    .Input("symbols: int64")
    .Input("boundary: int64")
    .Input("delay_penalty: Tacc")
    .Output("px: Tacc")
    .Output("py: Tacc")
    .Output("normalizers: Tacc")
    .TF_TRANSDUCER_RNNT_ATTRS()
    .Attr("activation: {'tanh', 'relu', 'identity'} = 'tanh'")
    .Attr("allow_tf32: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      JointDims d;
      TF_RETURN_IF_ERROR(MergeJointInputs(c, &d));
      std::string rnnt_type;
      TF_RETURN_IF_ERROR(c->GetAttr("rnnt_type", &rnnt_type));
      DimensionHandle px_frames = d.frames;
      if (rnnt_type == "regular") {
        TF_RETURN_IF_ERROR(c->Add(d.frames, 1, &px_frames));
      }
      c->set_output(0, c->MakeShape({d.batch, d.symbols, px_frames}));
      c->set_output(1, c->MakeShape({d.batch, d.rows, d.frames}));
      c->set_output(2, c->MakeShape({d.batch, d.frames, d.rows}));
      return Status();
    })
    .Doc(R"doc(
The first pass of TfTransducerRnntJointLoss alone: the log-softmax
normaliser and the symbol and blank log-probs of every cell of the joint,
without its logits: px [B, S, T (+ 1 if regular)] and py [B, S + 1, T] (-inf
outside the boundary, rnnt_type's lattice and the delay penalty applied),
normalizers [B, T, S + 1].  The gradient of sum(gx px + gy py) for
occupations gx, gy >= 0 is TfTransducerRnntJointLossGrad with px_grad = gx,
py_grad = gy; clamp and fastemit_lambda are that op's (unused here).
)doc");

}  // namespace tf_transducer
