# SPDX-License-Identifier: Apache-2.0
"""Context dependencies: DFAs over the output vocabulary (`last.contexts`).

A context dependency's states encode the output history a weight function
may look at. Labels are 1..vocab_size (0 is epsilon / blank: it leaves the
state unchanged). Every state is final.
"""

import abc
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.lattice.semirings import Semiring

_PACKAGE = "tf_transducer"


def _map(fn: Callable[..., Any], value: Any) -> Any:
    return tf.nest.map_structure(fn, value)


class ContextDependency(abc.ABC):
    """The context-dependency interface.

    shape, start, next_state, forward_reduce, backward_broadcast (and
    walk_states, built on next_state).
    """

    @abc.abstractmethod
    def shape(self) -> tuple[int, int]:
        """(num_states, vocab_size)."""

    @abc.abstractmethod
    def start(self) -> int:
        """The start state id."""

    @abc.abstractmethod
    def next_state(self, state: TensorLike, label: TensorLike) -> tf.Tensor:
        """int32 [...] states after label [...] (0: state unchanged)."""

    @abc.abstractmethod
    def forward_reduce(self, weights: Any, semiring: Semiring) -> Any:
        """result[..., q] = semiring sum of weights[..., p, y] over the arcs p -y-> q.

        Shapes: [..., num_states, vocab_size] -> [..., num_states].
        """

    @abc.abstractmethod
    def backward_broadcast(self, weights: Any) -> Any:
        """result[..., p, y] = weights[..., q] for the arc p -y-> q.

        Shapes: [..., num_states] -> [..., num_states, vocab_size].
        """

    def get_config(self) -> dict[str, Any]:
        """The constructor's arguments (Keras serialisation)."""
        raise NotImplementedError(
            f"{type(self).__name__} defines no get_config(): it cannot be saved"
        )

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ContextDependency":
        return cls(**config)

    def walk_states(self, labels: TensorLike) -> tf.Tensor:
        """States along label sequences.

        Args:
          labels: int [..., U] labels in [0, vocab_size].

        Returns:
          int32 [..., U + 1]: the start state, then the state after each label.
        """
        labels = tf.convert_to_tensor(labels)
        _check_labels(labels, self.shape()[1], "labels")
        labels = tf.cast(labels, tf.int32)
        rank = labels.shape.rank
        if rank is None or rank < 1:
            raise ValueError(f"labels must be [..., U], got shape {labels.shape}")
        time_major = tf.transpose(labels, [rank - 1] + list(range(rank - 1)))
        start = tf.fill(tf.shape(labels)[:-1], tf.constant(self.start(), tf.int32))
        # A label 0 first keeps the start state: the scan has U + 1 >= 1 steps
        # (stacking none fails when the other dimensions are unknown).
        time_major = tf.concat([tf.zeros_like(start)[tf.newaxis], time_major], axis=0)
        states = tf.scan(self.next_state, time_major, initializer=start)
        return tf.transpose(states, list(range(1, rank)) + [0])


def _check_labels(labels: tf.Tensor, vocab_size: int, name: str) -> None:
    """Rejects label values outside [0, vocab_size].

    A ValueError when they are known statically, else a run-time assertion.
    """
    value = tf.get_static_value(labels)
    if value is not None:
        value = np.asarray(value)
        bad = sorted(set(value[(value < 0) | (value > vocab_size)].tolist()))
        if bad:
            raise ValueError(
                f"{name} must be in [0, vocab_size={vocab_size}], got {bad[:10]}"
            )
        return
    tf.debugging.assert_less_equal(
        tf.cast(labels, tf.int64),
        tf.cast(vocab_size, tf.int64),
        message=f"{name} must be in [0, vocab_size={vocab_size}]",
    )
    tf.debugging.assert_non_negative(
        labels, message=f"{name} must be in [0, vocab_size={vocab_size}]"
    )


class _TableContext(ContextDependency):
    """A DFA held as next[p, y - 1] (a numpy table known at construction)."""

    def __init__(self, table: np.ndarray) -> None:
        table = np.asarray(table)
        num_states, vocab_size = table.shape
        self._table_np = table.astype(np.int32)
        self._table = tf.constant(self._table_np)
        # Arcs into each state, padded to the largest in-degree with an index
        # past the end (where forward_reduce appends a semiring zero).
        flat_target = self._table_np.reshape(-1)
        order = np.argsort(flat_target, kind="stable")
        counts = np.bincount(flat_target, minlength=num_states)
        width = max(int(counts.max()) if counts.size else 0, 1)
        incoming = np.full((num_states, width), num_states * vocab_size, np.int32)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        for q in range(num_states):
            incoming[q, : counts[q]] = order[starts[q] : starts[q] + counts[q]]
        self._incoming = tf.constant(incoming)

    def shape(self) -> tuple[int, int]:
        return self._table_np.shape

    def next_state(self, state: TensorLike, label: TensorLike) -> tf.Tensor:
        state = tf.cast(state, tf.int32)
        label = tf.cast(label, tf.int32)
        index = tf.stack([state, tf.maximum(label - 1, 0)], axis=-1)
        return tf.where(label > 0, tf.gather_nd(self._table, index), state)

    def next_state_table(self) -> tf.Tensor:
        """int32 [num_states, vocab_size]: next_state_table[p, y - 1]."""
        return self._table

    def forward_reduce(self, weights: Any, semiring: Semiring) -> Any:
        flat = _map(
            lambda w: tf.reshape(w, tf.concat([tf.shape(w)[:-2], [-1]], 0)), weights
        )
        batch = tf.shape(tf.nest.flatten(flat)[0])[:-1]
        pad = semiring.zeros(tf.concat([batch, [1]], 0), _dtypes(flat))
        flat = tf.nest.map_structure(lambda w, z: tf.concat([w, z], -1), flat, pad)
        incoming = _map(lambda w: tf.gather(w, self._incoming, axis=-1), flat)
        return semiring.sum(incoming, axis=-1)

    def backward_broadcast(self, weights: Any) -> Any:
        return _map(lambda w: tf.gather(w, self._table, axis=-1), weights)


