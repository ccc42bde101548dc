# SPDX-License-Identifier: Apache-2.0
"""Weight functions: arc weights of a recognition lattice (`last.weight_fns`).

A `WeightFn` maps one frame (or a stack of frames) and the context states
to arc weights; a `WeightFnCacher` computes what a weight function needs
that does not depend on the frames (e.g. a context embedding table), once
per batch. Both are Keras layers.

    cache = cacher(None)
    blank, lexical = weight_fn(cache, frame)          # every context state
    blank, lexical = weight_fn(cache, frame, state)   # chosen states

frame: [..., F]; all states: blank [..., C], lexical [..., C, V]; with
state int [..., K]: blank [..., K], lexical [..., K, V]. Weights are log
weights (Log / MaxTropical semirings).
"""

from collections.abc import Callable
from typing import Any
from typing import TypeAlias

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import refuse
from tf_transducer._checks import with_attributes

_PACKAGE = "tf_transducer"
Normalizer: TypeAlias = Callable[[TensorLike, TensorLike], tuple[tf.Tensor, tf.Tensor]]


def _select_states(weights: tf.Tensor, state: TensorLike | None) -> tf.Tensor:
    """weights [..., C, X] at state [..., K] -> [..., K, X]."""
    if state is None:
        return weights
    state = tf.convert_to_tensor(state, tf.int32)
    rank = state.shape.rank
    return tf.gather(weights, state, axis=rank - 1, batch_dims=rank - 1)


def _check_sizes(**minimum_and_value: tuple[int, Any]) -> None:
    """ValueError unless each value is an int >= its minimum: name=(low, value)."""
    for name, (low, value) in minimum_and_value.items():
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def hat_normalize(
    blank: TensorLike, lexical: TensorLike
) -> tuple[tf.Tensor, tf.Tensor]:
    """HAT's local normalisation: P(blank) = sigmoid(blank), labels share the rest.

    The labels share it by a softmax:
    log P(y) = log(1 - sigmoid(blank)) + log_softmax(lexical)_y.

    Args:
      blank: [...] blank weights.
      lexical: [..., V] label weights.

    Returns:
      normalised (blank [...], lexical [..., V]) log-probabilities.
    """
    blank = tf.convert_to_tensor(blank)
    lexical = tf.convert_to_tensor(lexical, blank.dtype)
    not_blank = tf.math.log_sigmoid(-blank)
    return tf.math.log_sigmoid(blank), not_blank[..., None] + tf.nn.log_softmax(
        lexical, axis=-1
    )


def log_softmax_normalize(
    blank: TensorLike, lexical: TensorLike
) -> tuple[tf.Tensor, tf.Tensor]:
    """One log-softmax over [blank, labels]: (blank [...], lexical [..., V])."""
    blank = tf.convert_to_tensor(blank)
    lexical = tf.convert_to_tensor(lexical, blank.dtype)
    both = tf.nn.log_softmax(tf.concat([blank[..., None], lexical], axis=-1), axis=-1)
    return both[..., 0], both[..., 1:]


_NORMALIZERS: dict[str, Normalizer] = {
    "hat": hat_normalize,
    "log_softmax": log_softmax_normalize,
}


class WeightFnCacher(keras.layers.Layer):
    """Interface: `call(inputs=None)` returns the cache (call it as `cacher(None)`)."""

    def call(self, inputs: Any = None) -> Any:
        raise NotImplementedError


class WeightFn(keras.layers.Layer):
    """Interface: `call(cache, frame, state=None)` returns (blank, lexical)."""

    def call(
        self, cache: Any, frame: TensorLike, state: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        raise NotImplementedError


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NullCacher(WeightFnCacher):
    """A cacher with nothing to cache (for TableWeightFn)."""

    def call(self, inputs: Any = None) -> None:
        return None


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SharedEmbCacher(WeightFnCacher):
    """A trained embedding per context state: [num_context_states, embedding_size]."""

    def __init__(
        self, num_context_states: int, embedding_size: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        _check_sizes(
            num_context_states=(1, num_context_states),
            embedding_size=(1, embedding_size),
        )
        self.num_context_states = num_context_states
        self.embedding_size = embedding_size

    def build(self, input_shape: Any = None) -> None:
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_context_states, self.embedding_size),
            initializer=keras.initializers.RandomNormal(stddev=1.0),
        )

    def call(self, inputs: Any = None) -> tf.Tensor:
        return tf.convert_to_tensor(self.embeddings)

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "num_context_states", "embedding_size"
        )


