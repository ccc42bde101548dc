# SPDX-License-Identifier: Apache-2.0
"""Feature layers vs float64 numpy references, padding, TFLite, config."""

import numpy as np
import pytest
import tensorflow as tf

from tests.layers import feature_reference as ref
from tf_transducer.layers import FeatureNormalization
from tf_transducer.layers import FrameStacking
from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.layers import Mfcc


def audio_batch(lengths, pad_to, seed=0, scale=0.1):
    rng = np.random.default_rng(seed)
    x = np.zeros((len(lengths), pad_to), np.float32)
    for b, n in enumerate(lengths):
        t = np.arange(n) / 16000
        x[b, :n] = scale * (
            np.sin(2 * np.pi * (200 + 300 * b) * t) + rng.normal(size=n)
        )
    return x, np.array(lengths, np.int32)


def test_log_mel_matches_the_reference():
    layer = LogMelSpectrogram(n_mels=40, f_min=20.0, f_max=7600.0, log_offset=1e-6)
    mel = tf.signal.linear_to_mel_weight_matrix(
        40, 257, 16000, 20.0, 7600.0, dtype=tf.float64
    ).numpy()
    x, lengths = audio_batch([16000, 9000, 300], 16000)
    got, frames = layer(x, lengths)
    np.testing.assert_array_equal(frames, [98, 54, 0])  # 1 + (n - 400) // 160
    for b in range(3):
        want = ref.log_mel(x[b, : lengths[b]], mel, 400, 160, 512, 1e-6)
        np.testing.assert_allclose(got[b, : frames[b]], want, atol=2e-4)
        assert np.all(got[b, frames[b] :].numpy() == 0)


@pytest.mark.parametrize("dynamic_range_db", [60.0, None])
def test_mfcc_is_deepspeech_and_matches_the_reference(dynamic_range_db):
    layer = Mfcc(dynamic_range_db=dynamic_range_db)
    x, lengths = audio_batch([16000, 7000], 16000, seed=1)
    got, frames = layer(x, lengths)
    np.testing.assert_array_equal(frames, [49, 21])
    for b in range(2):
        audio = x[b, : lengths[b]]
        want = ref.mfcc(audio, dynamic_range_db=dynamic_range_db)
        np.testing.assert_allclose(got[b, : frames[b]], want, atol=1e-3)
        if dynamic_range_db is not None:
            continue
        # TensorFlow's own AudioSpectrogram + Mfcc ops (what DeepSpeech 0.9 runs).
        spectrogram = tf.raw_ops.AudioSpectrogram(
            input=audio[:, None], window_size=512, stride=320, magnitude_squared=True
        )
        want = tf.raw_ops.Mfcc(
            spectrogram=spectrogram,
            sample_rate=16000,
            upper_frequency_limit=8000.0,
            lower_frequency_limit=20.0,
            filterbank_channel_count=40,
            dct_coefficient_count=26,
        )[0]
        np.testing.assert_allclose(got[b, : frames[b]], want, atol=1e-4)


def test_frame_stacking_matches_the_reference():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 11, 4)).astype(np.float32)
    lengths = np.array([11, 7, 0], np.int32)
    for left, right, stride in ((9, 9, 1), (0, 2, 3), (1, 0, 2)):
        got, out_lengths = FrameStacking(left, right, stride)(x, lengths)
        for b in range(3):
            want = ref.stack_frames(x[b], lengths[b], left, right, stride)
            assert out_lengths[b] == len(want)
            np.testing.assert_allclose(got[b, : len(want)], want, rtol=1e-6)
            assert np.all(got[b, len(want) :].numpy() == 0)


def test_normalization_per_utterance_and_global():
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2, 9, 3)) * [1, 2, 3] + [5, -1, 0]).astype(np.float32)
    lengths = np.array([9, 4], np.int32)
    got, _ = FeatureNormalization()(x, lengths)
    for b in range(2):
        v = x[b, : lengths[b]].astype(np.float64)
        want = (v - v.mean(0)) / np.sqrt(v.var(0) + 1e-5)
        np.testing.assert_allclose(got[b, : lengths[b]], want, atol=1e-5)
    layer = FeatureNormalization(mode="global")
    layer.adapt([(x, lengths)])
    valid = np.concatenate([x[0], x[1, :4]]).astype(np.float64)
    np.testing.assert_allclose(layer.mean, valid.mean(0), rtol=1e-5)
    np.testing.assert_allclose(layer.variance, valid.var(0), rtol=1e-5)
    got, _ = layer(x, lengths)
    want = (x[1, :4] - valid.mean(0)) / np.sqrt(valid.var(0) + 1e-5)
    np.testing.assert_allclose(got[1, :4], want, atol=1e-5)
    assert np.all(got[1, 4:].numpy() == 0)


