# SPDX-License-Identifier: Apache-2.0
"""A hybrid Transducer (a CTC head on the encoder): its loss against the
transducer loss plus the weighted `CtcLoss`, its CTC decoding against
`ctc_greedy_decode`, saving and loading, and the errors of a model without
the head."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.decoding import ctc_beam_search
from tf_transducer.decoding import ctc_greedy_decode
from tf_transducer.decoding import transducer_ctc_decode
from tf_transducer.models import Transducer

V, DURATIONS, WEIGHT = 6, [0, 1, 2], 0.4
RNG = np.random.default_rng(0)
FEATURES = RNG.normal(size=(3, 16, 5)).astype(np.float32)
LENGTHS = np.array([16, 9, 12])
LABELS = np.array([[1, 2, 3], [4, 1, -1], [2, -1, -1]])


def model(ctc_weight=WEIGHT, durations=None, kind="lstm"):
    keras.utils.set_random_seed(1)
    built = Transducer(
        V,
        tt.layers.TransducerEncoder(16, 1, stack=2),
        tt.layers.PredictionNetwork(V, 8, 16, kind=kind),
        tt.layers.TransducerJoiner(V, 16, durations=durations),
        feature_dim=5,
        ctc_weight=ctc_weight,
    )
    built.build()
    return built


def plain_twin(hybrid):
    """The same model without the CTC head, sharing the hybrid's weights."""
    twin = model(0.0, getattr(hybrid.joiner, "durations", None),
                 hybrid.predictor.kind)  # fmt: skip
    head = {id(v) for v in hybrid.ctc_head.weights}
    weights = [v for v in hybrid.weights if id(v) not in head]
    twin.set_weights([np.asarray(v) for v in weights])
    return twin


LOSSES = {
    "full": (None, "lstm", tt.RnntLoss),
    "fused": (None, "lstm", tt.FusedRnntLoss),
    "pruned": (None, "stateless", lambda: tt.PrunedRnntLoss(s_range=2)),
    "tdt": (DURATIONS, "lstm", lambda: tt.TdtLoss(durations=DURATIONS)),
    "sum": (None, "lstm", lambda: tt.RnntLoss(reduction="sum")),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_is_transducer_loss_plus_weighted_ctc(name):
    durations, kind, make_loss = LOSSES[name]
    hybrid = model(WEIGHT, durations, kind)
    twin = plain_twin(hybrid)
    hybrid.compile(loss=make_loss())
    twin.compile(loss=make_loss())
    x, weight = (FEATURES, LENGTHS), np.array([1.0, 0.5, 2.0], np.float32)
    got = hybrid.compute_loss(x, LABELS, hybrid(x, training=False), weight, False)
    transducer = twin.compute_loss(x, LABELS, twin(x, training=False), weight, False)
    logits, lengths = hybrid.ctc_logits(x)
    logits._keras_mask = tf.sequence_mask(lengths, logits.shape[1])
    ctc = tt.CtcLoss(zero_infinity=True, reduction=make_loss().reduction)
    want = transducer + WEIGHT * ctc(LABELS, logits, weight)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    assert float(got) > float(transducer)  # the CTC part is there


def test_it_trains_saves_and_reloads(tmp_path):
    hybrid = model()
    hybrid.compile(optimizer=keras.optimizers.Adam(0.01), loss=tt.FusedRnntLoss())
    history = hybrid.fit((FEATURES, LENGTHS), LABELS, epochs=4, batch_size=3, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert hybrid.ctc_head.kernel.trainable
    path = str(tmp_path / "hybrid.keras")
    hybrid.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.ctc_weight == WEIGHT and loaded.get_config()["ctc_weight"] == WEIGHT
    pairs = zip(loaded.ctc_logits((FEATURES, LENGTHS)),
                hybrid.ctc_logits((FEATURES, LENGTHS)), strict=True)  # fmt: skip
    for got, want in pairs:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)
    out = loaded((FEATURES, LENGTHS), training=False)
    assert out["ctc_logits"].shape == (3, 8, V)


def test_ctc_decoding_is_the_best_path_of_its_logits():
    hybrid = model()
    kernel = hybrid.ctc_head.kernel
    kernel.assign(kernel * 10.0)  # labels, not only blanks
    logits, lengths = hybrid.ctc_logits((FEATURES, LENGTHS))
    greedy = transducer_ctc_decode(hybrid, (FEATURES, LENGTHS))
    assert greedy == ctc_greedy_decode(np.asarray(logits), np.asarray(lengths))
    assert any(greedy)
    beams = transducer_ctc_decode(hybrid, (FEATURES, LENGTHS), beam_width=4)
    assert beams == ctc_beam_search(np.asarray(logits), np.asarray(lengths), 4)


def test_a_model_without_the_head_says_so():
    plain = model(0.0)
    assert plain.ctc_head is None and "ctc_logits" not in plain((FEATURES, LENGTHS))
    with pytest.raises(ValueError, match="no CTC head: build it with ctc_weight > 0"):
        plain.ctc_logits((FEATURES, LENGTHS))
    with pytest.raises(ValueError, match='decoder="ctc" needs a CTC head'):
        transducer_ctc_decode(plain, (FEATURES, LENGTHS))
    with pytest.raises(ValueError, match="beam_width must be"):
        transducer_ctc_decode(model(), (FEATURES, LENGTHS), beam_width=0)


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), "0.3", True, None])
def test_bad_ctc_weight_is_named(bad):
    with pytest.raises(ValueError, match="ctc_weight must be a number >= 0"):
        model(bad)


def test_decode_batch_with_the_ctc_decoder():
    from tf_transducer.training.transducer_eval import decode_batch

    hybrid = model()
    batch = {"features": FEATURES, "feature_length": LENGTHS}
    assert decode_batch(hybrid, batch, decoder="ctc") == transducer_ctc_decode(
        hybrid, (FEATURES, LENGTHS)
    )
    with pytest.raises(ValueError, match="decoder must be one of"):
        decode_batch(hybrid, batch, decoder="attention")
    with pytest.raises(ValueError, match='decoder="ctc" needs a CTC head'):
        decode_batch(model(0.0), batch, decoder="ctc")
