# SPDX-License-Identifier: Apache-2.0
"""Export folders users break: each runner names the file and the problem."""

import json
import shutil

import numpy as np
import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.export import DeepSpeechStream
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_deepspeech
from tf_transducer.export import export_transducer
from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.models import DeepSpeech
from tf_transducer.models import Transducer

ALPHABET = CharacterAlphabet.english()


def small_transducer():
    transducer = Transducer(
        ALPHABET.vocab_size,
        TransducerEncoder(units=8),
        PredictionNetwork(ALPHABET.vocab_size, embedding_dim=4, units=8),
        TransducerJoiner(ALPHABET.vocab_size, units=8),
        feature_dim=20,
    )
    transducer.build()
    return transducer


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    deepspeech = DeepSpeech(num_classes=ALPHABET.vocab_size, n_hidden=8)
    deepspeech.build()
    export_deepspeech(deepspeech, str(root / "deepspeech"), ALPHABET)
    export_transducer(
        small_transducer(),
        str(root / "transducer"),
        ALPHABET,
        LogMelSpectrogram(sample_rate=8000, n_mels=20),
    )
    return root


def broken(exports, tmp_path, kind):
    target = tmp_path / kind
    shutil.copytree(exports / kind, target)
    return target


@pytest.mark.parametrize("runner,kind", [(DeepSpeechStream, "deepspeech"),
                                         (TransducerStream, "transducer")])  # fmt: skip
@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda d: (d / "export.json").write_text("{oops"), r"export.json: not a JSON"),
        (lambda d: (d / "export.json").write_text("[1]"), r"must hold a JSON object"),
        (
            lambda d: (d / "export.json").write_text(
                json.dumps(
                    {
                        k: v
                        for k, v in json.loads((d / "export.json").read_text()).items()
                        if k != "sample_rate"
                    }
                )
            ),
            r"export.json: lacks \['sample_rate'\]",
        ),
        (
            lambda d: (d / "features.tflite").write_bytes(b"\0" * 100),
            r"features.tflite: not a readable TFLite program",
        ),
        (
            lambda d: (d / "features.tflite").write_bytes(
                (d / "features.tflite").read_bytes()[:500]
            ),
            r"features.tflite: not a readable TFLite program",
        ),
        (lambda d: (d / "features.tflite").unlink(), r"features.tflite: no such"),
    ],
)
def test_damaged_exports_are_named(exports, tmp_path, runner, kind, damage, message):
    folder = broken(exports, tmp_path, kind)
    damage(folder)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        runner(str(folder))


def test_swapped_programs_are_refused(exports, tmp_path):
    folder = broken(exports, tmp_path, "transducer")
    shutil.copy(folder / "joiner.tflite", folder / "encoder.tflite")
    with pytest.raises(ValueError, match=r"encoder.tflite: takes the inputs"):
        TransducerStream(str(folder))
    folder = broken(exports, tmp_path, "deepspeech")
    shutil.copy(folder / "features.tflite", folder / "acoustic.tflite")
    with pytest.raises(ValueError, match=r"acoustic.tflite: takes the inputs"):
        DeepSpeechStream(str(folder))


def test_runners_refuse_each_others_exports_and_bad_text_encoders(exports, tmp_path):
    with pytest.raises(ValueError, match="not of a Transducer"):
        TransducerStream(str(exports / "deepspeech"))
    with pytest.raises(ValueError, match="not of a DeepSpeech"):
        DeepSpeechStream(str(exports / "transducer"))
    folder = broken(exports, tmp_path, "transducer")
    (folder / "text_encoder.json").write_text('{"kind": "Nope"}')
    with pytest.raises(ValueError, match="text_encoder.json: unknown text encoder"):
        TransducerStream(str(folder))
    stream = TransducerStream(str(exports / "transducer"))
    assert isinstance(stream.transcribe(np.zeros(4000, np.float32)), str)


@pytest.mark.parametrize("kind", ["deepspeech", "transducer"])
def test_runners_name_bad_audio(exports, kind):
    stream = (DeepSpeechStream if kind == "deepspeech" else TransducerStream)(
        str(exports / kind)
    )
    rate = stream.sample_rate
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(rate)).astype(np.float32)
    cases = [
        (np.zeros(0, np.float32), {}, "audio is empty"),
        (np.stack([audio, audio], 1), {}, r"mono, shape \[N\]; got shape .* stereo"),
        (audio[None, None], {}, r"mono, shape \[N\]; got shape \(1, 1, "),
        (audio.astype(np.int32), {}, "float samples in .* got dtype int32"),
        (np.full(rate, np.nan, np.float32), {}, "NaN or inf"),
        (audio, {"sample_rate": 2 * rate}, f"at {2 * rate} Hz, the export takes"),
    ]
    for signal, keywords, message in cases:
        with pytest.raises(ValueError, match=message):
            stream.transcribe(signal, **keywords)
    # int16 is a documented conversion: the same samples scaled by 1 / 32768.
    pcm = np.round(audio * 32767).astype(np.int16)
    want = stream.transcribe(pcm.astype(np.float32) / 32768, sample_rate=rate)
    got = stream.transcribe(pcm)
    if kind == "deepspeech":  # (transcript, logits)
        np.testing.assert_array_equal(got[1], want[1])
        got, want = got[0], want[0]
    assert got == want


def test_quantisation_modes_are_checked(exports, tmp_path):
    with pytest.raises(ValueError, match="quantization must be one of"):
        TransducerStream(str(exports / "transducer"), quantization="int4")
    with pytest.raises(ValueError, match="holds float programs, not dynamic ones"):
        DeepSpeechStream(str(exports / "deepspeech"), quantization="dynamic")
    folder = broken(exports, tmp_path, "transducer")
    meta = json.loads((folder / "export.json").read_text())
    (folder / "export.json").write_text(json.dumps(dict(meta, quantization="int3")))
    with pytest.raises(ValueError, match="export.json: unknown quantization 'int3'"):
        TransducerStream(str(folder))


def test_int8_exports_need_calibration_audio(exports, tmp_path):
    transducer = small_transducer()
    features = LogMelSpectrogram(sample_rate=8000, n_mels=20)
    with pytest.raises(ValueError, match="calibration_audio is needed with"):
        export_transducer(transducer, str(tmp_path / "t"), ALPHABET, features,
                          quantization="int8")  # fmt: skip
    with pytest.raises(ValueError, match="calibration data is empty"):
        export_transducer(transducer, str(tmp_path / "t"), ALPHABET, features,
                          quantization="int8", calibration_audio=[])  # fmt: skip
    assert not (tmp_path / "t").exists()  # nothing half-written


@pytest.mark.parametrize("num_threads", [0, -1, "2", True, 1.5])
def test_every_runner_names_a_bad_thread_count(num_threads):
    # Program is what TransducerStream, DeepSpeechStream and
    # NeuralTransducerStream load their programs with.
    from tf_transducer.export._runner import Program

    with pytest.raises(ValueError, match="num_threads must be an int >= 1"):
        Program("no-such-program.tflite", num_threads=num_threads)
