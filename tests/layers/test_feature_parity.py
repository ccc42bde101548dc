# SPDX-License-Identifier: Apache-2.0
"""The feature layers' TFLite programs agree with Keras on real-speech cases.

Two synthetic voices (tests/layers/speech, from espeak-ng and flite at
16 kHz, 16-bit) are turned into what recordings hold: long digital
silences, very quiet passages, clipping, DC offsets, 8 kHz telephone
audio played at 16 kHz. On each, the log-mel / MFCC values of the LiteRT
program are within 1e-4 of the Keras layer's.
"""

import os

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.layers import Mfcc

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speech")
TOLERANCE = 1e-4


def pcm16(x):
    """x as a 16-bit recording holds it (rounded, clipped), in [-1, 1)."""
    return np.clip(np.round(x * 32768), -32768, 32767).astype(np.float32) / 32768


def voice(name):
    audio, rate = sf.read(os.path.join(HERE, name), dtype="float32")
    assert rate == 16000
    return audio


def telephone(x):
    """Band-limited to 4 kHz and back at 16 kHz: the top half is empty."""
    spectrum = np.fft.rfft(x)
    spectrum[len(spectrum) // 2 :] = 0
    return np.fft.irfft(spectrum, len(x))


CONDITIONS = {
    "as recorded": lambda x: x,
    "long silences": lambda x: np.concatenate([np.zeros(24000), x, np.zeros(40000), x]),
    "quiet, -40 dB": lambda x: 0.01 * x,
    "very quiet, -70 dB": lambda x: 3e-4 * x,
    "clipped": lambda x: np.clip(8 * x, -1, 1),
    "DC offset": lambda x: 0.5 * x + 0.05,
    "DC offset, quiet": lambda x: 1e-3 * x + 0.01,
    "telephone band": telephone,
}
LAYERS = {
    "log-mel 80": lambda: LogMelSpectrogram(n_mels=80),
    "log-mel 40, 8 kHz": lambda: LogMelSpectrogram(sample_rate=8000, n_mels=40),
    "MFCC (DeepSpeech)": lambda: Mfcc(),
}


def lite_program(layer):
    """A LiteRT runner of the layer's TFLite program: audio [N] -> [T, F]."""
    from ai_edge_litert.interpreter import Interpreter

    function = tf.function(lambda audio: layer(audio)[0])
    concrete = function.get_concrete_function(tf.TensorSpec([1, None], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], layer)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    (audio_in,) = interpreter.get_input_details()
    (values_out,) = interpreter.get_output_details()

    def run(audio):
        interpreter.resize_tensor_input(audio_in["index"], [1, len(audio)])
        interpreter.allocate_tensors()
        interpreter.set_tensor(audio_in["index"], audio[None])
        interpreter.invoke()
        return interpreter.get_tensor(values_out["index"])[0]

    return run


@pytest.fixture(scope="module", params=list(LAYERS))
def layer_and_program(request):
    layer = LAYERS[request.param]()
    return layer, lite_program(layer)


@pytest.mark.parametrize("voice_name", ["espeak.flac", "flite.flac"])
def test_tflite_features_equal_keras_on_real_speech(layer_and_program, voice_name):
    layer, program = layer_and_program
    source = voice(voice_name)
    if layer.sample_rate == 8000:
        source = telephone(source)[::2]  # band-limited first: no aliasing
    worst = {}
    for condition, make in CONDITIONS.items():
        audio = pcm16(make(source.astype(np.float64)))
        want = layer(audio[None])[0][0].numpy()
        got = program(audio)
        assert got.shape == want.shape, condition
        worst[condition] = float(np.abs(got - want).max())
    assert max(worst.values()) <= TOLERANCE, worst


def test_without_the_floor_the_programs_disagree():
    """What the floor is for: DC-offset and telephone audio differ without it."""
    layer = Mfcc(dynamic_range_db=None)
    program = lite_program(layer)
    audio = pcm16(CONDITIONS["DC offset, quiet"](voice("espeak.flac").astype(float)))
    want = layer(audio[None])[0][0].numpy()
    assert np.abs(program(audio) - want).max() > 10 * TOLERANCE