def _dtypes(value: Any) -> Any:
    return tf.nest.map_structure(lambda w: w.dtype, value)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NextStateTable(_TableContext):
    """Any DFA, from its table next_state_table[p, y - 1] (int [S, V]).

    The start state is 0.
    """

    def __init__(self, next_state_table: TensorLike) -> None:
        value = tf.get_static_value(tf.convert_to_tensor(next_state_table))
        if value is None:
            raise ValueError("next_state_table must be a constant (numpy) table")
        value = np.asarray(value)
        if value.ndim != 2 or value.shape[0] < 1 or value.shape[1] < 1:
            raise ValueError(
                "next_state_table must be [num_states >= 1, vocab_size >= 1], got "
                f"shape {value.shape}"
            )
        if not np.issubdtype(value.dtype, np.integer):
            raise ValueError(f"next_state_table must be integers, got {value.dtype}")
        bad = value[(value < 0) | (value >= value.shape[0])]
        if bad.size:
            raise ValueError(
                f"next_state_table entries must be states in [0, {value.shape[0]}), "
                f"got {sorted(set(bad.tolist()))[:10]}"
            )
        super().__init__(value)

    def start(self) -> int:
        return 0

    def get_config(self) -> dict[str, Any]:
        return {"next_state_table": self._table_np.tolist()}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class FullNGram(_TableContext):
    """All n-grams up to context_size labels (GNAT section 4.1).

    States are the n-grams of length 0..context_size in lexicographic order
    per length: state 0 is the empty n-gram, 1..V the unigrams (state y for
    label y), then the V^2 bigrams, ...: sum(V^i for i in 0..context_size)
    states. From an n-gram, label y leads to the n-gram with y appended,
    keeping its last context_size labels. Start state: 0.
    """

    def __init__(self, vocab_size: int, context_size: int) -> None:
        for name, value, low in (
            ("vocab_size", vocab_size, 1),
            ("context_size", context_size, 0),
        ):
            if not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        self.vocab_size, self.context_size = int(vocab_size), int(context_size)
        V, N = self.vocab_size, self.context_size
        self._offsets = [sum(V**i for i in range(k)) for k in range(N + 2)]
        table = np.zeros((self._offsets[-1], V), np.int64)
        for k in range(N + 1):
            local = np.arange(V**k)[:, None]
            labels = np.arange(V)[None, :]
            if k < N:  # grow: (h, y) is an n-gram of length k + 1
                target = self._offsets[k + 1] + local * V + labels
            elif N == 0:
                target = np.zeros_like(local + labels)
            else:  # full: drop the oldest label
                target = self._offsets[N] + (local % V ** (N - 1)) * V + labels
            table[self._offsets[k] : self._offsets[k + 1]] = target
        super().__init__(table)

    def start(self) -> int:
        return 0

    def get_config(self) -> dict[str, Any]:
        return {"vocab_size": self.vocab_size, "context_size": self.context_size}

    def forward_reduce(self, weights: Any, semiring: Semiring) -> Any:
        """As ContextDependency.forward_reduce, by n-gram length.

        The arcs into n-grams of length k + 1 < N are one per state (reshape);
        full n-grams also gather the V full n-grams that share their suffix.
        """
        V, N, off = self.vocab_size, self.context_size, self._offsets
        leaves = tf.nest.flatten(weights)
        batch = tf.shape(leaves[0])[:-2]

        def rows(w, k):
            part = w[..., off[k] : off[k + 1], :]
            return tf.reshape(part, tf.concat([batch, [-1]], 0))

        dtypes = _dtypes(weights)
        if N == 0:
            return _map(
                lambda s: s[..., tf.newaxis],
                semiring.sum(_map(lambda w: w[..., 0, :], weights), -1),
            )
        parts = [semiring.zeros(tf.concat([batch, [1]], 0), dtypes)]
        for k in range(N - 1):
            parts.append(_map(lambda w, k=k: rows(w, k), weights))

        def full(w):
            part = w[..., off[N] :, :]
            return tf.reshape(part, tf.concat([batch, [V, V ** (N - 1) * V]], 0))

        from_full = semiring.sum(_map(full, weights), axis=-2)
        into_full = semiring.plus(_map(lambda w: rows(w, N - 1), weights), from_full)
        parts.append(into_full)
        return tf.nest.map_structure(lambda *p: tf.concat(p, axis=-1), *parts)
