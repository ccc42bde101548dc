# SPDX-License-Identifier: Apache-2.0
"""The DeepSpeech command line end to end on the bundled digits, and its errors."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from tf_transducer.data import resample
from tf_transducer.data.corpora import manifest

DIGITS = dict(
    audio_sample_rate=8000,
    n_hidden=32,
    train_batch_size=8,
    dev_batch_size=27,
    test_batch_size=27,
)


def run(**flags):
    argv = [sys.executable, "-m", "tf_transducer.cli.deepspeech"]
    argv += [f"--{k}={v}" for k, v in flags.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow  # trains, tests, exports: about 45 s
def test_train_test_export_transcribe(tmp_path):
    run_dir, export_dir = tmp_path / "run", tmp_path / "export"
    result = run(
        train_files=manifest("digits_train"),
        dev_files=manifest("digits_dev"),
        test_files=manifest("digits_test"),
        epochs=2,
        train_steps_per_epoch=3,
        checkpoint_dir=run_dir,
        export_dir=export_dir,
        augment="LD",
        **DIGITS,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "54 utterances, WER" in result.stdout
    assert "exported" in result.stdout and "acoustic.tflite" in result.stdout
    assert '"quantization": "float"' in (export_dir / "export.json").read_text()
    quantised = tmp_path / "dynamic"
    result = run(
        checkpoint_dir=run_dir, export_dir=quantised, export_quantization="dynamic"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"quantization": "dynamic"' in (quantised / "export.json").read_text()
    for name in ("best.weights.h5", "model.json", "history.csv"):
        assert (run_dir / name).is_file()
    assert any((run_dir / "summaries").rglob("*tfevents*"))
    test_dir = os.path.join(os.path.dirname(manifest("digits_test")), "test")
    audio, rate = sf.read(os.path.join(test_dir, sorted(os.listdir(test_dir))[0]))
    wav = tmp_path / "digits.wav"
    sf.write(wav, audio, rate, subtype="PCM_16")
    # Any rate, without repeating the model's: resampled to 8 kHz.
    wav_44k = tmp_path / "digits_44k.wav"
    sf.write(wav_44k, resample(audio, rate, 44100), 44100, subtype="PCM_16")
    # The 44.1 kHz file resampled here as the CLI must (float32 WAV: exact).
    wav_44k_at_8k = tmp_path / "digits_44k_at_8k.wav"
    at_8k = resample(sf.read(wav_44k)[0], 44100, 8000).astype(np.float32)
    sf.write(wav_44k_at_8k, at_8k, 8000, subtype="FLOAT")
    texts = []
    for source, path in (
        (dict(checkpoint_dir=run_dir), wav),
        (dict(export_dir=export_dir), wav),
        (dict(export_dir=export_dir), wav_44k),
        (dict(export_dir=export_dir), wav_44k_at_8k),
    ):
        result = run(one_shot_infer=path, **source)
        assert result.returncode == 0, result.stderr[-3000:]
        assert set(result.stdout.strip()) <= set(" abcdefghijklmnopqrstuvwxyz'")
        texts.append(result.stdout.strip())
    # The 44.1 kHz file is transcribed as its 8 kHz resampling (an untrained
    # model near decision boundaries: only an exact input gives the same text).
    assert texts[2] == texts[3], texts
    # Training again with the same flags: the run is complete, nothing to do.
    result = run(
        train_files=manifest("digits_train"),
        dev_files=manifest("digits_dev"),
        epochs=2,
        train_steps_per_epoch=3,
        checkpoint_dir=run_dir,
        augment="LD",
        **DIGITS,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "training finished earlier" in result.stdout


def test_skip_bad_skips_and_counts_utterances_too_short_for_ctc(tmp_path):
    wav_at(tmp_path / "short.wav", 8000, 0.3)
    source = os.path.dirname(manifest("digits_dev"))
    rows = [
        f"{os.path.join(source, name)},0,{text}"
        for name, text in (
            line.split(",")[0::2]
            for line in open(manifest("digits_dev")).read().splitlines()[1:9]
        )
    ]
    (tmp_path / "m.csv").write_text(
        "wav_filename,wav_filesize,transcript\n"
        + "\n".join(rows)
        + "\nshort.wav,0,a rather long sentence\n"
    )
    result = run(
        train_files=tmp_path / "m.csv",
        checkpoint_dir=tmp_path / "r",
        epochs=1,
        skip_bad=True,
        **DIGITS,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "8 items kept, 1 bad ones skipped" in result.stderr


def test_help_lists_our_flags_and_exits_0():
    result = subprocess.run(
        [sys.executable, "-m", "tf_transducer.cli.deepspeech", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0
    assert "model flags:" in result.stdout and "--n_hidden" in result.stdout


def wav_at(path, rate, seconds=1.0):
    sf.write(path, np.zeros(int(rate * seconds)), rate, subtype="PCM_16")
    return path


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing_manifest", "--train_files: manifest '.*nope.csv' does not exist"),
        ("empty_manifest", "--train_files: manifest '.*empty.csv' is empty"),
        ("no_checkpoint", "holds no checkpoint"),
        ("alphabet", "character '.' at position .* is not in the alphabet"),
        ("contradicting_rate", "--audio_sample_rate=16000 contradicts .* says 8000"),
        ("too_long", "labels need .* CTC frames but the audio gives"),
    ],
)
def test_bad_input_is_named_and_exits_1(tmp_path, case, message):
    empty_dir = tmp_path / "empty_run"
    empty_dir.mkdir()
    if case == "missing_manifest":
        flags = dict(train_files=tmp_path / "nope.csv", checkpoint_dir=tmp_path / "r")
    elif case == "empty_manifest":
        (tmp_path / "empty.csv").write_text("wav_filename,wav_filesize,transcript\n")
        flags = dict(train_files=tmp_path / "empty.csv", checkpoint_dir=tmp_path / "r")
    elif case == "no_checkpoint":
        flags = dict(test_files=manifest("digits_test"), checkpoint_dir=empty_dir)
    elif case == "alphabet":
        (tmp_path / "alphabet.txt").write_text(" \nn\ni\nt\nw\no\n")
        flags = dict(
            train_files=manifest("digits_dev"),
            alphabet_config_path=tmp_path / "alphabet.txt",
            checkpoint_dir=tmp_path / "r",
            audio_sample_rate=8000,
        )
    elif case == "contradicting_rate":
        flags = dict(
            train_files=manifest("digits_dev"),
            epochs=1,
            train_steps_per_epoch=1,
            checkpoint_dir=tmp_path / "r",
            **DIGITS,
        )
        assert run(**flags).returncode == 0
        flags = dict(
            checkpoint_dir=tmp_path / "r",
            one_shot_infer=wav_at(tmp_path / "a.wav", 16000),
            audio_sample_rate=16000,
        )
    else:
        wav_at(tmp_path / "short.wav", 16000, 0.3)  # 14 MFCC frames
        (tmp_path / "m.csv").write_text(
            "wav_filename,wav_filesize,transcript\nshort.wav,0,a rather long sentence\n"
        )
        flags = dict(train_files=tmp_path / "m.csv", checkpoint_dir=tmp_path / "r")
    result = run(**flags)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search("error: .*" + message, result.stderr), result.stderr[-2000:]
