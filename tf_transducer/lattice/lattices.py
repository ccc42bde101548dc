# SPDX-License-Identifier: Apache-2.0
"""Recognition lattices in the GNAT formulation (`last.RecognitionLattice`).

The lattice over T frames has a state (t, a, c) for every frame t, frame-
local alignment state a and context state c. A blank arc keeps c; a label
arc c -y-> c' follows the context dependency. Arc weights come from the
weight function at (frame t, context state c). Start: (0, start, start of
the context); final: (T, start, any c).

The sequence loss is -log P(y | x) with

    log P(y | x) = string_forward(y) - log Z

where string_forward sums the paths that spell y, and log Z (all paths) is
0 for a locally normalised weight function (`LocallyNormalizedWeightFn`)
and the Log-semiring forward otherwise. The gradient of log Z is computed
from the forward-backward arc marginals (a custom gradient), not by
differentiating through the time loop: it keeps the forward weights of
each frame ([B, T, C]); by default the arc weights are computed one frame
at a time and again in the backward pass, where the marginals are pulled
back through them (`frame_by_frame`), so nothing else grows with T.

Shapes: frames [B, T, F], num_frames [B], labels [B, U] (in [1, V]; what
lies at or past num_labels is ignored), num_labels [B]; C context states,
V labels, A frame-local alignment states.

Bad values are InvalidArgumentErrors naming the argument (eagerly with the
value and its index, in a graph as assertions, not at all under XLA): a
NaN or inf in frames before num_frames or in a cache passed in, lengths
outside [0, the padded length], labels outside [1, V] before num_labels.
What lies at or past num_frames is ignored: those frames are zeroed before
the weight function sees them, so even a NaN there changes neither the
loss nor any gradient.
"""

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import refuse
from tf_transducer.lattice import partition
from tf_transducer.lattice import semirings
from tf_transducer.lattice.alignments import TimeSyncAlignmentLattice
from tf_transducer.lattice.contexts import ContextDependency
from tf_transducer.lattice.scans import map_leaves
from tf_transducer.lattice.scans import scan
from tf_transducer.lattice.scans import time_major
from tf_transducer.lattice.semirings import Semiring
from tf_transducer.lattice.weight_fns import LocallyNormalizedWeightFn
from tf_transducer.lattice.weight_fns import WeightFn
from tf_transducer.lattice.weight_fns import WeightFnCacher

Lift: TypeAlias = Callable[[tf.Tensor], Any]


def _make(factory: Any, context: ContextDependency, kind: type, name: str) -> Any:
    made = factory if isinstance(factory, kind) else None
    if made is None and callable(factory):
        made = factory(context)
    if not isinstance(made, kind):
        raise ValueError(
            f"{name} must be a {kind.__name__} or a callable that makes one from the "
            f"context dependency, got {factory!r}"
        )
    return made


def _padded(
    values: TensorLike, lengths: TensorLike, name: str, shape: str, kind: str
) -> tuple[tf.Tensor, tf.Tensor]:
    """(values, lengths) as tensors of the rank of `shape` and [B]; else named.

    kind: "float" or "int", the values' dtype family.
    """
    values, lengths = tf.convert_to_tensor(values), tf.convert_to_tensor(lengths)
    if values.shape.rank != shape.count(",") + 1:
        raise ValueError(f"{name} must be {shape}, got shape {values.shape}")
    if kind == "float" and not values.dtype.is_floating:
        raise ValueError(f"{name} must be a float tensor, got {values.dtype.name}")
    if kind == "int" and not values.dtype.is_integer:
        raise ValueError(f"{name} must be integers, got {values.dtype.name}")
    if lengths.shape.rank != 1:
        raise ValueError(f"num_{name} must be [B], got shape {lengths.shape}")
    return values, lengths


