// SPDX-License-Identifier: Apache-2.0
// Registration of the Token-and-Duration Transducer loss ops: full and
// pruned logits, and the lattice of token log-probs.

#include "cc/ops/rnnt_op_shapes.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

namespace {

// The shapes of TfTransducerTdtLoss's outputs (`pruned`: of
// TfTransducerTdtLossPruned's, whose inputs hold ranges [B, T, R] after
// symbols and whose normalizers are per row of logits): scores [B], px_grad
// [B, S, T], py_grad [B, S + 1, T], normalizers [B, T, rows], duration_grad
// [B, T, S + 1, K].
Status TdtLossShapes(InferenceContext* c, bool pruned) {
  const int lengths = pruned ? 4 : 3;
  ShapeHandle tokens, durations, symbols, frames, labels, rows, duration_rows;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &tokens));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &durations));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &symbols));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(lengths), 1, &frames));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(lengths + 1), 1, &labels));
  TF_RETURN_IF_ERROR(c->Subshape(tokens, 0, 3, &rows));
  TF_RETURN_IF_ERROR(c->Subshape(durations, 0, 3, &duration_rows));
  TF_RETURN_IF_ERROR(c->Merge(rows, duration_rows, &rows));
  DimensionHandle batch = c->Dim(rows, 0), num_symbols = c->Dim(symbols, 1),
                  s_plus_1;
  if (pruned) {
    ShapeHandle ranges;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 3, &ranges));
    TF_RETURN_IF_ERROR(c->Merge(rows, ranges, &rows));
    TF_RETURN_IF_ERROR(c->Add(num_symbols, 1, &s_plus_1));
  } else {
    s_plus_1 = c->Dim(rows, 2);
    DimensionHandle from_rows;
    TF_RETURN_IF_ERROR(c->Subtract(s_plus_1, 1, &from_rows));
    TF_RETURN_IF_ERROR(c->Merge(num_symbols, from_rows, &num_symbols));
  }
  TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(symbols, 0), &batch));
  TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(frames, 0), &batch));
  TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(labels, 0), &batch));
  const DimensionHandle frames_dim = c->Dim(rows, 1);
  c->set_output(0, c->Vector(batch));
  c->set_output(1, c->MakeShape({batch, num_symbols, frames_dim}));
  c->set_output(2, c->MakeShape({batch, s_plus_1, frames_dim}));
  c->set_output(3, c->MakeShape({batch, frames_dim, c->Dim(rows, 2)}));
  c->set_output(
      4, c->MakeShape({batch, frames_dim, s_plus_1, c->Dim(durations, 3)}));
  return Status();
}

}  // namespace

REGISTER_OP("TfTransducerTdtLoss")
    .Input("token_logits: T")
    .Input("duration_logits: T")
    .Input("symbols: int64")
    .Input("logit_lengths: int64")
    .Input("label_lengths: int64")
    .Output("scores: Tacc")
    .Output("px_grad: Tacc")
    .Output("py_grad: Tacc")
    .Output("normalizers: Tacc")
    .Output("duration_grad: Tacc")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("Tacc: {float, double} = DT_FLOAT")
    .Attr("blank: int")
    .Attr("durations: list(int)")
    .Attr("sigma: float = 0.0")
    .Attr("clamp: float = -1.0")
    .Attr("fastemit_lambda: float = 0.0")
    .SetShapeFn([](InferenceContext* c) { return TdtLossShapes(c, false); })
    .Doc(R"doc(
Token-and-Duration Transducer log-likelihood (arXiv 2304.06795), fused: the
log-softmaxes of the token and duration logits, the forward and backward
recursions over the lattice and the occupations of its steps, in one call.
The token logits' gradient is TfTransducerRnntLossGrad (rnnt_type
"modified") of px_grad, py_grad and normalizers; the duration logits' is
duration_grad, both times the incoming gradient.