def chain(audio, lengths):
    """Every feature layer in a row, as a model would use them."""
    mfcc, n = Mfcc()(audio, lengths)
    stacked, n = FrameStacking(2, 2, stride=2)(mfcc, n)
    return FeatureNormalization()(stacked, n)


@pytest.mark.parametrize("name", ["log_mel", "chain"])
def test_padding_does_not_change_features(name):
    layer = LogMelSpectrogram() if name == "log_mel" else chain
    a, lengths = audio_batch([12000, 5000], 12000, seed=4)
    b = np.pad(a, [[0, 0], [0, 7777]])
    b[:, 12000:] = 3.0  # whatever the padding holds
    b[1, 5000:] = 3.0
    got_a, n_a = layer(a, lengths)
    got_b, n_b = layer(b, lengths)
    np.testing.assert_array_equal(n_a, n_b)
    for i in range(2):
        np.testing.assert_allclose(got_a[i, : n_a[i]], got_b[i, : n_b[i]], atol=1e-5)


def lite_run(fn, x, lengths):
    from ai_edge_litert.interpreter import Interpreter

    concrete = tf.function(fn).get_concrete_function(
        tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.int32)
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    inputs = interpreter.get_input_details()
    for detail, value in zip(inputs, (x, lengths), strict=True):
        interpreter.resize_tensor_input(detail["index"], value.shape)
    interpreter.allocate_tensors()
    for detail, value in zip(inputs, (x, lengths), strict=True):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [
        interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()
    ]


@pytest.mark.parametrize("name", ["log_mel", "chain"])
def test_tflite_with_builtins_matches_keras(name):
    layer = LogMelSpectrogram(n_mels=80) if name == "log_mel" else chain
    x, lengths = audio_batch([16000, 11000], 16000, seed=6)
    want, want_lengths = layer(x, lengths)
    outputs = lite_run(lambda a, n: layer(a, n), x, lengths)
    got = next(o for o in outputs if o.ndim == 3)
    got_lengths = next(o for o in outputs if o.ndim == 1)
    np.testing.assert_array_equal(got_lengths, want_lengths)
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: LogMelSpectrogram(sample_rate=0), "sample_rate must be a positive"),
        (lambda: LogMelSpectrogram(frame_length_ms=-1), "frame_length_ms must be"),
        (
            lambda: LogMelSpectrogram(fft_length=256),
            "fft_length must be an int >= the window",
        ),
        (lambda: LogMelSpectrogram(f_max=9000.0), "f_max <= sample_rate / 2"),
        (lambda: LogMelSpectrogram(n_mels=0), "n_mels must be a positive"),
        (lambda: Mfcc(n_coefficients=50), r"n_coefficients \(50\) must be <="),
        (lambda: FrameStacking(left_context=-1), "left_context must be an int >= 0"),
        (lambda: FrameStacking(stride=0), "stride must be a positive"),
        (lambda: FeatureNormalization("batch"), "mode must be one of"),
    ],
)
def test_bad_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_adapt_needs_global_mode_and_frames():
    with pytest.raises(ValueError, match='needs mode="global"'):
        FeatureNormalization().adapt([])
    with pytest.raises(ValueError, match="found no frames"):
        FeatureNormalization("global").adapt([(np.zeros((1, 3, 2)), np.array([0]))])


