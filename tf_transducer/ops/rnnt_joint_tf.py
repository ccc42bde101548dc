# SPDX-License-Identifier: Apache-2.0
"""The joint RNN-T loss in plain TensorFlow, a chunk of frames at a time.

The XLA path of `tf_transducer.ops.rnnt_joint.rnnt_loss_joint` (custom ops
cannot run under `jit_compile=True`), with the maths of the C++ op
(cc/kernels/rnnt_joint_op.cc): for frames t and symbol positions s,

    h[b, t, s] = act(encoder[b, t] + predictor[b, s])            [J]
    l[b, t, s] = h[b, t, s] @ weight + bias                      [C]
    n[b, t, s] = logsumexp_c l[b, t, s, c]
    px[b, s, t] = l[b, t, s, y_s] - n,   py[b, s, t] = l[b, t, s, blank] - n

then the lattice of `rnnt_loss` (rnnt_type, delay penalty) and the MI
recursion.  The score's gradient with respect to l is, as in
cc/kernels/rnnt_loss_op.cc,

    G = gx [c == y_s] + gy [c == blank] - (gx + gy) exp(l - n)

with gx, gy the occupations of the cell's symbol and blank steps (FastEmit
scales gx by 1 + lambda; constrained adds the symbol step of row s - 1 to
gy), clamped per element before the incoming gradient scales it.  Then

    d weight = sum h^T G,   d bias = sum G,   da = (G weight^T) act'(h)
    d encoder[b, t] = sum_s da[b, t, s],   d predictor[b, s] = sum_t da[b, t, s]

Neither l [B, T, S + 1, C] nor h [B, T, S + 1, J] is formed whole: a
`tf.while_loop` goes over chunks of frames (T padded up to a multiple of the
chunk), forming a chunk's h and l and keeping only n, px and py
(O(B T S) values); the custom gradient forms each chunk again.
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.ops._validation import default_boundary
from tf_transducer.ops.mutual_information_tf import mutual_information_recursion_tf
from tf_transducer.ops.rnnt_lattice import _add_delay_penalty
from tf_transducer.ops.rnnt_lattice import _finish_logprobs

_NEG_INF = float("-inf")

# The most values a chunk's largest tensor ([B, chunk, S + 1, max(C, J)])
# holds when the chunk size is chosen here: 16 Mi values, 64 MiB in float32.
CHUNK_VALUES = 1 << 24

# The same for a small head of the joint (`joint_head_logits`), whose chunks
# are its whole cost in memory: 1 Mi values, 4 MiB in float32.
HEAD_CHUNK_VALUES = 1 << 20

# Frames per chunk when the dimensions are not known while tracing.
DEFAULT_CHUNK_FRAMES = 16


def chunk_frames(
    chunk_size: int | None,
    encoder: tf.Tensor,
    predictor: tf.Tensor,
    weight: tf.Tensor,
    values: int = CHUNK_VALUES,
) -> int:
    """Frames per chunk: chunk_size, or one that keeps a chunk's tensors small.

    Without chunk_size, the largest number of frames whose logits or hidden
    [B, chunk, S + 1, max(C, J)] hold at most `values` values (at least one
    frame, at most T), or DEFAULT_CHUNK_FRAMES when B, S, C or J is only
    known at run time.

    Raises:
      ValueError: chunk_size not a positive integer.
    """
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
            raise ValueError(
                f"chunk_size must be a positive integer, got {chunk_size!r}"
            )
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
        return int(chunk_size)
    batch, width, classes, hidden = (
        encoder.shape[0],
        predictor.shape[1],
        weight.shape[1],
        weight.shape[0],
    )
    if None in (batch, width, classes, hidden):
        frames = DEFAULT_CHUNK_FRAMES
    else:
        per_frame = max(1, batch * width * max(classes, hidden))
        frames = max(1, values // per_frame)
    if encoder.shape[1] is not None:
        frames = min(frames, max(1, encoder.shape[1]))
    return frames


def _to_chunks(x: tf.Tensor, frames: int) -> tf.Tensor:
    """[B, T, ...] -> [N, B, frames, ...], T padded with zeros to N * frames."""
    shape = tf.shape(x)
    num = (shape[1] + frames - 1) // frames
    pad = [[0, 0], [0, num * frames - shape[1]]] + [[0, 0]] * (x.shape.rank - 2)
    x = tf.reshape(
        tf.pad(x, pad), tf.concat([[shape[0], num, frames], shape[2:]], axis=0)
    )
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


def _from_chunks(x: tf.Tensor, num_frames: tf.Tensor) -> tf.Tensor:
    """[N, B, frames, ...] -> [B, T, ...], the padding frames dropped."""
    x = tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))
    shape = tf.shape(x)
    x = tf.reshape(x, tf.concat([[shape[0], shape[1] * shape[2]], shape[3:]], 0))
    return x[:, :num_frames]


def _hidden(encoder: tf.Tensor, predictor: tf.Tensor, activation: str) -> tf.Tensor:
    """act(encoder[b, t] + predictor[b, s]) [B, K, S + 1, J].

    From encoder frames [B, K, J] and predictor [B, S + 1, J].
    """
    x = encoder[:, :, tf.newaxis] + predictor[:, tf.newaxis]
    if activation == "tanh":
        return tf.tanh(x)
    if activation == "relu":
        return tf.nn.relu(x)
    return x


def _activation_slope(hidden: tf.Tensor, activation: str) -> tf.Tensor | None:
    """act' from act's output h: 1 - h^2, [h > 0], or None for identity."""
    if activation == "tanh":
        return 1 - tf.square(hidden)
    if activation == "relu":
        return tf.cast(hidden > 0, hidden.dtype)
    return None


def _logits(hidden: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """hidden [..., J] @ weight [J, C] + bias [C] -> [..., C], as one matmul."""
    shape = tf.shape(hidden)
    rows = tf.reshape(hidden, [-1, shape[-1]])
    logits = tf.matmul(rows, weight) + bias
    return tf.reshape(logits, tf.concat([shape[:-1], tf.shape(weight)[1:]], 0))


def joint_scores_tf(
    encoder: TensorLike, predictor: TensorLike, weight: TensorLike, bias: TensorLike,
    symbols: TensorLike, boundary: TensorLike | None = None, *, termination_symbol: int,
    rnnt_type: str = "regular", activation: str = "tanh", delay_penalty: float = 0.0,
    clamp: float = -1.0, fastemit_lambda: float = 0.0, chunk_size: int | None = None,
) -> tf.Tensor:  # fmt: skip
    """Log-likelihood scores [B] of the joint RNN-T loss, in plain TensorFlow.

    The scores of the C++ op behind `rnnt_loss_joint` (minus the loss),
    computed a chunk of frames at a time with a custom gradient that forms
    each chunk again (see the module docstring). Only TensorFlow ops that
    XLA compiles; nothing is checked here (`rnnt_loss_joint` checks its
    arguments before calling this).

    Args:
      encoder: float [B, T, J], the encoder's projection into the joint.
      predictor: float [B, S + 1, J], the prediction network's projection,
        the dtype of encoder.
      weight: float [J, C], the joint's output layer.
      bias: float [C], its bias.
      symbols: int [B, S], values in [0, C).
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end);
        None means (0, 0, S, T) rows.
      termination_symbol: int in [0, C), the blank.
      rnnt_type: "regular", "modified" or "constrained".
      activation: "tanh", "relu" or "identity".
      delay_penalty: float >= 0, as `rnnt_loss`.
      clamp: if > 0, each element of each utterance's gradient with respect
        to the logits is clamped to [-clamp, clamp] before the incoming
        gradient scales it; <= 0 clamps nothing.
      fastemit_lambda: float >= 0; the symbol steps' gradient is scaled by
        1 + fastemit_lambda.
      chunk_size: frames per chunk; None chooses one (`chunk_frames`).

    clamp and fastemit_lambda are rounded to float32 first, as the C++ op's
    attributes are.

    Returns:
      scores [B]: float64 for float64 inputs, else float32 (16-bit inputs are
      computed in float32; their gradients come back in their dtype).
    """
    with tf.name_scope("joint_scores_tf"):
        encoder = tf.convert_to_tensor(encoder, name="encoder")
        predictor = tf.convert_to_tensor(predictor, name="predictor")
        weight = tf.convert_to_tensor(weight, name="weight")
        bias = tf.convert_to_tensor(bias, name="bias")
        symbols = tf.cast(tf.convert_to_tensor(symbols, name="symbols"), tf.int64)
        frames = chunk_frames(chunk_size, encoder, predictor, weight)
        num_frames = tf.shape(encoder)[1]
        if boundary is None:
            boundary = default_boundary(
                tf.shape(encoder)[0], tf.shape(symbols)[1], num_frames
            )
        boundary = tf.cast(tf.convert_to_tensor(boundary, name="boundary"), tf.int64)
        joint = _Joint(
            symbols=symbols,
            boundary=boundary,
            frames=frames,
            blank=termination_symbol,
            rnnt_type=rnnt_type,
            activation=activation,
            delay_penalty=float(delay_penalty),
            clamp=float(np.float32(clamp)),
            emit=1.0 + float(np.float32(fastemit_lambda)),
        )

        @tf.custom_gradient
        def scores_of(
            encoder: tf.Tensor, predictor: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor
        ) -> Any:
            inputs = (encoder, predictor, weight, bias)
            dtype = joint.dtype(encoder.dtype)
            wide = (
                tf.cast(encoder, dtype),
                tf.cast(predictor, dtype),
                tf.cast(weight, dtype),
                tf.cast(bias, dtype),
            )
            scores, saved = joint.forward(*wide)

            def backward(d_scores: tf.Tensor) -> list[tf.Tensor]:
                grads = joint.backward(wide, saved, d_scores)
                return [tf.cast(g, x.dtype) for g, x in zip(grads, inputs, strict=True)]

            return scores, backward

        return scores_of(encoder, predictor, weight, bias)


class _Joint:
    """The two passes of `joint_scores_tf` for one call's options."""

    def __init__(
        self, symbols: tf.Tensor, boundary: tf.Tensor, frames: int, blank: int,
        rnnt_type: str, activation: str, delay_penalty: float, clamp: float,
        emit: float,
    ) -> None:  # fmt: skip
        self.symbols = symbols  # int64 [B, S]
        self.boundary = boundary  # int64 [B, 4]
        self.frames = frames
        self.blank = blank
        self.rnnt_type = rnnt_type
        self.activation = activation
        self.delay_penalty = delay_penalty
        self.clamp = clamp
        self.emit = emit

    @staticmethod
    def dtype(dtype: tf.DType) -> tf.DType:
        """The dtype the maths runs in: float64 for float64, else float32."""
        return tf.float64 if dtype == tf.float64 else tf.float32

    def used_rows(self, num_frames: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
        """bool [B, T, S + 1]: the cells inside each sequence's boundary."""
        t = tf.range(tf.cast(num_frames, tf.int64))[tf.newaxis, :, tf.newaxis]
        s = tf.range(tf.cast(width, tf.int64))[tf.newaxis, tf.newaxis, :]
        bnd = self.boundary[:, :, tf.newaxis, tf.newaxis]
        return (s >= bnd[:, 0]) & (s <= bnd[:, 2]) & (t >= bnd[:, 1]) & (t < bnd[:, 3])

    def log_probs(
        self,
        encoder: tf.Tensor,
        predictor: tf.Tensor,
        weight: tf.Tensor,
        bias: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """n [B, T, S + 1] normalisers, px [B, S, T (+ 1)] and py [B, S + 1, T].

        The lattice's log-probs (rnnt_type's, delay penalty included; -inf
        outside the boundary), chunk by chunk.
        """
        num_sym = tf.shape(self.symbols)[1]
        num_frames = tf.shape(encoder)[1]
        symbol_index = self.symbols[:, tf.newaxis, :, tf.newaxis]  # [B, 1, S, 1]

        def chunk_logprobs(enc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            """n [B, K, S + 1], px [B, K, S], py [B, K, S + 1] of frames [B, K, J]."""
            logits = _logits(_hidden(enc, predictor, self.activation), weight, bias)
            norm = tf.reduce_logsumexp(logits, axis=3)
            index = tf.broadcast_to(
                symbol_index, tf.concat([tf.shape(logits)[:2], [num_sym, 1]], 0)
            )
            picked = tf.gather(logits[:, :, :-1], index, axis=3, batch_dims=3)
            empty = tf.equal(norm, _NEG_INF)  # a row of -inf logits: no step
            neg_inf = tf.fill(tf.shape(norm), tf.constant(_NEG_INF, norm.dtype))
            px = tf.where(
                empty[:, :, :-1], neg_inf[:, :, :-1], picked[..., 0] - norm[:, :, :-1]
            )
            py = tf.where(empty, neg_inf, logits[..., self.blank] - norm)
            return norm, px, py

        norm, px, py = (
            _from_chunks(x, num_frames)
            for x in tf.map_fn(
                chunk_logprobs,
                _to_chunks(encoder, self.frames),
                fn_output_signature=(encoder.dtype,) * 3,
                parallel_iterations=1,
            )
        )
        # As the op: only the cells inside the boundary provide steps.
        used = self.used_rows(num_frames, tf.shape(predictor)[1])
        neg_inf = tf.constant(_NEG_INF, encoder.dtype)
        px = tf.transpose(tf.where(used[:, :, :-1], px, neg_inf), [0, 2, 1])
        py = tf.transpose(tf.where(used, py, neg_inf), [0, 2, 1])
        if self.rnnt_type == "regular":
            px = tf.pad(px, [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF)
        px, py = _finish_logprobs(px, py, self.boundary, self.rnnt_type)
        px = _add_delay_penalty(px, self.boundary, self.rnnt_type, self.delay_penalty)
        return norm, px, py

    def forward(
        self,
        encoder: tf.Tensor,
        predictor: tf.Tensor,
        weight: tf.Tensor,
        bias: tf.Tensor,
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:
        """scores [B] and what the backward pass needs (n, px_grad, py_grad).

        n: [B, T, S + 1] normalisers; px_grad [B, S, T (+ 1)], py_grad
        [B, S + 1, T]: the occupations of the recursion's steps.
        """
        norm, px, py = self.log_probs(encoder, predictor, weight, bias)
        scores, (px_grad, py_grad) = mutual_information_recursion_tf(
            px, py, self.boundary, return_grad=True
        )
        return scores, (norm, px_grad, py_grad)

    def step_gradients(
        self, px_grad: tf.Tensor, py_grad: tf.Tensor, d_scores: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """gx, gy [B, T, S + 1]: what each cell's symbol and blank logits get.

        The occupations, FastEmit and the constrained lattice's blank folded
        in, times d_scores unless clamped (then it scales after the clamp).
        """
        num_frames = tf.shape(py_grad)[2]
        gx = self.emit * px_grad[:, :, :num_frames]  # [B, S, T]
        gy = py_grad
        if self.rnnt_type == "constrained":
            gy += tf.pad(gx, [[0, 0], [1, 0], [0, 0]])
        gx = tf.pad(gx, [[0, 0], [0, 1], [0, 0]])  # no symbol at s = S
        if self.clamp <= 0:
            gx *= d_scores[:, tf.newaxis, tf.newaxis]
            gy *= d_scores[:, tf.newaxis, tf.newaxis]
        return tf.transpose(gx, [0, 2, 1]), tf.transpose(gy, [0, 2, 1])

    def backward(
        self,
        inputs: tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor],
        saved: tuple[tf.Tensor, tf.Tensor, tf.Tensor],
        d_scores: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Gradients of the inputs (encoder, predictor, weight, bias), chunk by chunk.

        inputs as `forward` took them; saved: what it returned; d_scores [B].
        """
        encoder, predictor, weight, bias = inputs
        dtype = encoder.dtype
        norm, px_grad, py_grad = saved
        d_scores = tf.cast(d_scores, dtype)
        gx, gy = self.step_gradients(px_grad, py_grad, d_scores)
        num_classes = tf.shape(weight)[1]
        # One-hot [B, 1, S + 1, C] of each row's symbol (none for s = S).
        symbol_hot = tf.one_hot(
            tf.pad(self.symbols, [[0, 0], [0, 1]], constant_values=-1),
            num_classes,
            dtype=dtype,
        )[:, tf.newaxis]
        blank_hot = tf.one_hot(self.blank, num_classes, dtype=dtype)
        scale_after = d_scores[:, tf.newaxis, tf.newaxis, tf.newaxis]
        chunks = [_to_chunks(x, self.frames) for x in (gx, gy, norm)]

        def logits_gradient(
            i: tf.Tensor, hidden: tf.Tensor
        ) -> tuple[tf.Tensor, tf.Tensor]:
            """G [B, K, S + 1, C] of chunk i and its used rows [B, K, S + 1, 1]."""
            cgx, cgy, cnorm = (tf.gather(x, i) for x in chunks)
            logits = _logits(hidden, weight, bias)  # [B, K, S + 1, C]
            g = cgx + cgy  # [B, K, S + 1]
            used = tf.not_equal(g, 0)[..., tf.newaxis]  # rows a path uses
            grad = (
                cgx[..., tf.newaxis] * symbol_hot
                + cgy[..., tf.newaxis] * blank_hot
                - g[..., tf.newaxis] * tf.exp(logits - cnorm[..., tf.newaxis])
            )
            if self.clamp > 0:
                grad = tf.clip_by_value(grad, -self.clamp, self.clamp) * scale_after
            return tf.where(used, grad, tf.zeros_like(grad)), used

        return _backward_by_chunks(
            encoder, predictor, weight, bias, self.activation, self.frames,
            logits_gradient,
        )  # fmt: skip


def _backward_by_chunks(
    encoder: tf.Tensor, predictor: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor,
    activation: str, frames: int,
    logits_gradient: Callable[
        [tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor | None]
    ],
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """Gradients of (encoder, predictor, weight, bias) of a joint, chunk by chunk.

    logits_gradient(i, hidden) -> (G, used): the gradient [B, K, S + 1, C]
    of chunk i's logits, given its hidden [B, K, S + 1, J] formed again, and
    the rows [B, K, S + 1, 1] it uses (the others count as zero; None: all). Chunks of
    `frames` frames as `_to_chunks` cuts them; a `tf.while_loop` keeps one
    chunk's hidden alive at a time.
    """
    dtype = encoder.dtype
    num_classes = tf.shape(weight)[1]
    encoder_chunks = _to_chunks(encoder, frames)

    def chunk_gradients(
        i: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """d encoder [B, K, J] of chunk i, its d predictor, d weight, d bias."""
        hidden = _hidden(tf.gather(encoder_chunks, i), predictor, activation)
        grad, used = logits_gradient(i, hidden)
        if used is not None:
            hidden = tf.where(used, hidden, tf.zeros_like(hidden))
        rows = tf.reshape(grad, [-1, num_classes])
        d_weight = tf.matmul(
            tf.reshape(hidden, [-1, tf.shape(hidden)[3]]), rows, transpose_a=True
        )
        d_hidden = tf.reshape(
            tf.matmul(rows, weight, transpose_b=True), tf.shape(hidden)
        )
        slope = _activation_slope(hidden, activation)
        if slope is not None:
            d_hidden *= slope
        if used is not None:
            d_hidden = tf.where(used, d_hidden, tf.zeros_like(d_hidden))
        return (
            tf.reduce_sum(d_hidden, axis=2),
            tf.reduce_sum(d_hidden, axis=1),
            d_weight,
            tf.reduce_sum(rows, axis=0),
        )

    def body(
        i: tf.Tensor,
        d_encoder: tf.TensorArray,
        d_predictor: tf.Tensor,
        d_weight: tf.Tensor,
        d_bias: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.TensorArray, tf.Tensor, tf.Tensor, tf.Tensor]:
        de, dp, dw, db = chunk_gradients(i)
        return (
            i + 1,
            d_encoder.write(i, de),
            d_predictor + dp,
            d_weight + dw,
            d_bias + db,
        )

    num_chunks = tf.shape(encoder_chunks)[0]
    _, d_encoder, d_predictor, d_weight, d_bias = tf.while_loop(
        lambda i, *_: i < num_chunks,
        body,
        (
            tf.constant(0),
            tf.TensorArray(dtype, size=num_chunks),
            tf.zeros_like(predictor),
            tf.zeros_like(weight),
            tf.zeros_like(bias),
        ),
        parallel_iterations=1,
    )
    d_encoder = _from_chunks(d_encoder.stack(), tf.shape(encoder)[1])
    return d_encoder, d_predictor, d_weight, d_bias


def joint_head_logits(
    encoder: TensorLike, predictor: TensorLike, weight: TensorLike, bias: TensorLike,
    activation: str = "tanh", chunk_size: int | None = None,
) -> tf.Tensor:  # fmt: skip
    """act(encoder[b, t] + predictor[b, s]) @ weight + bias, [B, T, S + 1, K].

    The logits of a small head of the joint (K columns, e.g. a TDT model's
    durations), formed a chunk of frames at a time so that the hidden
    [B, T, S + 1, J] never exists whole; the custom gradient forms each
    chunk's hidden again. Only ops XLA compiles; nothing is checked here.

    Args:
      encoder: float [B, T, J].
      predictor: float [B, S + 1, J], encoder's dtype.
      weight: float [J, K].
      bias: float [K].
      activation: "tanh", "relu" or "identity".
      chunk_size: frames per chunk; None chooses one (`chunk_frames`, with
        chunks of HEAD_CHUNK_VALUES values).
    """
    encoder = tf.convert_to_tensor(encoder, name="encoder")
    predictor = tf.convert_to_tensor(predictor, name="predictor")
    weight = tf.convert_to_tensor(weight, name="weight")
    bias = tf.convert_to_tensor(bias, name="bias")
    frames = chunk_frames(chunk_size, encoder, predictor, weight, HEAD_CHUNK_VALUES)

    @tf.custom_gradient
    def head(
        encoder: tf.Tensor, predictor: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor
    ) -> Any:
        def chunk_logits(enc: tf.Tensor) -> tf.Tensor:
            return _logits(_hidden(enc, predictor, activation), weight, bias)

        logits = _from_chunks(
            tf.map_fn(
                chunk_logits,
                _to_chunks(encoder, frames),
                fn_output_signature=encoder.dtype,
                parallel_iterations=1,
            ),
            tf.shape(encoder)[1],
        )

        def backward(d_logits: tf.Tensor) -> tuple[tf.Tensor, ...]:
            grads = _to_chunks(tf.cast(d_logits, encoder.dtype), frames)

            def logits_gradient(i, hidden):
                return tf.gather(grads, i), None

            return _backward_by_chunks(
                encoder, predictor, weight, bias, activation, frames,
                logits_gradient,
            )  # fmt: skip

        return logits, backward

    return head(encoder, predictor, weight, bias)
