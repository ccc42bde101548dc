# SPDX-License-Identifier: Apache-2.0
"""Time-synchronous alignment lattices (`last.alignments`).

A frame-local alignment lattice is a small acyclic automaton over two
kinds of arcs, "blank" and "lexical", with one final state; the alignment
lattice repeats it once per frame, its final state being the next frame's
start. `FrameDependent`: each frame takes one blank or one label.
`FrameLabelDependent(k)`: each frame takes up to k labels, then a blank.

Each method advances by one frame. Weights come per non-final frame-local
state a (lists of num_states() entries): `blank[a]` `[..., C]` and
`lexical[a]` `[..., C, V]` over the context states C (or, for
`string_forward`, over the U + 1 states of one label string,
`lexical[a][..., u]` being the weight of emitting label u + 1). A state
without a lexical arc ignores its entry.
"""

import abc
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer.lattice import semirings
from tf_transducer.lattice.contexts import ContextDependency
from tf_transducer.lattice.semirings import Semiring


def _expand(value: Any, axis: int = -1) -> Any:
    return tf.nest.map_structure(lambda v: tf.expand_dims(v, axis), value)


def shift_down(x: Any, semiring: Semiring) -> Any:
    """output[..., i + 1] = x[..., i]; output[..., 0] = the semiring zero."""

    def shift(v, zero):
        return tf.concat([zero, v[..., :-1]], axis=-1)

    leaves = tf.nest.flatten(x)
    shape = tf.concat([tf.shape(leaves[0])[:-1], [1]], 0)
    zero = semiring.zeros(shape, tf.nest.map_structure(lambda v: v.dtype, x))
    return tf.nest.map_structure(shift, x, zero)


def check_num_weights(
    alignment: "TimeSyncAlignmentLattice",
    blank: Sequence[Any],
    lexical: Sequence[Any],
) -> None:
    """ValueError unless blank and lexical have one entry per alignment state."""
    n = alignment.num_states()
    if len(blank) != n or len(lexical) != n:
        raise ValueError(
            f"{type(alignment).__name__} has {n} frame-local states: give {n} blank "
            f"and {n} lexical weights, got {len(blank)} and {len(lexical)}"
        )


