# SPDX-License-Identifier: Apache-2.0
"""Every public layer, loss and model through the one harness (tests/harness.py).

The cases are small; what each must compute is tested in its own test file.
`test_every_public_class_has_a_case` keeps the list complete.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.harness import Padding
from tests.harness import run_layer_test
from tests.harness import run_loss_test
from tests.harness import run_model_test
from tf_transducer.lattice import RecognitionLattice
from tf_transducer.lattice import weight_fns
from tf_transducer.lattice.alignments import FrameDependent
from tf_transducer.lattice.alignments import FrameLabelDependent
from tf_transducer.lattice.contexts import FullNGram

RNG = np.random.default_rng(0)
AUDIO = RNG.uniform(-0.5, 0.5, (2, 2400)).astype(np.float32)
AUDIO_LENGTHS = np.array([2400, 1500], np.int32)
FEATURES = RNG.normal(size=(2, 12, 6)).astype(np.float32)
FEATURE_LENGTHS = np.array([12, 7], np.int32)
LABELS = np.array([[1, 2, 3], [4, 1, -1]], np.int32)  # padded with -1
V = 6  # classes of the toy models, 0 = blank


def values_and_lengths(out):
    return [(out[0], out[1])]


def each(layer_out, lengths):
    return [(layer_out, lengths)]


LAYERS = {
    "LogMelSpectrogram": dict(
        make=lambda: tt.LogMelSpectrogram(8000, 20.0, 10.0, n_mels=16, f_max=3800.0),
        inputs=(AUDIO, AUDIO_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "Mfcc": dict(
        make=lambda: tt.Mfcc(sample_rate=8000, n_coefficients=13),
        inputs=(AUDIO, AUDIO_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "FrameStacking": dict(
        make=lambda: tt.FrameStacking(3, 1, stride=2),
        inputs=(FEATURES, FEATURE_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "FeatureNormalization": dict(
        make=lambda: tt.FeatureNormalization(),
        inputs=(FEATURES, FEATURE_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
        atol=1e-4,
    ),
    "FeatureNormalization/global": dict(
        make=lambda: tt.FeatureNormalization("global", 1e-3),
        inputs=(FEATURES, FEATURE_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "SpecAugment": dict(
        make=lambda: tt.SpecAugment(
            freq_mask_max_bins=2,
            freq_mask_count=1,
            time_mask_max_frames=3,
            time_mask_count=1,
            time_warp_max_frames=2,
            use_input_dependent_random_seed=True,
        ),
        inputs=(FEATURES, FEATURE_LENGTHS),
        call_kwargs=dict(training=True),
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)], zero_after=False),
        xla=True,
    ),
    "SpecAugment/domains": dict(  # every kind of option in the config
        make=lambda: tt.SpecAugment(
            domain_ids=[0, 4],
            time_mask_count=[1, 2],
            freq_warp_max_bins=3,
            time_warp_bound="dynamic",
            time_warp_max_ratio=0.1,
            use_noise=True,
            unstack=True,
            stack_height=2,
            freq_noise_warmup_steps=5,
            seed=11,
        ),
        inputs=(FEATURES, FEATURE_LENGTHS),
        call_kwargs=dict(training=False),  # the identity
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)]),
    ),
    "TransducerEncoder": dict(
        make=lambda: tt.layers.TransducerEncoder(8, 2, 3, 0.1),
        inputs=(FEATURES, FEATURE_LENGTHS),
        call_kwargs=dict(training=False),
        padding=Padding(0, 1, values_and_lengths),
        atol=1e-5,
    ),
    "ConvSubsampling": dict(
        make=lambda: tt.ConvSubsampling(8, 4, channels=4),
        inputs=(FEATURES, FEATURE_LENGTHS),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "ConformerBlock": dict(
        make=lambda: tt.ConformerBlock(
            6, 2, ff_mult=2, conv_kernel=3, dropout=0.1, max_relative_position=4
        ),
        inputs=(FEATURES, FEATURE_LENGTHS),
        call_kwargs=dict(training=False),
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)], zero_after=True),
        tflite=True,
    ),
    "ConformerEncoder": dict(
        make=lambda: tt.ConformerEncoder(
            8, 2, 2, 2, 3, chunk_size=2, left_context=2, subsampling=2, dropout=0.1
        ),
        inputs=(FEATURES, FEATURE_LENGTHS),
        call_kwargs=dict(training=False),
        padding=Padding(0, 1, values_and_lengths, zero_after=True),
        tflite=True,
    ),
    "PredictionNetwork/lstm": dict(
        make=lambda: tt.layers.PredictionNetwork(V, 4, 8, "lstm"),
        inputs=(np.maximum(LABELS, 0),),
        call_kwargs=dict(training=False),
        # causal: later labels change nothing before them
        padding=Padding(0, None, lambda out: [(out[:, :3], None)], int_fill=5),
    ),
    "PredictionNetwork/stateless": dict(
        make=lambda: tt.layers.PredictionNetwork(V, 4, 8, "stateless", 2),
        inputs=(np.maximum(LABELS, 0),),
        padding=Padding(0, None, lambda out: [(out[:, :3], None)], int_fill=5),
    ),
    "TransducerJoiner": dict(
        make=lambda: tt.layers.TransducerJoiner(V, 8),
        inputs=(FEATURES[:, :5], RNG.normal(size=(2, 4, 3)).astype(np.float32)),
    ),
    "TransducerJoiner/durations": dict(
        make=lambda: tt.layers.TransducerJoiner(V, 8, durations=[0, 1, 2, 4]),
        inputs=(FEATURES[:, :5], RNG.normal(size=(2, 4, 3)).astype(np.float32)),
    ),
    "NeuralTransducer": dict(
        make=lambda: tt.NeuralTransducer(
            n_out=V,
            transducer_hidden_units=8,
            transducer_max_width=3,
            input_block_size=4,
            embedding_size=4,
            e_symbol_index=0,
        ),
        inputs=(FEATURES, FEATURE_LENGTHS, LABELS),
        padding=Padding(0, 1, lambda out: [(out["logits"], out["num_blocks"])]),
        atol=1e-5,
    ),
    "RecognitionLattice": dict(
        make=lambda: RecognitionLattice(
            FullNGram(V - 1, 1),
            FrameLabelDependent(2),
            lambda c: weight_fns.SharedRNNCacher(V - 1, 1, 8, 4),
            weight_fns.JointWeightFn(V - 1, 8),
        ),
        inputs=(FEATURES, FEATURE_LENGTHS, np.maximum(LABELS, 1), np.array([3, 2])),
        padding=Padding(0, 1, lambda out: [(out, None)]),
        atol=1e-4,
    ),
    "RecognitionLattice/local": dict(
        make=lambda: RecognitionLattice(
            FullNGram(V - 1, 0),
            FrameDependent(),
            weight_fns.SharedEmbCacher(1, 8),
            weight_fns.LocallyNormalizedWeightFn(weight_fns.JointWeightFn(V - 1, 8)),
        ),
        inputs=(FEATURES, FEATURE_LENGTHS, np.maximum(LABELS, 1), np.array([3, 2])),
        padding=Padding(0, 1, lambda out: [(out, None)]),
        atol=1e-4,
    ),
    "JointWeightFn": dict(
        make=lambda: weight_fns.JointWeightFn(V - 1, 8),
        inputs=(RNG.normal(size=(3, 8)).astype(np.float32), FEATURES[:, 0]),
        symbolic_shapes=[(3, 8), (None, 6)],
    ),
    "LocallyNormalizedWeightFn": dict(
        make=lambda: weight_fns.LocallyNormalizedWeightFn(
            weight_fns.JointWeightFn(V - 1, 8), normalize="log_softmax"
        ),
        inputs=(RNG.normal(size=(3, 8)).astype(np.float32), FEATURES[:, 0]),
        symbolic_shapes=[(3, 8), (None, 6)],
    ),
    "TableWeightFn": dict(
        make=lambda: weight_fns.TableWeightFn(
            RNG.normal(size=(3, 2, V)).astype(np.float32)
        ),
        inputs=(np.zeros((2, 1), np.float32), np.array([[0.0], [2.0]], np.float32)),
        mixed_precision=False,  # a lookup: no arithmetic to check
    ),
    "SharedEmbCacher": dict(
        make=lambda: weight_fns.SharedEmbCacher(3, 8), inputs=(), saving=False
    ),
    "SharedRNNCacher": dict(
        make=lambda: weight_fns.SharedRNNCacher(V - 1, 1, 8, 4),
        inputs=(),
        saving=False,
    ),
    "NullCacher": dict(make=weight_fns.NullCacher, inputs=(), saving=False),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer(name):
    case = dict(LAYERS[name])
    keras.utils.set_random_seed(1)
    run_layer_test(case.pop("make"), case.pop("inputs"), **case)


# ------------------------------------------------------------------ losses

LOGITS = RNG.normal(size=(2, 7, 4, V)).astype(np.float32)  # [B, T, S + 1, C]


class _Joiner(keras.layers.Layer):
    def build(self, *shapes):
        self.out = self.add_weight(shape=(3, V), name="out")

    def call(self, encoder, decoder):
        return tf.tanh(encoder + decoder) @ self.out


JOINER = _Joiner()


def pruned_call(loss, y_true, am, lm, encoder, decoder, lengths):
    y_pred = dict(am=am, lm=lm, encoder=encoder, decoder=decoder, joiner=JOINER,
                  logit_lengths=lengths)  # fmt: skip
    return loss(y_true, y_pred)


FUSED_JOINER = tt.layers.TransducerJoiner(V, 3)
FUSED_JOINER.build((None, 3), (None, 3))


def fused_call(loss, y_true, encoder, decoder, lengths):
    y_pred = dict(encoder=encoder, decoder=decoder, joiner=FUSED_JOINER,
                  logit_lengths=lengths)  # fmt: skip
    return loss(y_true, y_pred)


LATTICE = LAYERS["RecognitionLattice"]["make"]()


TDT_JOINER = tt.layers.TransducerJoiner(V, 3, durations=[0, 1, 2])
TDT_JOINER.build((None, 3), (None, 3))


def fused_tdt_call(loss, y_true, encoder, decoder, lengths):
    y_pred = dict(encoder=encoder, decoder=decoder, joiner=TDT_JOINER,
                  logit_lengths=lengths)  # fmt: skip
    return loss(y_true, y_pred)


def tdt_call(loss, y_true, tokens, durations, lengths):
    y_pred = dict(token_logits=tokens, duration_logits=durations, logit_lengths=lengths)
    return loss(y_true, y_pred)


def lattice_call(loss, y_true, frames, num_frames):
    return loss(y_true, dict(frames=frames, num_frames=num_frames, lattice=LATTICE))


def nt_call(loss, y_true, logits, num_blocks):
    return loss(y_true, dict(logits=logits, num_blocks=num_blocks))


LOSSES = {
    "CtcLoss": dict(
        make=tt.CtcLoss,
        inputs=(LABELS, RNG.normal(size=(2, 7, V)).astype(np.float32)),
        padding=Padding(0, None, lambda out: [(out, None)], int_fill=-1),
    ),
    "RnntLoss": dict(
        make=tt.RnntLoss,
        inputs=(LABELS, LOGITS),
        # more label padding, with its joiner rows holding garbage
        padding=Padding(
            0, None, lambda out: [(out, None)], int_fill=-1, also=((1, 2, None),)
        ),
    ),
    "RnntLoss/modified+fastemit": dict(
        make=lambda **kw: tt.RnntLoss(
            rnnt_type="modified", fastemit_lambda=0.1, delay_penalty=0.01, **kw
        ),  # fmt: skip
        inputs=(LABELS, LOGITS),
    ),
    "PrunedRnntLoss": dict(
        make=lambda **kw: tt.PrunedRnntLoss(s_range=2, **kw),
        inputs=(
            LABELS,
            RNG.normal(size=(2, 7, V)).astype(np.float32),
            RNG.normal(size=(2, 4, V)).astype(np.float32),
            RNG.normal(size=(2, 7, 3)).astype(np.float32),
            RNG.normal(size=(2, 4, 3)).astype(np.float32),
            np.array([7, 5], np.int32),
        ),
        call=pruned_call,
        # more frames (am and encoder), holding garbage
        padding=Padding(1, 5, lambda out: [(out, None)], also=((3, 1, None),)),
        atol=1e-4,
    ),
    "TdtLoss": dict(
        make=lambda **kw: tt.TdtLoss(durations=[0, 1, 2], sigma=0.05, **kw),
        inputs=(
            LABELS,
            LOGITS,
            RNG.normal(size=(*LOGITS.shape[:3], 3)).astype(np.float32),
            np.array([LOGITS.shape[1], 3], np.int32),
        ),
        call=tdt_call,
        # more frames, holding garbage
        padding=Padding(1, 3, lambda out: [(out, None)], also=((2, 1, None),)),
    ),
    "TdtLoss/omega+fastemit": dict(
        make=lambda **kw: tt.TdtLoss(
            durations=[0, 1, 3], omega=0.3, fastemit_lambda=0.1, clamp=1.0, **kw
        ),  # fmt: skip
        inputs=(
            LABELS,
            LOGITS,
            RNG.normal(size=(*LOGITS.shape[:3], 3)).astype(np.float32),
            np.array([LOGITS.shape[1], 2], np.int32),
        ),
        call=tdt_call,
    ),
    "FusedTdtLoss": dict(
        make=lambda **kw: tt.FusedTdtLoss(durations=[0, 1, 2], sigma=0.05, **kw),
        inputs=(
            LABELS,
            RNG.normal(size=(2, 7, 3)).astype(np.float32),
            RNG.normal(size=(2, 4, 3)).astype(np.float32),
            np.array([7, 5], np.int32),
        ),
        call=fused_tdt_call,
        # more frames, holding garbage
        padding=Padding(1, 3, lambda out: [(out, None)]),
    ),
    "FusedRnntLoss": dict(
        make=tt.FusedRnntLoss,
        inputs=(
            LABELS,
            RNG.normal(size=(2, 7, 3)).astype(np.float32),
            RNG.normal(size=(2, 4, 3)).astype(np.float32),
            np.array([7, 5], np.int32),
        ),
        call=fused_call,
        # more frames, holding garbage
        padding=Padding(1, 3, lambda out: [(out, None)]),
    ),
    "FusedRnntLoss/modified+fastemit": dict(
        make=lambda **kw: tt.FusedRnntLoss(
            rnnt_type="modified", fastemit_lambda=0.1, delay_penalty=0.01, **kw
        ),  # fmt: skip
        inputs=(
            LABELS,
            RNG.normal(size=(2, 7, 3)).astype(np.float32),
            RNG.normal(size=(2, 4, 3)).astype(np.float32),
            np.array([7, 5], np.int32),
        ),
        call=fused_call,
        # more label padding, with its decoder rows holding garbage
        padding=Padding(
            0, None, lambda out: [(out, None)], int_fill=-1, also=((2, 1, None),)
        ),
    ),
    "RecognitionLatticeLoss": dict(
        make=tt.RecognitionLatticeLoss,
        inputs=(
            np.where(LABELS > 0, np.minimum(LABELS, V - 1), -1),
            FEATURES,
            FEATURE_LENGTHS,
        ),  # fmt: skip
        call=lattice_call,
        padding=Padding(1, 2, lambda out: [(out, None)]),
        atol=1e-4,
    ),
    "NeuralTransducerLoss": dict(
        make=lambda **kw: tt.NeuralTransducerLoss(3, 0, **kw),
        inputs=(
            LABELS,
            RNG.normal(size=(2, 3, 4, 3, V)).astype(np.float32),
            np.array([3, 2], np.int32),
        ),  # fmt: skip
        call=nt_call,
        padding=Padding(1, 2, lambda out: [(out, None)]),
        xla=True,
    ),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss(name):
    case = dict(LOSSES[name])
    run_loss_test(case.pop("make"), case.pop("inputs"), **case)


# ------------------------------------------------------------------ models

X = (FEATURES, FEATURE_LENGTHS)


def transducer(encoder=None, kind="lstm", durations=None, ctc_weight=0.0):
    return tt.models.Transducer(
        V,
        encoder or tt.layers.TransducerEncoder(8, stack=2),
        tt.layers.PredictionNetwork(V, embedding_dim=4, units=8, kind=kind),
        tt.layers.TransducerJoiner(V, 8, durations=durations),
        feature_dim=6,
        ctc_weight=ctc_weight,
    )


def deepspeech():
    return tt.models.DeepSpeech(num_classes=V, n_hidden=8, n_context=2, n_input=6,
                                dropout_rate=0.0)  # fmt: skip


MODELS = {
    "Transducer/full": dict(
        make=transducer,
        loss=tt.RnntLoss,
        predict=lambda m, x: m(x, training=False),
        padding=Padding(0, 1, lambda out: [(out["encoder"], out["lengths"])]),
    ),
    "Transducer/fused": dict(
        make=transducer,
        loss=tt.FusedRnntLoss,
    ),
    "Transducer/tdt": dict(
        make=lambda: transducer(durations=[0, 1, 2]),
        loss=lambda: tt.TdtLoss(durations=[0, 1, 2], sigma=0.05),
    ),
    "Transducer/fused-tdt": dict(
        make=lambda: transducer(durations=[0, 1, 3]),
        loss=lambda: tt.FusedTdtLoss(durations=[0, 1, 3], omega=0.2),
    ),
    "Transducer/pruned-hybrid": dict(  # (a CTC head beside the pruned loss)
        make=lambda: transducer(kind="stateless", ctc_weight=0.3),
        loss=lambda: tt.PrunedRnntLoss(s_range=2),
    ),
    "Transducer/conformer": dict(
        make=lambda: transducer(
            tt.layers.ConformerEncoder(
                8,
                num_layers=2,
                num_heads=2,
                conv_kernel=3,
                subsampling=2,
                chunk_size=2,
                left_context=2,
                chunk_sizes=[1, 2],
                dropout=0.0,
            ),
        ),  # fmt: skip
        loss=tt.FusedRnntLoss,
        predict=lambda m, x: m(x, training=False),
        padding=Padding(0, 1, lambda out: [(out["encoder"], out["lengths"])]),
    ),
    "DeepSpeech": dict(
        make=deepspeech,
        loss=tt.CtcLoss,
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)]),
    ),
    "LatticeModel": dict(
        make=lambda: tt.models.LatticeModel(
            LAYERS["RecognitionLattice"]["make"](),
            keras.Sequential([keras.layers.Dense(8, activation="tanh")]),
        ),
        loss=tt.RecognitionLatticeLoss,
        labels=np.where(LABELS > 0, np.minimum(LABELS, V - 1), -1),
        predict=lambda m, x: m(x)["frames"],
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)]),
        atol=1e-4,
    ),
    "NeuralTransducerModel": dict(
        make=lambda: tt.models.NeuralTransducerModel(
            LAYERS["NeuralTransducer"]["make"](),
            keras.layers.LSTM(8, return_sequences=True),
        ),
        loss=lambda: tt.NeuralTransducerLoss(3, 0),
        predict=lambda m, x: m(x)["encoder"],
        padding=Padding(0, 1, lambda out: [(out, FEATURE_LENGTHS)]),
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(name):
    case = dict(MODELS[name])
    labels = case.pop("labels", LABELS)
    run_model_test(case.pop("make"), X, labels, case.pop("loss"), **case)


def test_every_public_class_has_a_case():
    """New public layers, losses and models cannot skip the harness."""
    public = set()
    for module in (tt.layers, tt.models, weight_fns):
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
                if (
                    not name.startswith("_")
                    and obj.__module__.startswith("tf_transducer")
                    and obj not in (weight_fns.WeightFn, weight_fns.WeightFnCacher)
                ):
                    public.add(name)
    public.add("RecognitionLattice")
    public |= {
        name
        for name, obj in vars(tt.losses).items()
        if inspect.isclass(obj)
        and issubclass(obj, keras.losses.Loss)
        and not name.startswith("_")
        and obj.__module__ == "tf_transducer.losses"
    }
    covered = {name.split("/")[0] for name in (*LAYERS, *LOSSES, *MODELS)}
    assert public - covered == set()
