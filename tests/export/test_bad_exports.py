# SPDX-License-Identifier: Apache-2.0
"""Export folders users break: each runner names the file and the problem."""

import json
import shutil

import numpy as np
import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.export import (
    DeepSpeechStream,
    TransducerStream,
    export_deepspeech,
    export_transducer,
)
from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.models import DeepSpeech, Transducer

ALPHABET = CharacterAlphabet.english()


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    deepspeech = DeepSpeech(num_classes=ALPHABET.vocab_size, n_hidden=8)
    deepspeech.build()
    export_deepspeech(deepspeech, str(root / "deepspeech"), ALPHABET)
    transducer = Transducer(
        ALPHABET.vocab_size,
        feature_dim=20,
        encoder_units=8,
        predictor_units=8,
        joiner_units=8,
        embedding_dim=4,
    )
    transducer.build()
    export_transducer(
        transducer,
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
                json.dumps({k: v for k, v in json.loads(
                    (d / "export.json").read_text()).items() if k != "sample_rate"})
            ),
            r"export.json: lacks \['sample_rate'\]",
        ),
        (lambda d: (d / "features.tflite").write_bytes(b"\0" * 100),
         r"features.tflite: not a readable TFLite program"),
        (lambda d: (d / "features.tflite").write_bytes(
            (d / "features.tflite").read_bytes()[:500]),
         r"features.tflite: not a readable TFLite program"),
        (lambda d: (d / "features.tflite").unlink(), r"features.tflite: no such"),
    ],
)  # fmt: skip
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
