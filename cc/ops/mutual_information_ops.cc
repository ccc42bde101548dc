// SPDX-License-Identifier: Apache-2.0
// Registration of the mutual-information recursion op.

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_transducer {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfTransducerMutualInformation")
    .Input("px: T")
    .Input("py: T")
    .Input("boundary: int64")
    .Output("scores: T")
    .Output("px_grad: T")
    .Output("py_grad: T")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) -> Status {
      ShapeHandle px, py, boundary;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &px));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &py));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &boundary));
      DimensionHandle batch, four, s_plus_1;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(px, 0), c->Dim(py, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(boundary, 0), &batch));
      TF_RETURN_IF_ERROR(c->WithValue(c->Dim(boundary, 1), 4, &four));
      TF_RETURN_IF_ERROR(c->Add(c->Dim(px, 1), 1, &s_plus_1));
      TF_RETURN_IF_ERROR(c->Merge(s_plus_1, c->Dim(py, 1), &s_plus_1));
      c->set_output(0, c->Vector(batch));
      c->set_output(1, px);
      c->set_output(2, py);
      return Status();
    })
    .Doc(R"doc(
Log-sum over all monotonic paths through a (S + 1) x (T + 1) grid, and the
occupation probability of every step (the gradient of sum(scores)).

px: [B, S, T + 1] (regular) or [B, S, T] (modified) log-weights of x-steps;
  S may be 0 (y-steps alone).  T must be positive.
py: [B, S + 1, T] log-weights of y-steps.
boundary: [B, 4] rows (s_begin, t_begin, s_end, t_end).
scores: [B] log-sum over paths from (s_begin, t_begin) to (s_end, t_end).
px_grad: d sum(scores) / d px, same shape as px.
py_grad: d sum(scores) / d py, same shape as py.
)doc");

}  // namespace tf_transducer