def _checked_lengths(lengths: tf.Tensor, padded: tf.Tensor, name: str) -> tf.Tensor:
    """int32 lengths [B], checked against padded.

    They must be integers in [0, padded's axis 1], one per row of padded
    (InvalidArgumentError naming them otherwise).
    """
    if not lengths.dtype.is_integer:
        raise ValueError(f"{name} must be integers, got {lengths.dtype.name}")
    lengths = tf.cast(lengths, tf.int32)
    checks = [
        tf.debugging.assert_equal(
            tf.size(lengths),
            tf.shape(padded)[0],
            message=f"{name} must have one entry per row of the batch",
        ),
        tf.debugging.assert_non_negative(lengths, message=f"{name} must be >= 0"),
        tf.debugging.assert_less_equal(
            lengths,
            tf.shape(padded)[1],
            message=f"{name} must be <= the padded length (axis 1)",
        ),
    ]
    with after(*checks):
        return tf.identity(lengths)


def _finite_frames(frames: tf.Tensor, num_frames: tf.Tensor) -> tf.Tensor:
    """frames [B, T, F] with the padding (t >= num_frames) zeroed.

    A NaN or inf before num_frames is an InvalidArgumentError naming frames;
    what lies in the padding changes nothing, its gradient included.
    """
    valid = tf.range(tf.shape(frames)[1])[None] < num_frames[:, None]  # [B, T]
    valid = tf.broadcast_to(valid[..., None], tf.shape(frames))
    check = refuse(
        valid & ~tf.math.is_finite(frames),
        frames,
        "frames must be finite (no NaN or inf) before num_frames",
    )
    with after(check):
        return tf.where(valid, frames, tf.zeros_like(frames))


def _finite_cache(cache: Any) -> Any:
    """A cache passed in, its float tensors checked: no NaN or inf."""
    checks = []
    for leaf in tf.nest.flatten(cache):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and tf.as_dtype(dtype).is_floating:
            leaf = tf.convert_to_tensor(leaf)
            checks.append(
                refuse(~tf.math.is_finite(leaf), leaf, "cache must be finite")
            )
    if all(c is None for c in checks):
        return cache
    with after(*checks):
        return map_leaves(lambda c: c if c is None else tf.identity(c), cache)


def _lift_for(semiring: Semiring, lift: Lift | None) -> Lift:
    if lift is not None:
        return lift
    if semiring is semirings.Real:
        return tf.exp
    if semiring in (semirings.Log, semirings.MaxTropical):
        return lambda w: w
    raise ValueError(
        f"give lift= (a function from log weights to {semiring!r} values) to run "
        f"the forward algorithm in {semiring!r}"
    )


