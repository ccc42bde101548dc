# SPDX-License-Identifier: Apache-2.0
"""compute_output_shape agrees with what `call` returns, eager and symbolic."""

import keras
import numpy as np
import pytest

import tf_transducer as tt
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder

RNG = np.random.default_rng(0)
AUDIO = RNG.uniform(-0.5, 0.5, (2, 1000)).astype(np.float32)
AUDIO_LENGTHS = np.array([1000, 700], np.int32)
FEATURES = RNG.normal(size=(2, 11, 6)).astype(np.float32)
FEATURE_LENGTHS = np.array([11, 5], np.int32)
LABELS = np.array([[0, 1, 2, 3], [0, 4, 1, 0]], np.int32)

# name -> (make, inputs, output dtypes of `call`)
CASES = {
    "LogMelSpectrogram": (
        lambda: tt.LogMelSpectrogram(8000, 25.0, 10.0, n_mels=7),
        (AUDIO, AUDIO_LENGTHS),
        ("float32", "int32"),
    ),
    "Mfcc": (
        lambda: tt.Mfcc(sample_rate=8000, n_coefficients=5, filterbank_channels=9),
        (AUDIO, AUDIO_LENGTHS),
        ("float32", "int32"),
    ),
    "FeatureNormalization": (
        lambda: tt.FeatureNormalization(),
        (FEATURES, FEATURE_LENGTHS),
        ("float32", "int32"),
    ),
    "FrameStacking": (
        lambda: tt.FrameStacking(2, 1, stride=3),
        (FEATURES, FEATURE_LENGTHS),
        ("float32", "int32"),
    ),
    "TransducerEncoder": (
        lambda: TransducerEncoder(units=4, num_layers=1, stack=4),
        (FEATURES, FEATURE_LENGTHS),
        ("float32", "int32"),
    ),
    "PredictionNetwork/lstm": (
        lambda: PredictionNetwork(5, embedding_dim=3, units=4),
        (LABELS,),
        ("float32",),
    ),
    "PredictionNetwork/stateless": (
        lambda: PredictionNetwork(5, embedding_dim=3, units=4, kind="stateless"),
        (LABELS,),
        ("float32",),
    ),
}


def as_shapes(computed):
    """A single shape as a one-element list; a tuple of shapes as a list."""
    if computed and isinstance(computed[0], tuple):
        return list(computed)
    return [computed]


def assert_fits(computed, shapes):
    """Each computed shape has the real rank; its known dims are the real ones."""
    computed = as_shapes(computed)
    assert len(computed) == len(shapes), (computed, shapes)
    for want, got in zip(computed, shapes, strict=True):
        assert len(want) == len(got), (computed, shapes)
        for w, g in zip(want, got, strict=True):
            assert w is None or w == g, (computed, shapes)


