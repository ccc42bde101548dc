// SPDX-License-Identifier: Apache-2.0
// Registration of the fused RNN-T loss ops.

#include "cc/ops/rnnt_op_shapes.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

namespace {

// Shape of the two gradient ops: logits_grad is the shape of logits, whose
// batch must agree with symbols [B, S] and scale [B] (the last input).
Status GradShapes(InferenceContext* c) {
  ShapeHandle logits, symbols, scale;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &logits));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &symbols));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(c->num_inputs() - 1), 1, &scale));
  DimensionHandle batch;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(logits, 0), c->Dim(symbols, 0), &batch));
  TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(scale, 0), &batch));
  c->set_output(0, logits);
  return Status();
}

// Shapes of the two loss ops: inputs logits, symbols, [ranges,] boundary,
// delay_penalty; outputs scores [B], px_grad [B, S, T (+ 1 if regular)],
// py_grad [B, S + 1, T] and normalizers [B, T, rows of logits].
Status LossShapes(InferenceContext* c, bool pruned) {
  const int boundary_input = pruned ? 3 : 2;
  ShapeHandle logits, symbols, boundary, penalty;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &logits));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &symbols));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(boundary_input), 2, &boundary));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(boundary_input + 1), 0, &penalty));
  DimensionHandle batch, four, s_plus_1, frames = c->Dim(logits, 1);
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(logits, 0), c->Dim(symbols, 0), &batch));
  TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(boundary, 0), &batch));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(boundary, 1), 4, &four));
  TF_RETURN_IF_ERROR(c->Add(c->Dim(symbols, 1), 1, &s_plus_1));
  if (pruned) {  // ranges [B, T, s_range]
    ShapeHandle ranges, leading;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 3, &ranges));
    TF_RETURN_IF_ERROR(c->Subshape(logits, 0, 3, &leading));
    TF_RETURN_IF_ERROR(c->Merge(ranges, leading, &ranges));
  } else {  // logits [B, T, S + 1, C]
    TF_RETURN_IF_ERROR(c->Merge(s_plus_1, c->Dim(logits, 2), &s_plus_1));
  }
  return SetLossOutputs(c, batch, c->Dim(symbols, 1), frames, s_plus_1,
                        c->Dim(logits, 2));
}

}  // namespace

REGISTER_OP("TfTransducerRnntLoss")
    .Input("logits: T")
    .Input("symbols: int64")
    .Input("boundary: int64")
    .Input("delay_penalty: Tacc")
    .TF_TRANSDUCER_RNNT_LOSS_OUTPUTS()
    .TF_TRANSDUCER_RNNT_ATTRS()
    .SetShapeFn([](InferenceContext* c) { return LossShapes(c, false); })
    .Doc(R"doc(
RNN-T log-likelihood of joiner logits, fused: the log-softmax normalisers,
the symbol and blank log-probs and the mutual-information recursion, without
forming a log-softmax of the logits.  Also returns what the gradient needs,
all of size O(B T S): TfTransducerRnntLossGrad turns it into the gradient.

logits: [B, T, S + 1, C] joiner output, in any float type T; half and
  bfloat16 logits are read as such and the maths runs in Tacc = float32
  (float64 logits: Tacc = float64).
symbols: [B, S] label sequences, values in [0, C); S may be 0 (every
  transcript empty: each frame emits a blank).
boundary: [B, 4] rows (s_begin, t_begin, s_end, t_end).
delay_penalty: scalar >= 0; adds ((t_end - 1) / 2 - t) * delay_penalty to the
  log-prob of every symbol emitted on frame t.
scores: [B] log-probability of the labels (minus the loss).
px_grad: [B, S, T + 1] (regular) or [B, S, T]: occupation of symbol steps.
py_grad: [B, S + 1, T]: occupation of blank steps.
normalizers: [B, T, S + 1]: logsumexp of each row of logits.
clamp: if > 0, the gradient op clamps each element of the gradient of the
  loss to [-clamp, clamp] (before the incoming gradient scales it).
fastemit_lambda: FastEmit regularisation (arXiv 2010.11148): the gradient op
  scales the gradient through every symbol step by (1 + fastemit_lambda);
  the score is unchanged.
)doc");