@keras.saving.register_keras_serializable(package="tf_transducer")
class RecognitionLattice(keras.layers.Layer):
    """A recognition lattice: context dependency x alignment lattice.

    Its arc weights come from a weight function (a Keras layer).

    Calling the layer gives the loss -log P(labels | frames) [B].

    Args:
      context: a ContextDependency (e.g. `FullNGram(vocab_size, 2)`).
      alignment: a TimeSyncAlignmentLattice (`FrameDependent()`, ...).
      weight_fn_cacher_factory: a WeightFnCacher, or a callable making one
        from the context (e.g. `lambda c: SharedEmbCacher(c.shape()[0], 32)`).
      weight_fn_factory: a WeightFn, or a callable making one from the context.
      frame_by_frame: for the global denominator, run the weight function one
        frame at a time, and again in the backward pass (as LAST does), so
        that a loss step's memory does not hold the weight function's
        activations of every frame (0.07x the peak at T = 200 in
        benchmarks/BENCHMARKS.md, for 1.2x the time). False runs it on all
        frames at once: faster for short inputs.
    """

    def __init__(
        self,
        context: ContextDependency | dict[str, Any],
        alignment: TimeSyncAlignmentLattice | dict[str, Any],
        weight_fn_cacher_factory: WeightFnCacher
        | Callable[[ContextDependency], WeightFnCacher]
        | dict[str, Any],
        weight_fn_factory: WeightFn
        | Callable[[ContextDependency], WeightFn]
        | dict[str, Any],
        frame_by_frame: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.frame_by_frame = bool(frame_by_frame)
        # A saved lattice comes back as the configs of its parts.
        parts: tuple[Any, ...] = (
            context,
            alignment,
            weight_fn_cacher_factory,
            weight_fn_factory,
        )
        context, alignment, weight_fn_cacher_factory, weight_fn_factory = (
            keras.saving.deserialize_keras_object(part)
            if isinstance(part, dict)
            else part
            for part in parts
        )
        if not isinstance(context, ContextDependency):
            raise ValueError(f"context must be a ContextDependency, got {context!r}")
        if not isinstance(alignment, TimeSyncAlignmentLattice):
            raise ValueError(
                f"alignment must be a TimeSyncAlignmentLattice, got {alignment!r}"
            )
        self.context, self.alignment = context, alignment
        self.weight_fn_cacher = _make(
            weight_fn_cacher_factory,
            context,
            WeightFnCacher,
            "weight_fn_cacher_factory",
        )
        self.weight_fn = _make(
            weight_fn_factory, context, WeightFn, "weight_fn_factory"
        )
        self.num_context_states, self.vocab_size = context.shape()

    def build(self, frames_shape: Sequence[int | None], *unused_shapes: Any) -> None:
        """Builds the cacher and the weight function for frames [..., F].

        The weight function is called on symbolic frames [None, F]: no
        batch is made up, so one that holds per-batch data (a
        `TableWeightFn` of [B, I, C, 1 + V]) builds too. Only the cacher,
        which takes no data, runs.
        """
        if not self.weight_fn.built or not self.weight_fn_cacher.built:
            cache = map_leaves(
                lambda c: c if c is None else keras.KerasTensor(c.shape, c.dtype),
                self.build_cache(),
            )
            frame = keras.KerasTensor([None, frames_shape[-1]], self.compute_dtype)
            self.weight_fn(cache, frame)
        self.built = True

    def get_config(self) -> dict[str, Any]:
        """The parts' configs.

        A lattice made from factories is saved as the layers they made
        (factories themselves are not saved).
        """
        config = super().get_config()
        config.update(
            context=keras.saving.serialize_keras_object(self.context),
            alignment=keras.saving.serialize_keras_object(self.alignment),
            weight_fn_cacher_factory=keras.saving.serialize_keras_object(
                self.weight_fn_cacher
            ),
            weight_fn_factory=keras.saving.serialize_keras_object(self.weight_fn),
            frame_by_frame=self.frame_by_frame,
        )
        return config

    @property
    def locally_normalized(self) -> bool:
        return isinstance(self.weight_fn, LocallyNormalizedWeightFn)

    def build_cache(self) -> Any:
        """The weight function's cache (computed once; pass it as cache=)."""
        return self.weight_fn_cacher(None)

    # ----------------------------------------------------------------- checks
    def _check(
        self,
        frames: TensorLike,
        num_frames: TensorLike,
        labels: TensorLike | None = None,
        num_labels: TensorLike | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None, tf.Tensor | None]:
        frames, num_frames = _padded(frames, num_frames, "frames", "[B, T, F]", "float")
        shapes = {"frames": frames.shape[0], "num_frames": num_frames.shape[0]}
        if labels is not None:
            labels, num_labels = _padded(labels, num_labels, "labels", "[B, U]", "int")
            shapes.update(labels=labels.shape[0], num_labels=num_labels.shape[0])
        known = {k: v for k, v in shapes.items() if v is not None}
        if len(set(known.values())) > 1:
            raise ValueError(f"batch sizes differ: {known}")
        num_frames = _checked_lengths(num_frames, frames, "num_frames")
        frames = _finite_frames(frames, num_frames)
        if labels is None:
            return frames, num_frames, None, None
        num_labels = _checked_lengths(num_labels, labels, "num_labels")
        rows = tf.debugging.assert_equal(
            tf.shape(labels)[0],
            tf.shape(frames)[0],
            message="labels must have one row per row of frames (the batch)",
        )
        with after(rows):
            labels = tf.cast(labels, tf.int32)
        valid = tf.range(tf.shape(labels)[1])[None] < num_labels[:, None]
        wrong = valid & ((labels < 1) | (labels > self.vocab_size))
        where = f"labels must be in [1, vocab_size={self.vocab_size}] before num_labels"
        value, wrong_value = tf.get_static_value(labels), tf.get_static_value(wrong)
        if value is not None and wrong_value is not None:
            bad = sorted(set(value[wrong_value].tolist()))
            if bad:
                raise ValueError(f"{where}, got {bad[:10]}")
            check = None
        else:
            check = refuse(wrong, labels, where)
        with after(check):
            labels = tf.where(valid, labels, 0)
        return frames, num_frames, labels, num_labels

    # -------------------------------------------------------------- forward
    def _weights(self, frames, cache, state=None):
        if cache is None:
            cache = self.build_cache()
        blank, lexical = self.weight_fn(cache, frames, state)
        states = self.num_context_states if state is None else state.shape[-1]
        want = (states, self.vocab_size)
        got = (blank.shape[-1], *lexical.shape[-2:])
        if None not in got and got != (want[0], *want):
            raise ValueError(
                f"{type(self.weight_fn).__name__} gives blank weights [..., "
                f"{got[0]}] and lexical weights [..., {got[1]}, {got[2]}]; the "
                f"lattice needs [..., {want[0]}] and [..., {want[0]}, {want[1]}] "
                f"({want[0]} context states, vocab_size {want[1]})"
            )
        return blank, lexical

    @staticmethod
    def _start(batch, width, semiring, dtype, index=0):
        """[batch, width] semiring values: one at index, zero elsewhere."""
        one = semiring.ones([batch, width], dtype)
        zero = semiring.zeros([batch, width], dtype)
        at = tf.range(width)[None] == index
        return map_leaves(lambda o, z: tf.where(at, o, z), one, zero)

    def _scan(self, step, alpha0, weights, num_frames, keep_all=False):
        """alpha after every frame (time-major) from a per-frame step."""
        total = tf.shape(tf.nest.flatten(weights)[0])[1]
        valid = tf.range(total)[:, None] < num_frames[None]  # [T, B]

        def body(alpha, inputs):
            w, ok = inputs
            new = step(alpha, w)
            return map_leaves(lambda n, a: tf.where(ok[:, None], n, a), new, alpha)

        alphas = scan(body, (time_major(weights), valid), alpha0)
        if keep_all:
            return alphas
        return map_leaves(
            lambda a, a0: tf.cond(total > 0, lambda: a[-1], lambda: a0), alphas, alpha0
        )

    def forward(
        self, frames: TensorLike, num_frames: TensorLike,
        semiring: Semiring = semirings.Log, cache: Any = None, lift: Lift | None = None,
    ) -> Any:  # fmt: skip
        """The sum of all paths' weights in `semiring`: [B].

        lift maps log weights to semiring values (default: exp for Real, the
        identity for Log and MaxTropical; needed for the others).
        """
        frames, num_frames, _, _ = self._check(frames, num_frames)
        cache = _finite_cache(cache)
        lift = _lift_for(semiring, lift)
        blank, lexical = self._weights(frames, cache)
        blank, lexical = lift(blank), lift(lexical)
        alpha = self._forward_alpha(blank, lexical, num_frames, semiring)
        return semiring.sum(alpha, axis=-1)

    def _forward_alpha(self, blank, lexical, num_frames, semiring, keep_all=False):
        n = self.alignment.num_states()
        leaf = tf.nest.flatten(blank)[0]
        alpha0 = self._start_context(tf.shape(leaf)[0], semiring, leaf.dtype)

        def step(alpha, w):
            b, lex = w
            return self.alignment.forward(
                alpha, [b] * n, [lex] * n, self.context, semiring
            )

        return self._scan(step, alpha0, (blank, lexical), num_frames, keep_all)

    def _start_context(self, batch, semiring, dtype):
        """[batch, C]: one at the context's start state, zero elsewhere."""
        return self._start(
            batch, self.num_context_states, semiring, dtype, self.context.start()
        )

    def string_forward(
        self, frames: TensorLike, num_frames: TensorLike, labels: TensorLike,
        num_labels: TensorLike, semiring: Semiring = semirings.Log, cache: Any = None,
        lift: Lift | None = None,
    ) -> Any:  # fmt: skip
        """The sum of the weights of the paths that spell labels: [B]."""
        checked = self._check(frames, num_frames, labels, num_labels)
        cache = _finite_cache(cache)
        return self._string_forward(*checked, semiring, cache, lift)

    def _string_forward(
        self, frames, num_frames, labels, num_labels, semiring, cache, lift
    ):
        """string_forward on checked inputs."""
        blank, lexical = self._string_weights(frames, labels, num_labels, cache)
        lift = _lift_for(semiring, lift)
        blank, lexical = lift(blank), lift(lexical)
        n = self.alignment.num_states()
        leaf = tf.nest.flatten(blank)[0]
        alpha0 = self._start(
            tf.shape(labels)[0], tf.shape(labels)[1] + 1, semiring, leaf.dtype
        )

        def step(alpha, w):
            b, lex = w
            return self.alignment.string_forward(alpha, [b] * n, [lex] * n, semiring)

        alpha = self._scan(step, alpha0, (blank, lexical), num_frames)
        return map_leaves(lambda a: tf.gather(a, num_labels, batch_dims=1), alpha)

    def _string_weights(
        self, frames: tf.Tensor, labels: tf.Tensor, num_labels: tf.Tensor, cache: Any
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Log weights [B, T, U + 1] of the string's states.

        (blank, the label that follows each state, -inf at and past num_labels).
        """
        states = self.context.walk_states(labels)  # [B, U + 1]
        steps = tf.shape(frames)[1]
        states_bt = tf.broadcast_to(
            states[:, None], tf.stack([tf.shape(states)[0], steps, tf.shape(states)[1]])
        )
        blank, lexical = self._weights(frames, cache, states_bt)
        following = tf.pad(labels, [[0, 0], [0, 1]])  # [B, U + 1]
        following = tf.broadcast_to(following[:, None], tf.shape(states_bt))
        picked = tf.gather(lexical, tf.maximum(following - 1, 0), batch_dims=3)
        has_next = (
            tf.range(tf.shape(following)[2])[None, None] < num_labels[:, None, None]
        )
        picked = tf.where(has_next, picked, float("-inf"))
        return blank, picked

    # ---------------------------------------------------------------- loss
    def __call__(
        self, frames: TensorLike, num_frames: TensorLike, labels: TensorLike,
        num_labels: TensorLike, cache: Any = None, **kwargs: Any,
    ) -> tf.Tensor:  # fmt: skip
        # Keras wants tensors as positional arguments: lists of lengths are fine.
        args = [
            tf.convert_to_tensor(a) if isinstance(a, (list, tuple, np.ndarray)) else a
            for a in (frames, num_frames, labels, num_labels)
        ]
        return super().__call__(*args, cache=cache, **kwargs)

    def call(
        self, frames: TensorLike, num_frames: TensorLike, labels: TensorLike,
        num_labels: TensorLike, cache: Any = None,
    ) -> tf.Tensor:  # fmt: skip
        """-log P(labels | frames): [B]."""
        frames, num_frames, labels, num_labels = self._check(
            frames, num_frames, labels, num_labels
        )
        cache = self.build_cache() if cache is None else _finite_cache(cache)
        numerator = self._string_forward(
            frames, num_frames, labels, num_labels, semirings.Log, cache, None
        )
        if self.locally_normalized:
            return -numerator
        if self.frame_by_frame:
            return (
                partition.log_partition_by_frame(self, frames, num_frames, cache)
                - numerator
            )
        blank, lexical = self._weights(frames, cache)
        return partition.log_partition(self, blank, lexical, num_frames) - numerator

    def backward(
        self, frames: TensorLike, num_frames: TensorLike, cache: Any = None
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Arc marginals of the Log-semiring lattice.

        Returns:
          (log_z [B], blank marginals [B, T, A, C], lexical marginals
          [B, T, A, C, V]): the probability of taking each arc (blank at
          (t, a, c); label y + 1 at (t, a, c)) among all paths; summed over
          A they are the gradients of log_z with respect to the weights.
        """
        frames, num_frames, _, _ = self._check(frames, num_frames)
        cache = _finite_cache(cache)
        blank, lexical = self._weights(frames, cache)
        log_z, alphas = partition.log_z_and_alphas(self, blank, lexical, num_frames)
        _, blank_m, lexical_m = partition.marginals(
            self, blank, lexical, num_frames, alphas, log_z
        )
        return log_z, blank_m, lexical_m

    # -------------------------------------------------------- shortest path
    def shortest_path(
        self, frames: TensorLike, num_frames: TensorLike, cache: Any = None
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """The best path (max-tropical): its alignment labels and weight.

        Returns:
          (alignment_labels int32 [B, T * A]: 0 for a blank, 1..V for a label,
          in path order, padded with 0; num_alignment_labels int32 [B];
          path_weights [B]).
        """
        frames, num_frames, _, _ = self._check(frames, num_frames)
        cache = _finite_cache(cache)
        blank, lexical = self._weights(frames, cache)
        blank, lexical = tf.stop_gradient(blank), tf.stop_gradient(lexical)
        n = self.alignment.num_states()
        maxt = semirings.MaxTropical
        # One copy of the weights per frame-local state: the gradient of the
        # best path's weight then marks which arc each state took.
        per_state_blank = tf.stack([blank] * n, axis=2)  # [B, T, A, C]
        per_state_lexical = tf.stack([lexical] * n, axis=2)  # [B, T, A, C, V]
        alpha0 = self._start_context(tf.shape(blank)[0], maxt, blank.dtype)

        def step(alpha, w):
            b, lex = w
            return self.alignment.forward(
                alpha, tf.unstack(b, n, axis=1), tf.unstack(lex, n, axis=1),
                self.context, maxt,
            )  # fmt: skip

        with tf.GradientTape() as tape:
            tape.watch([per_state_blank, per_state_lexical])
            alpha = self._scan(
                step, alpha0, (per_state_blank, per_state_lexical), num_frames
            )
            weights = maxt.sum(alpha, axis=-1)
        used_blank, used_lexical = tape.gradient(
            weights,
            [per_state_blank, per_state_lexical],
            unconnected_gradients=tf.UnconnectedGradients.ZERO,  # T = 0
        )
        took_blank = tf.reduce_sum(used_blank, axis=-1) > 0.5  # [B, T, A]
        flat = tf.reshape(
            used_lexical, tf.concat([tf.shape(used_lexical)[:3], [-1]], 0)
        )
        took_label = tf.reduce_sum(flat, axis=-1) > 0.5
        label = tf.cast(tf.argmax(flat, axis=-1), tf.int32) % self.vocab_size + 1
        slots = tf.where(took_label, label, tf.where(took_blank, 0, -1))
        slots = tf.reshape(slots, [tf.shape(slots)[0], -1])  # [B, T * A]
        used = slots >= 0
        width = tf.shape(slots)[1]
        position = tf.range(width)[None]
        order = tf.argsort(
            tf.where(used, position, position + width), axis=1, stable=True
        )
        packed = tf.gather(slots, order, batch_dims=1)
        count = tf.reduce_sum(tf.cast(used, tf.int32), axis=1)
        packed = tf.where(position < count[:, None], packed, 0)
        return packed, count, weights