token_logits: [B, T, S + 1, C]; half and bfloat16 are read as such, the maths
  runs in Tacc.
duration_logits: [B, T, S + 1, K], K = len(durations), the type of
  token_logits.
symbols: [B, S], values in [0, C).
logit_lengths: [B] frames, in [1, T].
label_lengths: [B] symbols, in [0, S].
scores: [B] log P(symbols | logits), minus the loss.
px_grad: [B, S, T] occupation of the label steps from each node (summed
  over durations).
py_grad: [B, S + 1, T] occupation of the blank steps from each node.
normalizers: [B, T, S + 1] logsumexp of each row of token logits.
duration_grad: [B, T, S + 1, K] d scores / d duration_logits (FastEmit and
  clamp applied).
blank: the blank's class.
durations: K durations, sorted, distinct, >= 0, with 0 and 1.
sigma: subtracted from every token log-prob (logit under-normalisation).
clamp: if > 0, gradient elements are clamped to [-clamp, clamp].
fastemit_lambda: the gradient through every label step is scaled by
  (1 + fastemit_lambda); the score is unchanged.
)doc");

REGISTER_OP("TfTransducerTdtLossPruned")
    .Input("token_logits: T")
    .Input("duration_logits: T")
    .Input("symbols: int64")
    .Input("ranges: int64")
    .Input("logit_lengths: int64")
    .Input("label_lengths: int64")
    .Output("scores: Tacc")
    .Output("px_grad: Tacc")
    .Output("py_grad: Tacc")
    .Output("normalizers: Tacc")
    .Output("duration_grad: Tacc")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("Tacc: {float, double} = DT_FLOAT")
    .Attr("blank: int")
    .Attr("durations: list(int)")
    .Attr("sigma: float = 0.0")
    .Attr("clamp: float = -1.0")
    .Attr("fastemit_lambda: float = 0.0")
    .SetShapeFn([](InferenceContext* c) { return TdtLossShapes(c, true); })
    .Doc(R"doc(
TfTransducerTdtLoss of pruned logits: R rows a frame, row j of frame t of
utterance b at symbol position ranges[b, t, j] (R consecutive positions in
[0, S]); the lattice's other nodes take no step.  Outputs as
TfTransducerTdtLoss's, normalizers [B, T, R] per row of logits and
duration_grad [B, T, S + 1, K] per node (gather it by ranges for the pruned
duration logits' gradient); the token logits' gradient is
TfTransducerRnntLossPrunedGrad (rnnt_type "modified").
)doc");

REGISTER_OP("TfTransducerTdtLattice")
    .Input("px: T")
    .Input("py: T")
    .Input("duration_logits: T")
    .Input("logit_lengths: int64")
    .Input("label_lengths: int64")
    .Output("scores: T")
    .Output("px_grad: T")
    .Output("py_grad: T")
    .Output("duration_grad: T")
    .Attr("T: {float, double}")
    .Attr("durations: list(int)")
    .Attr("sigma: float = 0.0")
    .Attr("clamp: float = -1.0")
    .Attr("fastemit_lambda: float = 0.0")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle px, py, durations, frames, labels;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &px));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &py));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 4, &durations));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &frames));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 1, &labels));
      c->set_output(0, c->Vector(c->Dim(py, 0)));
      c->set_output(1, px);
      c->set_output(2, py);
      c->set_output(3, durations);
      return Status();
    })
    .Doc(R"doc(
The TDT lattice of token log-probs: TfTransducerTdtLoss with px [B, S, T]
(each node's label log-prob) and py [B, S + 1, T] (its blank log-prob) in
place of the token logits' log-softmax, sigma subtracted from both.
duration_logits [B, T, S + 1, K] are log-softmaxed here.  px_grad and
py_grad are the occupations of the label and blank steps (the gradient of
the scores with respect to px and py; FastEmit scales px's); duration_grad
the duration logits' gradient (FastEmit and clamp applied).
)doc");

}  // namespace tf_transducer