class TimeSyncAlignmentLattice(abc.ABC):
    """The interface of time-synchronous alignment lattices."""

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (Keras serialisation)."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "TimeSyncAlignmentLattice":
        return cls(**config)

    @abc.abstractmethod
    def num_states(self) -> int:
        """Non-final frame-local states."""

    @abc.abstractmethod
    def start(self) -> int:
        """The frame-local start state."""

    @abc.abstractmethod
    def blank_next(self, state: int) -> int | None:
        """State after a blank from state.

        None (no arc), start() when the arc ends the frame, or another
        frame-local state.
        """

    @abc.abstractmethod
    def lexical_next(self, state: int) -> int | None:
        """State after a label from state (as blank_next)."""

    @abc.abstractmethod
    def topological_visit(self) -> list[int]:
        """The non-final frame-local states in topological order."""

    def forward(
        self, alpha: Any, blank: Sequence[Any], lexical: Sequence[Any],
        context: ContextDependency, semiring: Semiring,
    ) -> Any:  # fmt: skip
        """One frame of the forward algorithm over the recognition lattice.

        Args:
          alpha: [..., C] weights of (frame start, context state).
          blank: per frame-local state, [..., C].
          lexical: per frame-local state, [..., C, V].
          context: the ContextDependency.
          semiring: the semiring to sum paths in.

        Returns:
          [..., C] weights of the next frame's start states.
        """
        return self._sweep(
            alpha,
            blank,
            lexical,
            semiring,
            lambda w, lex: context.forward_reduce(
                semiring.times(_expand(w), lex), semiring
            ),
        )

    def string_forward(
        self,
        alpha: Any,
        blank: Sequence[Any],
        lexical: Sequence[Any],
        semiring: Semiring,
    ) -> Any:
        """One frame of the forward algorithm over the lattice and one label string.

        The lattice is intersected with the label string (a chain of U + 1
        context states).

        Args:
          alpha: [..., U + 1].
          blank: per frame-local state, [..., U + 1].
          lexical: per frame-local state, [..., U + 1].
          semiring: the semiring to sum paths in.

        Returns:
          [..., U + 1] weights after the frame.
        """
        return self._sweep(
            alpha,
            blank,
            lexical,
            semiring,
            lambda w, lex: shift_down(semiring.times(w, lex), semiring),
        )

    def _sweep(
        self, alpha: Any, blank: Sequence[Any], lexical: Sequence[Any],
        semiring: Semiring, emit: Callable[[Any, Any], Any],
    ) -> Any:  # fmt: skip
        """Pushes alpha through the frame-local states in topological order."""
        check_num_weights(self, blank, lexical)
        start = self.start()
        at: dict[int, Any] = {start: alpha}
        out: dict[int, Any] = {}

        def add(state, value):
            table = out if state == start else at
            key = 0 if state == start else state
            table[key] = value if key not in table else semiring.plus(table[key], value)

        for a in self.topological_visit():
            if a not in at:
                continue
            w = at.pop(a)
            if self.blank_next(a) is not None:
                add(self.blank_next(a), semiring.times(w, blank[a]))
            if self.lexical_next(a) is not None:
                add(self.lexical_next(a), emit(w, lexical[a]))
        return out[0]

    def backward(
        self, alpha: tf.Tensor, blank: Sequence[tf.Tensor],
        lexical: Sequence[tf.Tensor], beta: tf.Tensor, log_z: tf.Tensor,
        context: ContextDependency,
    ) -> tuple[tf.Tensor, list[tf.Tensor], list[tf.Tensor]]:  # fmt: skip
        """One frame of the backward algorithm (Log semiring): arc marginals.

        Args:
          alpha: [..., C] forward weights of this frame's start states.
          blank: per frame-local state, [..., C].
          lexical: per frame-local state, [..., C, V].
          beta: [..., C] backward weights of the next frame's start states.
          log_z: [...] the log sum of all paths.
          context: the ContextDependency.

        Returns:
          (beta of this frame's start states [..., C], blank marginals per
          frame-local state [..., C], lexical marginals per state [..., C, V]),
          the marginals being probabilities of taking each arc.
        """
        check_num_weights(self, blank, lexical)
        log = semirings.Log
        start, order = self.start(), self.topological_visit()
        nowhere = log.zeros(tf.shape(alpha), alpha.dtype)

        def add(table, state, value):
            table[state] = (
                value if state not in table else log.plus(table[state], value)
            )

        # Forward weights of the frame-local states inside this frame.
        fwd = {start: alpha}
        for a in order:
            w = fwd.get(a, nowhere)
            if self.blank_next(a) not in (None, start):
                add(fwd, self.blank_next(a), w + blank[a])
            if self.lexical_next(a) not in (None, start):
                lex = context.forward_reduce(w[..., None] + lexical[a], log)
                add(fwd, self.lexical_next(a), lex)

        # Backward weights, in reverse topological order.
        bwd: dict[int, tf.Tensor] = {}

        def after(state):
            return beta if state == start else bwd.get(state, nowhere)

        for a in reversed(order):
            value = nowhere
            if self.blank_next(a) is not None:
                value = log.plus(value, blank[a] + after(self.blank_next(a)))
            if self.lexical_next(a) is not None:
                into = context.backward_broadcast(after(self.lexical_next(a)))
                value = log.plus(value, log.sum(lexical[a] + into, axis=-1))
            bwd[a] = value

        finite = tf.math.is_finite(log_z)[..., None]
        safe_z = tf.where(finite, log_z[..., None], tf.zeros_like(log_z[..., None]))

        def probability(logw, extra_dims):
            f, z = finite, safe_z
            for _ in range(extra_dims):
                f, z = f[..., None], z[..., None]
            return tf.where(f, tf.exp(logw - z), tf.zeros_like(logw))

        blank_marginals, lexical_marginals = [], []
        for a in range(self.num_states()):
            w = fwd.get(a, nowhere)
            if self.blank_next(a) is None:
                blank_marginals.append(tf.zeros_like(blank[a]))
            else:
                blank_marginals.append(
                    probability(w + blank[a] + after(self.blank_next(a)), 0)
                )
            if self.lexical_next(a) is None:
                lexical_marginals.append(tf.zeros_like(lexical[a]))
            else:
                into = context.backward_broadcast(after(self.lexical_next(a)))
                lexical_marginals.append(
                    probability(w[..., None] + lexical[a] + into, 1)
                )
        return bwd[start], blank_marginals, lexical_marginals


@keras.saving.register_keras_serializable(package="tf_transducer")
class FrameDependent(TimeSyncAlignmentLattice):
    """Each frame is aligned to one blank or one label."""

    def num_states(self) -> int:
        return 1

    def start(self) -> int:
        return 0

    def blank_next(self, state: int) -> int | None:
        return 0

    def lexical_next(self, state: int) -> int | None:
        return 0

    def topological_visit(self) -> list[int]:
        return [0]

    def __repr__(self) -> str:
        return "FrameDependent()"


@keras.saving.register_keras_serializable(package="tf_transducer")
class FrameLabelDependent(TimeSyncAlignmentLattice):
    """Each frame is aligned to up to max_expansions labels, then a blank.

    Frame-local state i has taken i labels in this frame; from it a blank
    ends the frame, a label (if i < max_expansions) leads to i + 1.
    """

    def __init__(self, max_expansions: int) -> None:
        if not isinstance(max_expansions, int) or max_expansions < 1:
            raise ValueError(
                f"max_expansions must be an int >= 1, got {max_expansions!r}"
            )
        self.max_expansions = max_expansions

    def num_states(self) -> int:
        return self.max_expansions + 1

    def start(self) -> int:
        return 0

    def blank_next(self, state: int) -> int | None:
        return 0

    def lexical_next(self, state: int) -> int | None:
        return state + 1 if state < self.max_expansions else None

    def get_config(self) -> dict[str, Any]:
        return {"max_expansions": self.max_expansions}

    def topological_visit(self) -> list[int]:
        return list(range(self.num_states()))

    def __repr__(self) -> str:
        return f"FrameLabelDependent(max_expansions={self.max_expansions})"
