# SPDX-License-Identifier: Apache-2.0
"""LatticeModel + RecognitionLatticeLoss: compile / fit, and toy tasks learned
to exact match with a locally and a globally normalised lattice."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.decoding import recognize
from tf_transducer.lattice import RecognitionLattice
from tf_transducer.lattice.alignments import FrameDependent
from tf_transducer.lattice.alignments import FrameLabelDependent
from tf_transducer.lattice.contexts import FullNGram
from tf_transducer.lattice.weight_fns import JointWeightFn
from tf_transducer.lattice.weight_fns import LocallyNormalizedWeightFn
from tf_transducer.lattice.weight_fns import SharedRNNCacher
from tf_transducer.losses import RecognitionLatticeLoss
from tf_transducer.models import LatticeModel

V, T = 4, 6


def noisy_symbols(n, seed):
    """[n, T] symbols 0..V (0 = silence) and their frames: noisy one-hots."""
    rng = np.random.default_rng(seed)
    symbols = rng.integers(0, V + 1, size=(n, T))
    frames = np.eye(V + 1, dtype=np.float32)[symbols]
    frames += rng.normal(0, 0.1, frames.shape).astype(np.float32)
    return symbols, frames


def task(n, seed, spell):
    """((frames, lengths), labels padded with -1, label lists).

    spell=False: each symbol s gives one label, (s + previous label) % V + 1
    (the previous label is the context). spell=True: each symbol gives two
    labels in its one frame, s then s % V + 1.
    """
    symbols, frames = noisy_symbols(n, seed)
    out = []
    for row in symbols:
        labels = []
        for s in row[row > 0]:
            if spell:
                labels += [s, s % V + 1]
            else:
                labels.append((s + (labels[-1] if labels else 0)) % V + 1)
        out.append([int(y) for y in labels])
    padded = np.full((n, 2 * T), -1, np.int32)
    for i, labels in enumerate(out):
        padded[i, : len(labels)] = labels
    return (frames, np.full([n], T, np.int32)), padded, out


def make_model(local, alignment):
    weight_fn = JointWeightFn(V, 32)
    if local:
        weight_fn = LocallyNormalizedWeightFn(weight_fn)
    lattice = RecognitionLattice(
        FullNGram(V, 1),
        alignment,
        lambda context: SharedRNNCacher(V, 1, rnn_size=16, rnn_embedding_size=8),
        weight_fn,
    )
    encoder = keras.Sequential([keras.layers.Dense(32, activation="tanh")])
    return LatticeModel(lattice, encoder)


def learn(local, alignment, spell, epochs=15):
    keras.utils.set_random_seed(0)
    x, y, _ = task(256, 1, spell)
    test_x, _, test_labels = task(32, 2, spell)
    model = make_model(local, alignment)
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss=RecognitionLatticeLoss())
    losses = model.fit(x, y, batch_size=32, epochs=epochs, verbose=0).history["loss"]
    return losses, recognize(model, test_x), test_labels


@pytest.mark.parametrize("local", [True, False], ids=["local", "global"])
def test_learns_a_context_dependent_mapping(local):
    losses, got, want = learn(local, FrameDependent(), spell=False)
    assert losses[-1] < 0.05 * losses[0]
    assert got == want


def test_global_normalization_spells_within_one_frame():
    # Two labels, then a blank, in one frame. A locally normalised model
    # cannot do this for a repeated symbol: at (frame s, context s % V + 1)
    # it must both start (label) and end (blank) -- GNAT's label bias.
    losses, got, want = learn(False, FrameLabelDependent(2), spell=True)
    assert losses[-1] < 0.05 * losses[0]
    assert got == want


def test_loss_is_the_lattice_mean_and_checks_its_inputs():
    model = make_model(False, FrameLabelDependent(2))
    x, y, _ = task(3, 3, spell=True)
    out = model(x)
    loss = RecognitionLatticeLoss()
    value = loss(y, dict(out, lattice=model.lattice))
    labels = np.where(y < 0, 0, y)
    per_utterance = model.lattice(
        out["frames"], out["num_frames"], labels, (y >= 0).sum(1)
    )
    assert float(value) == pytest.approx(float(tf.reduce_mean(per_utterance)), rel=1e-6)
    none = RecognitionLatticeLoss(reduction="none")(y, dict(out, lattice=model.lattice))
    np.testing.assert_allclose(none, per_utterance, rtol=1e-6)
    with pytest.raises(ValueError, match="y_pred must be a mapping with keys"):
        loss(y, out["frames"])
    with pytest.raises(
        ValueError, match='y_pred\\["lattice"\\] must be a RecognitionLattice'
    ):
        loss(y, dict(out, lattice="lattice"))
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match="compile the LatticeModel with loss="):
        model.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="lattice must be a RecognitionLattice"):
        LatticeModel("lattice")


def test_fit_refuses_nan_frames():
    model = make_model(True, FrameDependent())
    (features, lengths), y, _ = task(8, 4, spell=False)
    features = features.copy()
    features[5, 2, 1] = np.nan  # the encoder's frames of utterance 5 turn NaN
    model.compile(optimizer="adam", loss=RecognitionLatticeLoss(), jit_compile=False)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"frames must be finite \(no NaN or inf\) before num_frames",
    ):
        model.fit((features, lengths), y, batch_size=4, epochs=1, verbose=0)
    lengths, y = lengths.copy(), y.copy()
    lengths[5], y[5, 2:] = 2, -1  # the NaN now lies in the padding: ignored
    history = model.fit((features, lengths), y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
