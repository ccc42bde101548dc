// Registration of the fused RNN-T loss op.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfTransducerRnntLoss")
    .Input("logits: T")
    .Input("symbols: int64")
    .Input("boundary: int64")
    .Input("delay_penalty: T")
    .Output("scores: T")
    .Output("logits_grad: T")
    .Attr("T: {float, double}")
    .Attr("termination_symbol: int")
    .Attr("rnnt_type: {'regular', 'modified', 'constrained'} = 'regular'")
    .SetShapeFn([](InferenceContext* c) -> Status {
      ShapeHandle logits, symbols, boundary, penalty;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &logits));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &symbols));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &boundary));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 0, &penalty));
      DimensionHandle batch, four, s_plus_1;
      TF_RETURN_IF_ERROR(
          c->Merge(c->Dim(logits, 0), c->Dim(symbols, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(boundary, 0), &batch));
      TF_RETURN_IF_ERROR(c->WithValue(c->Dim(boundary, 1), 4, &four));
      TF_RETURN_IF_ERROR(c->Add(c->Dim(symbols, 1), 1, &s_plus_1));
      TF_RETURN_IF_ERROR(c->Merge(s_plus_1, c->Dim(logits, 2), &s_plus_1));
      c->set_output(0, c->Vector(batch));
      c->set_output(1, logits);
      return Status();
    })
    .Doc(R"doc(
RNN-T log-likelihood of joiner logits and its gradient, in one pass: the
log-softmax normalisers, the symbol and blank log-probs, the
mutual-information recursion, and d sum(scores) / d logits, without forming a
log-softmax of the logits.

logits: [B, T, S + 1, C] joiner output.
symbols: [B, S] label sequences, values in [0, C).
boundary: [B, 4] rows (s_begin, t_begin, s_end, t_end).
delay_penalty: scalar >= 0; adds ((t_end - 1) / 2 - t) * delay_penalty to the
  log-prob of every symbol emitted on frame t.
scores: [B] log-probability of the labels (minus the loss).
logits_grad: d sum(scores) / d logits, the shape of logits.
)doc");

}  // namespace tf_transducer
