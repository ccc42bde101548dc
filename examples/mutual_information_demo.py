# SPDX-License-Identifier: Apache-2.0
"""The MI recursion and the RNN-T loss end to end (run this file).

1. Scores and occupation gradients of random RNN-T-shaped px / py from the
   C++ op, checked against the pure-TF path, with both timed.
2. A small Keras model trained with `fit` to put its probability mass on the
   paths through an (S + 1) x (T + 1) grid, with the op as its loss (and the
   same model under `jit_compile=True`, where the pure-TF path takes over).
3. A toy transducer (encoder frames + label embeddings -> joiner logits)
   trained with `fit` and `tf_transducer.RnntLoss` on variable-length,
   padded batches; the encoder's mask tells the loss each utterance's frames.
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import tf_transducer as tt  # noqa: E402

BATCH_SIZE = flags.DEFINE_integer(
    "batch_size", 8, "Sequences per batch.", lower_bound=1
)
SYMBOLS = flags.DEFINE_integer("symbols", 20, "S, symbols per sequence.", lower_bound=1)
FRAMES = flags.DEFINE_integer("frames", 100, "T, frames per sequence.", lower_bound=1)
EPOCHS = flags.DEFINE_integer(
    "epochs", 5, "Epochs of the Keras example.", lower_bound=1
)


def timed(fn, repeats=5):
    fn()  # warm-up (and tracing)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def compare_paths(B, S, T):
    rng = np.random.default_rng(0)
    px = rng.normal(size=(B, S, T + 1)).astype(np.float32)
    px[:, :, T] = -np.inf  # no symbol after the last frame, as in RNN-T
    py = rng.normal(size=(B, S + 1, T)).astype(np.float32)
    lengths = rng.integers(T // 2, T + 1, size=B)
    boundary = np.stack([0 * lengths, 0 * lengths, S + 0 * lengths, lengths], 1)

    op = tf.function(lambda: tt.mutual_information_recursion(px, py, boundary, True))
    ref = tf.function(
        lambda: tt.mutual_information_recursion_tf(px, py, boundary, True)
    )
    (s_op, (gx_op, _)), (s_ref, (gx_ref, _)) = op(), ref()
    print(f"MI recursion, B={B} S={S} T={T} (regular, per-sequence lengths)")
    print(f"  scores (op):      {np.round(s_op.numpy()[:4], 3)} ...")
    print(
        f"  max |op - tf|:    scores {np.abs(s_op - s_ref).max():.2e}, "
        f"px_grad {np.abs(gx_op - gx_ref).max():.2e}"
    )
    t_op, t_ref = timed(op), timed(ref)
    print(
        f"  time, scores + gradients: op {t_op * 1e3:.2f} ms, "
        f"pure TF {t_ref * 1e3:.2f} ms ({t_ref / t_op:.0f}x)"
    )


class PathScore(keras.layers.Layer):
    """Per-cell log-softmax over {x-step, y-step} -> log P(reach (S, T))."""

    def __init__(self, S, T, **kwargs):
        super().__init__(**kwargs)
        self.S, self.T = S, T

    def call(self, logits):
        logits = tf.reshape(logits, [-1, self.S + 1, self.T + 1, 2])
        logp = tf.nn.log_softmax(logits, axis=-1)
        return tt.mutual_information_recursion(
            logp[:, : self.S, :, 0], logp[:, :, : self.T, 1]
        )


def train(S, T, epochs, jit_compile):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((16,))
    logits = keras.layers.Dense((S + 1) * (T + 1) * 2)(inputs)
    model = keras.Model(inputs, PathScore(S, T)(logits))
    model.compile(
        optimizer=keras.optimizers.Adam(0.02),
        loss=lambda y_true, y_pred: -y_pred,
        jit_compile=jit_compile,
    )
    x = np.random.default_rng(1).normal(size=(256, 16)).astype(np.float32)
    history = model.fit(x, np.zeros(len(x)), batch_size=32, epochs=epochs, verbose=0)
    losses = " -> ".join(f"{v:.3f}" for v in history.history["loss"])
    print(f"  jit_compile={jit_compile!s:5}: -log P per epoch {losses}")


class ToyJoiner(keras.layers.Layer):
    """enc [B, T, H] + dec [B, S + 1, H] -> logits [B, T, S + 1, C].

    Keeps the encoder's frame mask on its output, for RnntLoss.
    """

    def __init__(self, classes, **kwargs):
        super().__init__(**kwargs)
        self.out = keras.layers.Dense(classes)

    def call(self, enc, dec):
        return self.out(keras.ops.tanh(enc[:, :, None, :] + dec[:, None, :, :]))

    def compute_mask(self, inputs, previous_mask=None):
        if isinstance(previous_mask, (list, tuple)):
            return previous_mask[0]
        return previous_mask


def train_toy_transducer(epochs, classes=6):
    """Each utterance's frames are noisy one-hot codes of its labels."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features, contexts, targets = [], [], []
    for _ in range(64):
        labels = rng.integers(1, classes, size=rng.integers(1, 4))
        frames = np.repeat(labels, 2)  # two frames per label
        x = np.zeros((10, classes), np.float32)
        x[np.arange(len(frames)), frames] = 1.0
        x[: len(frames)] += 0.1 * rng.normal(size=(len(frames), classes))
        y = np.full(3, -1, np.int64)  # labels padded with -1
        y[: len(labels)] = labels
        features.append(x)
        contexts.append(np.concatenate([[0], np.maximum(y, 0)]))  # blank first
        targets.append(y)
    data = tf.data.Dataset.from_tensor_slices(
        ((np.stack(features), np.stack(contexts)), np.stack(targets))
    ).batch(8)
    feats = keras.Input((None, classes))
    context = keras.Input((None,), dtype="int32")
    enc = keras.layers.Dense(16)(keras.layers.Masking(0.0)(feats))
    dec = keras.layers.Embedding(classes, 16)(context)
    model = keras.Model([feats, context], ToyJoiner(classes)(enc, dec))
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss=tt.RnntLoss(blank=0))
    history = model.fit(data, epochs=epochs, verbose=0, shuffle=False)
    losses = " -> ".join(f"{v:.3f}" for v in history.history["loss"])
    print(f"  RNN-T loss per epoch {losses}")


def main(argv):
    del argv
    compare_paths(BATCH_SIZE.value, SYMBOLS.value, FRAMES.value)
    print("Keras fit with the MI score as the loss (S=6, T=12):")
    for jit_compile in (False, True):
        train(6, 12, EPOCHS.value, jit_compile)
    print("A toy transducer trained with fit and tf_transducer.RnntLoss:")
    train_toy_transducer(2 * EPOCHS.value)


if __name__ == "__main__":
    app.run(main)
