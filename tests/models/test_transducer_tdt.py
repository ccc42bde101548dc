# SPDX-License-Identifier: Apache-2.0
"""A Transducer with a duration head: TdtLoss, frame-skipping decoding, and
the mismatches between joiner and loss it refuses."""

import numpy as np
import pytest

import tf_transducer as tt
from tf_transducer.decoding import recognize
from tf_transducer.decoding import tdt_greedy_search
from tf_transducer.decoding.transducer import KerasSteps
from tf_transducer.decoding.transducer import transducer_beam_search
from tf_transducer.models import Transducer

V, DURATIONS = 6, [0, 1, 2, 4]
RNG = np.random.default_rng(0)
FEATURES = RNG.normal(size=(3, 14, 5)).astype(np.float32)
LENGTHS = np.array([14, 9, 11])
LABELS = np.array([[1, 2, 3], [4, 1, -1], [2, -1, -1]])


def tdt_model(durations=DURATIONS):
    return Transducer(
        V,
        tt.layers.TransducerEncoder(16, 1, stack=1),
        tt.layers.PredictionNetwork(V, 8, 16, kind="stateless"),
        tt.layers.TransducerJoiner(V, 16, durations=durations),
        feature_dim=5,
    )


def test_it_trains_with_tdt_loss_and_decodes_skipping_frames():
    model = tdt_model()
    model.compile(optimizer="adam", loss=tt.TdtLoss(durations=DURATIONS))
    history = model.fit((FEATURES, LENGTHS), LABELS, epochs=3, batch_size=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]
    encoded, lengths = model.encode((FEATURES, LENGTHS), training=False)
    projected = np.asarray(model.joiner.project_encoder(encoded))
    hyps, _, evaluations = tdt_greedy_search(
        projected, np.asarray(lengths), KerasSteps(model), DURATIONS
    )
    assert recognize(model, (FEATURES, LENGTHS)) == hyps
    assert all(1 <= e for e in evaluations)
    beams = transducer_beam_search(model, (FEATURES, LENGTHS), beam=2)
    assert len(beams) == 3 and all(all(0 < y < V for y in h) for h in beams)


@pytest.mark.parametrize(
    "joiner_durations,loss,message",
    [
        (DURATIONS, tt.RnntLoss(), "the joiner has a duration head .*got RnntLoss"),
        (DURATIONS, tt.TdtLoss(durations=[0, 1, 2]), r"TdtLoss has durations=\[0, 1,"),
        (None, tt.TdtLoss(), "but the joiner has no duration head"),
    ],
)  # fmt: skip
def test_a_loss_that_does_not_fit_the_joiner_is_named(joiner_durations, loss, message):
    model = tdt_model(joiner_durations)
    model.compile(optimizer="adam", loss=loss)
    with pytest.raises(ValueError, match=message):
        model.fit((FEATURES, LENGTHS), LABELS, epochs=1, verbose=0)


def test_the_joiner_refuses_bad_durations_and_heads_it_lacks():
    with pytest.raises(ValueError, match="durations must hold 0 and 1"):
        tt.layers.TransducerJoiner(V, 8, durations=[1, 2])
    joiner = tt.layers.TransducerJoiner(V, 8)
    joiner.build((None, 3), (None, 3))
    with pytest.raises(ValueError, match="has no duration head"):
        joiner.joint_heads(np.zeros((1, 8), np.float32), np.zeros((1, 8), np.float32))
    assert "durations" not in joiner.get_config()  # a plain joiner's config as before
    with pytest.raises(ValueError, match="has no duration head"):
        joiner.duration_weights()


def test_the_fused_loss_is_the_loss_of_the_joiners_logits():
    model = tdt_model()
    model((FEATURES, LENGTHS))
    y_pred = model((FEATURES, LENGTHS), training=False)
    losses = {}
    for loss in (tt.TdtLoss(DURATIONS, sigma=0.05, omega=0.2),
                 tt.FusedTdtLoss(DURATIONS, sigma=0.05, omega=0.2)):  # fmt: skip
        model.compile(optimizer="adam", loss=loss)
        losses[type(loss).__name__] = float(
            model.compute_loss(y=LABELS, y_pred=y_pred, training=False)
        )
    assert losses["FusedTdtLoss"] == pytest.approx(losses["TdtLoss"], rel=1e-5)