def flat(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("with_lengths", [True, False])
def test_computed_shapes_are_the_eager_shapes(name, with_lengths):
    make, inputs, _ = CASES[name]
    if not with_lengths:
        inputs = inputs[:1]
    layer = make()
    got = [tuple(x.shape) for x in flat(layer(*inputs))]
    computed = layer.compute_output_shape(*[x.shape for x in inputs])
    assert_fits(computed, got)
    assert None not in [d for shape in as_shapes(computed) for d in shape]


@pytest.mark.parametrize("name", ["LogMelSpectrogram", "Mfcc"])
def test_audio_shorter_than_a_frame_gives_no_frames(name):
    make, _, _ = CASES[name]
    layer = make()
    audio = AUDIO[:, :50]
    features, lengths = layer(audio)
    assert features.shape[1] == 0
    assert layer.compute_output_shape(audio.shape) == (
        (2, 0, features.shape[2]),
        (2,),
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_inputs_with_unknown_dims(name):
    make, inputs, dtypes = CASES[name]
    layer = make()
    symbolic = [
        keras.Input(batch_shape=(None,) * x.ndim, dtype=x.dtype.name) for x in inputs
    ]
    for i, x in enumerate(inputs):  # the feature size stays known
        if x.ndim == 3:
            symbolic[i] = keras.Input(
                batch_shape=(None, None, x.shape[-1]), dtype=x.dtype.name
            )
    outputs = flat(layer(*symbolic))
    computed = layer.compute_output_shape(*[tuple(s.shape) for s in symbolic])
    assert [tuple(o.shape) for o in outputs] == as_shapes(computed)
    # Symbolic outputs keep `call`'s dtypes (int32 lengths stay int32).
    assert tuple(o.dtype for o in outputs) == dtypes
    # The eager outputs fit the symbolic shapes.
    assert_fits(computed, [tuple(x.shape) for x in flat(layer(*inputs))])


def test_known_time_size_is_computed():
    layer = tt.FrameStacking(0, 2, stride=3)
    x = keras.Input(batch_shape=(None, 10, 6))
    features, lengths = layer(x)
    assert layer.compute_output_shape((None, 10, 6)) == ((None, 4, 18), (None,))
    assert tuple(features.shape) == (None, 4, 18) and tuple(lengths.shape) == (None,)
    encoder = TransducerEncoder(units=4, num_layers=1, stack=4)
    assert encoder.compute_output_shape((3, 10, 6)) == ((3, 3, 4), (3,))
    audio = tt.LogMelSpectrogram(8000, 25.0, 10.0, n_mels=7)
    # 200-sample frames every 80 samples: 1 + (1000 - 200) // 80 = 11.
    assert audio.compute_output_shape((None, 1000)) == ((None, 11, 7), (None,))


def test_a_functional_front_end_equals_the_eager_layers():
    keras.utils.set_random_seed(3)
    mel = tt.LogMelSpectrogram(8000, 25.0, 10.0, n_mels=7)
    norm = tt.FeatureNormalization()
    encoder = TransducerEncoder(units=4, num_layers=1, stack=2)
    audio = keras.Input(batch_shape=(None, None))
    audio_lengths = keras.Input(batch_shape=(None,), dtype="int32")
    features, frames = mel(audio, audio_lengths)
    features, frames = norm(features, frames)
    encoded, encoded_lengths = encoder(features, frames)
    model = keras.Model([audio, audio_lengths], [encoded, encoded_lengths])
    assert tuple(encoded.shape) == (None, None, 4)
    assert encoded_lengths.dtype == "int32"
    got, got_lengths = model([AUDIO, AUDIO_LENGTHS])
    want, want_lengths = encoder(*norm(*mel(AUDIO, AUDIO_LENGTHS)))
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_array_equal(got_lengths, want_lengths)
    assert_fits(
        encoder.compute_output_shape(
            *norm.compute_output_shape(*mel.compute_output_shape(AUDIO.shape))
        ),
        [got.shape, got_lengths.shape],
    )


def test_summary_of_a_model_of_called_layers():
    # Keras's summary calls compute_output_shape with the build's shapes.
    class FrontEnd(keras.Model):
        def __init__(self):
            super().__init__()
            self.mel = tt.LogMelSpectrogram(8000, 25.0, 10.0, n_mels=7)
            self.stacking = tt.FrameStacking(0, 1, stride=2)
            self.norm = tt.FeatureNormalization()
            self.encoder = TransducerEncoder(units=4, num_layers=1, stack=2)

        def call(self, audio, lengths):
            x, n = self.mel(audio, lengths)
            x, n = self.norm(*self.stacking(x, n))
            return self.encoder(x, n)

    model = FrontEnd()
    model(AUDIO, AUDIO_LENGTHS)
    lines = []
    model.summary(print_fn=lambda line, **kwargs: lines.append(line))
    text = "\n".join(lines)
    assert "((2, 11, 7), (2))" in text  # the log-mel layer's outputs
    assert "((2, 6, 14), (2))" in text  # stacked frames: ceil(11 / 2), 2 * 7
    assert "((2, 3, 4), (2))" in text  # encoded: ceil(6 / 2) frames
