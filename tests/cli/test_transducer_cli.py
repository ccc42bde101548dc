"""The transducer command line end to end on the bundled digits, and its errors."""

import os
import subprocess
import sys

import numpy as np
import soundfile as sf

from tf_transducer.data.corpora import manifest


def run(command, **flags):
    argv = [sys.executable, "-m", "tf_transducer.cli.transducer", command]
    argv += [f"--{k}={v}" for k, v in flags.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def test_train_evaluate_export_transcribe(tmp_path):
    run_dir, export_dir = tmp_path / "run", tmp_path / "export"
    common = dict(audio_sample_rate=8000, n_mels=20, checkpoint_dir=run_dir)
    result = run(
        "train",
        train_files=manifest("digits_dev"),
        dev_files=manifest("digits_dev"),
        epochs=2,
        encoder_units=16,
        text_encoder="words",
        **common,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "best.keras").is_file() and (run_dir / "history.csv").is_file()
    assert "val_wer" in result.stdout
    result = run("evaluate", test_files=manifest("digits_test"), **common)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "54 utterances: WER" in result.stdout
    digits = "zero one two three four five six seven eight nine".split()
    lm = tmp_path / "digits.arpa"
    unigrams = [f"-1.0\t{w}\t0.0" for w in ["<s>", "</s>", "<unk>", *digits]]
    bigrams = [f"-0.5\t{w} {w}" for w in digits]  # KenLM wants n >= 2
    lm.write_text(
        f"\\data\\\nngram 1={len(unigrams)}\nngram 2={len(bigrams)}\n\n"
        + "\\1-grams:\n"
        + "\n".join(unigrams)
        + "\n\n\\2-grams:\n"
        + "\n".join(bigrams)
        + "\n\n\\end\\\n"
    )
    result = run(
        "evaluate",
        test_files=manifest("digits_test"),
        beam_width=2,
        lm_binary_path=lm,
        **common,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "54 utterances: WER" in result.stdout
    result = run(
        "evaluate",
        test_files=manifest("digits_test"),
        lm_binary_path="no.arpa",
        **common,
    )
    assert result.returncode == 1 and "--lm_binary_path: 'no.arpa'" in result.stderr
    result = run("export", export_dir=export_dir, **common)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (export_dir / "encoder.quant.tflite").is_file()
    test_dir = os.path.join(os.path.dirname(manifest("digits_test")), "test")
    audio, rate = sf.read(os.path.join(test_dir, sorted(os.listdir(test_dir))[0]))
    sf.write(tmp_path / "a.wav", audio, rate, subtype="PCM_16")
    result = run("transcribe", export_dir=export_dir, wav=tmp_path / "a.wav")
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(result.stdout.split()) <= set(digits)
    sf.write(tmp_path / "b.wav", np.zeros(16000), 16000, subtype="PCM_16")
    result = run("transcribe", export_dir=export_dir, wav=tmp_path / "b.wav")
    assert result.returncode == 1
    assert "sampled at 16000 Hz; the model expects 8000 Hz" in result.stderr
    result = run(
        "evaluate", test_files=manifest("digits_test"), checkpoint_dir=tmp_path
    )
    assert result.returncode == 1 and "holds no checkpoint" in result.stderr