def ngram_context_labels(vocab_size: int, context_size: int) -> np.ndarray:
    """int32 [num_states, max(context_size, 1)]: each FullNGram state's labels.

    The labels are oldest first, left-padded with 0 (the sentence start).
    """
    width = max(context_size, 1)
    rows = [np.zeros([1, width], np.int32)]
    for k in range(1, context_size + 1):
        grams = np.stack(
            np.meshgrid(*[np.arange(1, vocab_size + 1)] * k, indexing="ij"), -1
        ).reshape(-1, k)
        rows.append(
            np.concatenate([np.zeros([len(grams), width - k], np.int32), grams], 1)
        )
    return np.concatenate(rows).astype(np.int32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SharedRNNCacher(WeightFnCacher):
    """Context embeddings from an RNN over each n-gram state's labels.

    For `FullNGram(vocab_size, context_size)`: every state's labels (left
    padded with the start id 0) are embedded (rnn_embedding_size) and run
    through `rnn_cell` (default an LSTM cell of rnn_size units); the last
    output is the state's embedding: [num_states, rnn_size], all states at
    once.
    """

    def __init__(
        self, vocab_size: int, context_size: int, rnn_size: int,
        rnn_embedding_size: int,
        rnn_cell: keras.layers.Layer | dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        _check_sizes(
            vocab_size=(1, vocab_size),
            context_size=(0, context_size),
            rnn_size=(1, rnn_size),
            rnn_embedding_size=(1, rnn_embedding_size),
        )
        self.vocab_size, self.context_size = vocab_size, context_size
        self.rnn_size, self.rnn_embedding_size = rnn_size, rnn_embedding_size
        if isinstance(rnn_cell, dict):
            rnn_cell = keras.saving.deserialize_keras_object(rnn_cell)
        self.rnn_cell = rnn_cell or keras.layers.LSTMCell(rnn_size)
        self.embedding = keras.layers.Embedding(vocab_size + 1, rnn_embedding_size)
        self.rnn = keras.layers.RNN(self.rnn_cell)
        self._labels = ngram_context_labels(vocab_size, context_size)

    def build(self, input_shape: Any = None) -> None:
        self.embedding.build((None, None))
        self.rnn.build((None, self._labels.shape[1], self.rnn_embedding_size))

    def call(self, inputs: Any = None) -> tf.Tensor:
        return self.rnn(self.embedding(tf.constant(self._labels)))

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            context_size=self.context_size,
            rnn_size=self.rnn_size,
            rnn_embedding_size=self.rnn_embedding_size,
            rnn_cell=keras.saving.serialize_keras_object(self.rnn_cell),
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class JointWeightFn(WeightFn):
    """A joiner: frame and context embedding to 1 + vocab_size weights (blank first).

    Each embedding is projected to hidden_size; they are added, go through
    tanh, then are projected to the 1 + vocab_size weights.

    The cache is a context embedding table [C, E] (`SharedEmbCacher`,
    `SharedRNNCacher`, or any cacher that makes one).
    """

    def __init__(self, vocab_size: int, hidden_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _check_sizes(vocab_size=(1, vocab_size), hidden_size=(1, hidden_size))
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.frame_projection = keras.layers.Dense(hidden_size, name="frame")
        self.context_projection = keras.layers.Dense(
            hidden_size, use_bias=False, name="context"
        )
        self.output_projection = keras.layers.Dense(1 + vocab_size, name="output")

    def build(
        self, cache_shape: Any, frame_shape: Any, state_shape: Any = None
    ) -> None:
        self.frame_projection.build(frame_shape)
        self.context_projection.build(cache_shape)
        self.output_projection.build((None, self.hidden_size))

    def call(
        self, cache: Any, frame: TensorLike, state: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        context = self.context_projection(cache)  # [C, H]
        if state is not None:
            context = tf.gather(context, tf.cast(state, tf.int32))
        hidden = tf.tanh(self.frame_projection(frame)[..., None, :] + context)
        weights = self.output_projection(hidden)
        return weights[..., 0], weights[..., 1:]

    def get_config(self) -> dict[str, Any]:
        return with_attributes(super().get_config(), self, "vocab_size", "hidden_size")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LocallyNormalizedWeightFn(WeightFn):
    """Any weight function made locally normalised.

    At every state the weights are log-probabilities
    (exp(blank) + sum(exp(lexical)) = 1).

    A `RecognitionLattice` with one of these skips the denominator.

    Args:
      weight_fn: the WeightFn to normalise.
      normalize: `hat_normalize` (default), `log_softmax_normalize`, or their
        names "hat" / "log_softmax".
    """

    def __init__(
        self,
        weight_fn: WeightFn | dict[str, Any],
        normalize: Normalizer | str = hat_normalize,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(weight_fn, dict):
            weight_fn = keras.saving.deserialize_keras_object(weight_fn)
        if not isinstance(weight_fn, WeightFn):
            raise ValueError(f"weight_fn must be a WeightFn layer, got {weight_fn!r}")
        if isinstance(normalize, str):
            if normalize not in _NORMALIZERS:
                raise ValueError(
                    f"normalize must be one of {sorted(_NORMALIZERS)} or a callable, "
                    f"got {normalize!r}"
                )
            normalize = _NORMALIZERS[normalize]
        if not callable(normalize):
            raise ValueError(f"normalize must be callable, got {normalize!r}")
        self.weight_fn, self.normalize = weight_fn, normalize

    def call(
        self, cache: Any, frame: TensorLike, state: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        return self.normalize(*self.weight_fn(cache, frame, state))

    def get_config(self) -> dict[str, Any]:
        names = {fn: name for name, fn in _NORMALIZERS.items()}
        if self.normalize not in names:
            raise ValueError("only the built-in normalize functions can be saved")
        config = super().get_config()
        config.update(
            weight_fn=keras.saving.serialize_keras_object(self.weight_fn),
            normalize=names[self.normalize],
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TableWeightFn(WeightFn):
    """Weights looked up in a fixed table (for tests and toy lattices).

    table: [I, C, 1 + V], or [B, I, C, 1 + V] with the frames' first axis B.
    Frame [..., F] reads table[int(frame[..., 0])]: blank at [..., 0],
    labels at [..., 1:]. frame[..., 0] must lie in [0, I)
    (InvalidArgumentError naming frame otherwise).
    """

    def __init__(self, table: TensorLike, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        table = tf.convert_to_tensor(table)
        if table.shape.rank not in (3, 4) or table.shape[-1] < 2:
            raise ValueError(
                "table must be [input_vocab, num_context_states, 1 + vocab_size] or "
                f"[batch, input_vocab, num_context_states, 1 + vocab_size], got shape "
                f"{table.shape}"
            )
        self.table = table

    def call(
        self, cache: Any, frame: TensorLike, state: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        del cache
        frame = tf.convert_to_tensor(frame)
        per_batch = self.table.shape.rank == 4
        if frame.shape.rank is not None and frame.shape.rank < 1 + per_batch:
            raise ValueError(
                f"frame must be [..., F]{' with a batch axis' * per_batch}, got "
                f"shape {frame.shape}"
            )
        checks = []
        if per_batch:
            batch = frame.shape[0]
            if batch is not None and self.table.shape[0] != batch:
                raise ValueError(
                    f"frame must have batch {self.table.shape[0]} as the per-batch "
                    f"table {self.table.shape}, got shape {frame.shape}"
                )
            checks.append(
                tf.debugging.assert_equal(
                    tf.shape(frame)[0],
                    tf.shape(self.table)[0],
                    message="frame must have the batch of the per-batch table",
                )
            )
        inputs = self.table.shape[-3]
        index = tf.cast(frame[..., 0], tf.int32)
        checks.append(
            refuse(
                ~((frame[..., 0] >= 0) & (frame[..., 0] < inputs)),
                frame[..., 0],
                f"frame[..., 0] must index the table's {inputs} inputs, [0, {inputs})",
            )
        )
        with after(*checks):
            index = tf.identity(index)
        if per_batch:
            weights = tf.gather(self.table, index, axis=1, batch_dims=1)
        else:
            weights = tf.gather(self.table, index)
        weights = tf.cast(weights, frame.dtype)
        weights = _select_states(weights, state)
        return weights[..., 0], weights[..., 1:]

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(table=np.asarray(self.table).tolist())
        return config