REGISTER_OP("TfTransducerRnntLossGrad")
    .Input("logits: T")
    .Input("symbols: int64")
    .TF_TRANSDUCER_RNNT_GRAD_INPUTS()
    .Output("logits_grad: T")
    .TF_TRANSDUCER_RNNT_ATTRS()
    .SetShapeFn(GradShapes)
    .Doc(R"doc(
scale[b] * d scores[b] / d logits for TfTransducerRnntLoss, in one pass over
the logits; with clamp > 0, each element of d scores[b] / d logits is first
clamped to [-clamp, clamp].

logits_grad: the shape of logits.
)doc");

REGISTER_OP("TfTransducerRnntLossPruned")
    .Input("logits: T")
    .Input("symbols: int64")
    .Input("ranges: int64")
    .Input("boundary: int64")
    .Input("delay_penalty: Tacc")
    .TF_TRANSDUCER_RNNT_LOSS_OUTPUTS()
    .TF_TRANSDUCER_RNNT_ATTRS()
    .SetShapeFn([](InferenceContext* c) { return LossShapes(c, true); })
    .Doc(R"doc(
TfTransducerRnntLoss on a pruned joiner's logits [B, T, s_range, C]: row j of
frame t is symbol position ranges[b, t, j] (consecutive positions within
[0, S]); the (frame, position) pairs no row covers are excluded.

normalizers: [B, T, s_range].
)doc");

REGISTER_OP("TfTransducerRnntLossPrunedGrad")
    .Input("logits: T")
    .Input("symbols: int64")
    .Input("ranges: int64")
    .TF_TRANSDUCER_RNNT_GRAD_INPUTS()
    .Output("logits_grad: T")
    .TF_TRANSDUCER_RNNT_ATTRS()
    .SetShapeFn(GradShapes)
    .Doc(R"doc(
scale[b] * d scores[b] / d logits for TfTransducerRnntLossPruned.
)doc");

REGISTER_OP("TfTransducerRnntPruningGrad")
    .Input("am_pruned_grad: T")
    .Input("lm_pruned_grad: T")
    .Input("ranges: int64")
    .Input("lm_rows: int64")
    .Output("am_grad: T")
    .Output("lm_grad: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle am_pruned, lm_pruned, ranges, leading, rows;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &am_pruned));
      TF_RETURN_IF_ERROR(c->Merge(am_pruned, c->input(1), &lm_pruned));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 3, &ranges));
      TF_RETURN_IF_ERROR(c->Subshape(lm_pruned, 0, 3, &leading));
      TF_RETURN_IF_ERROR(c->Merge(ranges, leading, &ranges));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 0, &rows));
      DimensionHandle lm_rows;
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(3, &lm_rows));
      const DimensionHandle batch = c->Dim(lm_pruned, 0),
                            classes = c->Dim(lm_pruned, 3);
      c->set_output(0, c->MakeShape({batch, c->Dim(lm_pruned, 1), classes}));
      c->set_output(1, c->MakeShape({batch, lm_rows, classes}));
      return Status();
    })
    .Doc(R"doc(
The gradient of do_rnnt_pruning (am_pruned = am broadcast over the s_range
rows, lm_pruned[b, t, j] = lm[b, ranges[b, t, j]]) in one pass:

  am_grad[b, t]  = sum_j am_pruned_grad[b, t, j]                  [B, T, C]
  lm_grad[b, s]  = sum over (t, j) with ranges[b, t, j] = s of
                   lm_pruned_grad[b, t, j]                        [B, S + 1, C]

lm_rows: S + 1, the rows of lm; every range must lie in [0, lm_rows).
Sums of half and bfloat16 run in float.
)doc");

}  // namespace tf_transducer