@pytest.mark.parametrize("make", [LogMelSpectrogram, Mfcc])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_audio_within_lengths_is_an_error(make, bad):
    layer = make()
    audio, lengths = audio_batch([8000, 5000], 8000, seed=7)
    audio[1, 4999] = bad  # the last valid sample of utterance 1
    message = rf"audio must be finite within its lengths.*{bad}.*\[1, 4999\]"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        layer(audio, lengths)
    traced = tf.function(
        layer,
        input_signature=[
            tf.TensorSpec([None, None], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="audio must be finite"):
        traced(audio, lengths)
    # In the padding it changes nothing.
    clean = audio_batch([8000, 5000], 8000, seed=7)[0]
    audio[1, 4999] = clean[1, 4999]
    audio[1, 5000:] = bad
    for run in (layer, traced):
        np.testing.assert_array_equal(run(audio, lengths)[0], run(clean, lengths)[0])


@pytest.mark.parametrize("make", [LogMelSpectrogram, Mfcc])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.bool_])
def test_integer_audio_is_refused_with_its_dtype(make, dtype):
    audio = np.zeros([1, 4000], dtype)
    message = f"audio must be float32 .*got {np.dtype(dtype).name}; .*32768"
    with pytest.raises(ValueError, match=message):
        make()(audio)
    # Half and double precision are floats: computed in float32.
    audio, lengths = audio_batch([4000], 4000, seed=8)
    want, _ = make()(audio, lengths)
    got, _ = make()(audio.astype(np.float64), lengths)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_normalization_refuses_nan_integer_and_mismatched_features():
    features = np.random.default_rng(9).normal(size=(2, 6, 3)).astype(np.float32)
    lengths = np.array([6, 4], np.int32)
    for mode in ("utterance", "global"):
        layer = FeatureNormalization(mode)
        bad = features.copy()
        bad[1, 3, 2] = np.nan
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"features must be finite within its lengths.*nan.*\[1, 3, 2\]",
        ):
            layer(bad, lengths)
        bad[1, 3, 2] = features[1, 3, 2]
        bad[1, 4:] = np.inf  # padding: ignored
        want, _ = layer(features, lengths)
        np.testing.assert_array_equal(layer(bad, lengths)[0], want)
        with pytest.raises(ValueError, match="features must be float32 .*got int32"):
            layer(features.astype(np.int32), lengths)
    with pytest.raises(
        ValueError, match="features have 2 values per frame, the global"
    ):
        layer(features[..., :2], lengths)


def test_adapt_names_the_bad_batch():
    rng = np.random.default_rng(10)
    good = (rng.normal(size=(2, 5, 3)), np.array([5, 2]))
    nan = good[0].copy()
    nan[1, 1, 0] = np.nan
    padded_nan = good[0].copy()
    padded_nan[1, 2:] = np.inf  # past its length: ignored
    layer = FeatureNormalization("global")
    layer.adapt([good, (padded_nan, good[1])])
    np.testing.assert_allclose(
        layer.mean.numpy(),
        good[0][[0, 0, 0, 0, 0, 1, 1], [0, 1, 2, 3, 4, 0, 1]].mean(0),
    )
    for batch, message in [
        ((nan, good[1]),
         r"batch 1 of data: features must be finite .*nan at .* = \[1, 1, 0\]"),
        ((good[0].astype(np.int64), good[1]),
         "batch 1 of data: features must be float, got dtype int64"),
        ((good[0][..., :2], good[1]), r"batch 1 of data: features must be \[B, T, 3\]"),
        ((good[0], np.array([5, 6])), r"batch 1 of data: lengths must lie in \[0, 5\]"),
        ((good[0], np.array([5.0, 2.0])), "batch 1 of data: lengths must be 2 ints"),
        ((good[0], np.array([5])), "batch 1 of data: lengths must be 2 ints"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            FeatureNormalization("global").adapt([good, batch])


@pytest.mark.parametrize("make", [lambda: LogMelSpectrogram(n_mels=20), Mfcc])
def test_audio_too_loud_for_float32_spectra_is_named(make):
    layer = make()
    audio = np.zeros([2, 4000], np.float32)
    audio[1, 700] = 1e30  # finite, but its power spectrum is not
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"audio samples must lie"):
        layer(audio)
    # Past the lengths (padding) anything goes; at the limit the features hold.
    values, _ = layer(audio, [4000, 600])
    assert np.all(np.isfinite(values.numpy()))
    audio[1, 700] = 1e14
    values, _ = layer(audio)
    assert np.all(np.isfinite(values.numpy()))
