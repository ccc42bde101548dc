# SPDX-License-Identifier: Apache-2.0
"""The transducer command line end to end on the bundled digits, and its errors.

What a user does: train at 8 kHz, then evaluate / export / transcribe
without repeating the rate; train with the pruned loss; run `train` again
(resume, nothing to do, refuse, --overwrite); transcribe recordings at other
rates (resampled).
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from tf_transducer.data import load_audio
from tf_transducer.data import read_manifest
from tf_transducer.data import resample
from tf_transducer.data.corpora import manifest
from tf_transducer.export import TransducerStream

DIGITS = "zero one two three four five six seven eight nine".split()
SMALL = dict(
    audio_sample_rate=8000,
    n_mels=20,
    encoder_units=16,
    text_encoder="words",
    train_files=manifest("digits_dev"),
)


def run(command, **flags):
    argv = [sys.executable, "-m", "tf_transducer.cli.transducer", command]
    argv += [f"--{k}={v}" for k, v in flags.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


# What TensorFlow, absl and the TFLite converter print in every process
# (how many lines depends on the machine: CUDA probes, child processes).
TF_NOISE = (
    "WARNING: All log messages before absl",
    "INFO: Created TensorFlow Lite",
    "fully_quantize:",
    "To enable the following instructions",
)


def tf_noise(line):
    blank = not line.strip()
    return blank or line[:5] in ("E0000", "I0000", "W0000") or line.startswith(TF_NOISE)


def ok(result):
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


@pytest.mark.slow  # trains, evaluates, exports: about 70 s
def test_pipeline_at_8_khz_without_repeating_the_rate(tmp_path):
    run_dir, export_dir = tmp_path / "run", tmp_path / "export"
    result = ok(
        run(
            "train",
            dev_files=manifest("digits_dev"),
            epochs=2,
            word_delimiter=True,  # what the demo trains with
            checkpoint_dir=run_dir,
            **SMALL,
        )
    )
    assert (run_dir / "best.keras").is_file() and (run_dir / "history.csv").is_file()
    assert "val_wer" in result.stdout
    assert "training stopped: all 2 epochs" in result.stdout
    # evaluate / export / transcribe read 8 kHz and 20 bands from the run.
    result = ok(
        run("evaluate", test_files=manifest("digits_test"), checkpoint_dir=run_dir)
    )
    assert "54 utterances: WER" in result.stdout
    digits_lm = tmp_path / "digits.arpa"
    unigrams = [f"-1.0\t{w}\t0.0" for w in ["<s>", "</s>", "<unk>", *DIGITS]]
    bigrams = [f"-0.5\t{w} {w}" for w in DIGITS]  # KenLM wants n >= 2
    digits_lm.write_text(
        f"\\data\\\nngram 1={len(unigrams)}\nngram 2={len(bigrams)}\n\n"
        + "\\1-grams:\n" + "\n".join(unigrams)
        + "\n\n\\2-grams:\n" + "\n".join(bigrams) + "\n\n\\end\\\n"
    )  # fmt: skip
    result = ok(
        run(
            "evaluate",
            test_files=manifest("digits_test"),
            beam_width=2,
            beam_method="standard",
            lm_binary_path=digits_lm,
            checkpoint_dir=run_dir,
        )
    )
    assert "54 utterances: WER" in result.stdout
    ids = [str(i) for i in range(1, 14)]  # (ids past the vocabulary are ignored)
    token_unigrams = [f"-1.1\t{w}\t-0.2" for w in ["<s>", "</s>", *ids]]
    token_bigrams = [f"-0.4\t{a} {b}" for a, b in zip(ids, ids[1:], strict=False)]
    token_lm = tmp_path / "tokens.arpa"
    token_lm.write_text(
        f"\\data\\\nngram 1={len(token_unigrams)}\nngram 2={len(token_bigrams)}"
        + "\n\n\\1-grams:\n" + "\n".join(token_unigrams)
        + "\n\n\\2-grams:\n" + "\n".join(token_bigrams) + "\n\n\\end\\\n"
    )  # fmt: skip
    tokens = dict(test_files=manifest("digits_test"), checkpoint_dir=run_dir,
                  token_lm=token_lm, token_lm_scale=0.2)  # fmt: skip
    result = ok(run("evaluate", beam_width=2, **tokens))
    assert "54 utterances: WER" in result.stdout
    result = run("evaluate", **tokens)
    assert result.returncode == 1
    assert "--token_lm is fused by the modified beam search" in result.stderr
    result = run(
        "evaluate",
        test_files=manifest("digits_test"),
        lm_binary_path="no.arpa",
        checkpoint_dir=run_dir,
    )
    assert result.returncode == 1 and "--lm_binary_path: 'no.arpa'" in result.stderr
    result = run(
        "evaluate",
        test_files=manifest("digits_test"),
        checkpoint_dir=run_dir,
        audio_sample_rate=16000,
    )
    assert result.returncode == 1
    assert "--audio_sample_rate=16000 contradicts" in result.stderr
    assert "which says 8000" in result.stderr
    result = ok(
        run(
            "export",
            export_dir=export_dir,
            checkpoint_dir=run_dir,
            quantization="int8",  # calibrated on the run's own training manifest
            calibration_utterances=20,
        )
    )
    saved = json.loads((export_dir / "text_encoder.json").read_text())
    assert saved["config"]["word_delimiter"] is True  # the stream drops it
    meta = (export_dir / "export.json").read_text()
    assert '"sample_rate": 8000' in meta and '"quantization": "int8"' in meta
    assert len(result.stdout.splitlines()) <= 12, result.stdout
    ours = [line for line in result.stderr.splitlines() if not tf_noise(line)]
    assert not ours, result.stderr[-3000:]

    # Real-rate input: the same recording at other rates is resampled.
    test_dir = os.path.join(os.path.dirname(manifest("digits_test")), "test")
    audio, rate = sf.read(os.path.join(test_dir, sorted(os.listdir(test_dir))[0]))
    texts = {}
    for target in (8000, 16000, 44100, 48000):
        wav = tmp_path / f"a{target}.wav"
        sf.write(wav, resample(audio, rate, target), target, subtype="PCM_16")
        if target == 44100:  # the command line
            texts[target] = ok(run("transcribe", export_dir=export_dir, wav=wav))
            texts[target] = texts[target].stdout.strip()
        else:  # the same through the library, which the command line uses
            stream = TransducerStream(str(export_dir))
            texts[target] = stream.transcribe(load_audio(str(wav), 8000))
        assert set(texts[target].split()) <= set(DIGITS)
    assert len(set(texts.values())) == 1, texts
    sf.write(tmp_path / "empty.wav", np.zeros(0), 8000, subtype="PCM_16")
    result = run("transcribe", export_dir=export_dir, wav=tmp_path / "empty.wav")
    assert result.returncode == 1 and "empty.wav: no audio samples" in result.stderr
    result = run(
        "evaluate", test_files=manifest("digits_test"), checkpoint_dir=tmp_path
    )
    assert result.returncode == 1 and "holds no checkpoint" in result.stderr


def test_pruned_loss_trains_from_the_command_line(tmp_path):
    result = ok(
        run("train", loss="pruned", epochs=1, checkpoint_dir=tmp_path / "r", **SMALL)
    )
    assert "Gradients do not exist" not in result.stderr
    assert "nan" not in result.stdout.split("training stopped")[0].lower()


def test_fused_loss_trains_from_the_command_line(tmp_path):
    import keras

    from tf_transducer.losses import FusedRnntLoss

    run_dir = tmp_path / "r"
    result = ok(run("train", loss="fused", epochs=1, checkpoint_dir=run_dir, **SMALL))
    assert "Gradients do not exist" not in result.stderr
    assert "nan" not in result.stdout.split("training stopped")[0].lower()
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config"]["training"]["loss"] == "fused"
    model = keras.models.load_model(run_dir / "best.keras")
    assert isinstance(model.loss, FusedRnntLoss)


@pytest.mark.slow  # trains, evaluates, exports, transcribes: about 40 s
def test_a_hybrid_ctc_model_from_the_command_line(tmp_path):
    """--ctc_weight (with the pruned loss) and --weight_decay train a hybrid;
    --decoder ctc evaluates and transcribes through its CTC head."""
    run_dir, export_dir = tmp_path / "r", tmp_path / "e"
    flags = dict(SMALL, loss="pruned", ctc_weight=0.3, weight_decay=1e-4, epochs=1,
                 checkpoint_dir=run_dir)  # fmt: skip
    ok(run("train", **flags))
    saved = json.loads((run_dir / "run.json").read_text())["config"]
    assert saved["training"]["ctc_weight"] == 0.3
    assert saved["optimizer"]["weight_decay"] == 1e-4
    for decoder in ("ctc", "transducer"):
        evaluated = ok(run("evaluate", checkpoint_dir=run_dir, decoder=decoder,
                           test_files=manifest("digits_dev")))  # fmt: skip
        assert "utterances: WER" in evaluated.stdout
    ok(run("export", checkpoint_dir=run_dir, export_dir=export_dir))
    assert json.loads((export_dir / "export.json").read_text())["ctc_head"] is True
    clip = read_manifest(manifest("digits_dev"))[0].path
    ok(run("transcribe", export_dir=export_dir, wav=clip, decoder="ctc"))
    refused = run("transcribe", export_dir=export_dir, wav=clip, decoder="ctc",
                  hotwords=tmp_path / "x.txt")  # fmt: skip
    assert refused.returncode == 1 and "not --decoder ctc" in refused.stderr
    refused = run("train", **dict(flags, ctc_weight=-1, checkpoint_dir=tmp_path / "x"))
    assert refused.returncode == 1 and "ctc_weight must be >= 0" in refused.stderr


@pytest.mark.slow  # trains, evaluates, exports, transcribes: about 40 s
def test_a_token_and_duration_transducer_from_the_command_line(tmp_path):
    import keras

    from tf_transducer.losses import TdtLoss

    run_dir, export_dir = tmp_path / "r", tmp_path / "e"
    flags = dict(SMALL, loss="tdt", durations="0,1,2", epochs=1, checkpoint_dir=run_dir)
    ok(run("train", **flags))
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config"]["model"]["joiner"]["durations"] == [0, 1, 2]
    model = keras.models.load_model(run_dir / "best.keras")
    assert isinstance(model.loss, TdtLoss) and model.joiner.durations == (0, 1, 2)
    evaluated = ok(run("evaluate", checkpoint_dir=run_dir,
                       test_files=manifest("digits_dev"), beam_width=2))  # fmt: skip
    assert "utterances: WER" in evaluated.stdout
    ok(run("export", checkpoint_dir=run_dir, export_dir=export_dir))
    meta = json.loads((export_dir / "export.json").read_text())
    assert meta["durations"] == [0, 1, 2]
    clips = [u.path for u in read_manifest(manifest("digits_dev"))[:2]]
    ok(run("transcribe", export_dir=export_dir, wav=clips[0]))
    # Words with times and confidence, as JSON lines, from the four programs
    # and from the one-program recognizer: the same.
    one_dir, hot = tmp_path / "one", tmp_path / "hot.txt"
    ok(run("export", checkpoint_dir=run_dir, export_dir=one_dir, single_program=True))
    records = {}
    for folder in (export_dir, one_dir):
        out = tmp_path / f"{folder.name}.jsonl"
        ok(run("transcribe", export_dir=folder, wav=",".join(clips), timestamps=True,
               confidence=True, output=out))  # fmt: skip
        records[folder.name] = [json.loads(x) for x in out.read_text().splitlines()]
    assert records["e"] == records["one"]
    assert [r["file"] for r in records["e"]] == clips
    for record in records["e"]:
        assert [w["word"] for w in record["words"]] == record["text"].split()
        for w in record["words"]:
            assert 0 <= w["start"] < w["end"] and 0 <= w["confidence"] <= 1
    hot.write_text("one two\nnine :x\n")
    refused = run("transcribe", export_dir=export_dir, wav=clips[0], hotwords=hot)
    assert refused.returncode == 1 and "hot.txt:2: the score" in refused.stderr
    refused = run("transcribe", export_dir=one_dir, wav=clips[0], hotwords=hot)
    assert refused.returncode == 1 and "compiled in" in refused.stderr
    hot.write_text("one two\n")
    ok(run("transcribe", export_dir=export_dir, wav=clips[0], hotwords=hot))
    refused = run(
        "train", **dict(flags, durations="1,2", checkpoint_dir=tmp_path / "x")
    )
    assert refused.returncode == 1
    assert "durations must hold 0 and 1" in refused.stderr, refused.stderr[-2000:]


class Interrupt(Exception):
    pass


@pytest.mark.slow  # trains four times: about 30 s
def test_rerunning_train_resumes_refuses_or_overwrites(tmp_path):
    import keras

    from tf_transducer.training import transducer_recipe as recipe

    run_dir = tmp_path / "run"

    class StopAfterFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise Interrupt  # as if the machine went down after epoch 1

    from tf_transducer.training.config import DataConfig
    from tf_transducer.training.config import FeaturesConfig
    from tf_transducer.training.config import ModelConfig
    from tf_transducer.training.config import RunConfig
    from tf_transducer.training.config import TrainingConfig

    config = RunConfig(
        model=ModelConfig(encoder={"units": 16}),
        features=FeaturesConfig(sample_rate=8000, n_mels=20),
        data=DataConfig(train_files=(SMALL["train_files"],), text_encoder="words"),
        training=TrainingConfig(epochs=3),
    )
    kwargs = dict(config=config, checkpoint_dir=str(run_dir), verbose=0)
    with pytest.raises(Interrupt):
        recipe.train(**kwargs, callbacks=[StopAfterFirstEpoch()])
    assert (run_dir / "backup").is_dir()
    flags = dict(SMALL, epochs=3, checkpoint_dir=run_dir)
    result = ok(run("train", **flags))
    assert "resuming at epoch 2 of 3" in result.stdout
    assert "training stopped: all 3 epochs" in result.stdout
    epochs = [line.split(",")[0] for line in (run_dir / "history.csv").open()][1:]
    assert epochs == ["0", "1", "2"]
    model_time = os.path.getmtime(run_dir / "best.keras")
    # The same run again (through the library, as the command line calls it).
    _, _, history = recipe.train(**kwargs)
    assert history is None
    assert os.path.getmtime(run_dir / "best.keras") == model_time
    result = run("train", **dict(flags, epochs=4, encoder_units=8))
    assert result.returncode == 1
    assert "holds a run with another configuration" in result.stderr
    assert "model.encoder.units: 16 -> 8" in result.stderr
    assert "training.epochs: 3 -> 4" in result.stderr
    assert os.path.getmtime(run_dir / "best.keras") == model_time
    result = ok(run("train", **dict(flags, epochs=1, overwrite=True)))
    assert "training from epoch 1 of 1" in result.stdout
    epochs = [line.split(",")[0] for line in (run_dir / "history.csv").open()][1:]
    assert epochs == ["0"]


def test_help_lists_our_flags_grouped_and_exits_0():
    result = ok(run("--help"))
    assert "data flags:" in result.stdout and "training flags:" in result.stdout
    assert "--train_files" in result.stdout and "--loss" in result.stdout
    assert "--xla_" not in result.stdout  # TensorFlow's own: --helpfull


def librispeech_tree(root, count):
    """A LibriSpeech chapter of `count` bundled digits utterances (FLAC)."""
    from tf_transducer.data import read_manifest

    chapter = root / "LibriSpeech" / "dev-clean" / "84" / "121123"
    chapter.mkdir(parents=True)
    digits = read_manifest(manifest("digits_dev"))[:count]
    lines = []
    for i, u in enumerate(digits):
        audio, rate = sf.read(u.path)
        sf.write(chapter / f"84-121123-{i:04d}.flac", audio, rate)
        lines.append(f"84-121123-{i:04d} {u.transcript.upper()}\n")
    (chapter / "84-121123.trans.txt").write_text("".join(lines))
    return chapter, digits


def test_manifest_lists_a_librispeech_tree_and_names_bad_flags(tmp_path):
    from tf_transducer.data import read_manifest

    chapter, digits = librispeech_tree(tmp_path, 2)
    out = tmp_path / "dev.jsonl"
    result = ok(run("manifest", corpus=tmp_path / "LibriSpeech", output=out))
    assert f"wrote {out}: 2 utterances" in result.stdout
    back = read_manifest(str(out))
    assert [(u.path, u.transcript) for u in back] == [
        (str(chapter / f"84-121123-{i:04d}.flac"), u.transcript)
        for i, u in enumerate(digits)
    ]
    seconds = [sf.info(u.path).frames / sf.info(u.path).samplerate for u in digits]
    np.testing.assert_allclose([u.duration for u in back], seconds)
    result = run("manifest", output=out)  # a command-line error: exit 1
    assert result.returncode == 1, result.stderr[-2000:]
    assert "error: --corpus is needed" in result.stderr, result.stderr[-2000:]
    from tf_transducer.cli._common import CliError
    from tf_transducer.cli.transducer import write_corpus_manifest

    for corpus, output, message in [  # the others, in this process
        (str(tmp_path / "LibriSpeech"), "", "--output is needed"),
        (str(tmp_path), str(tmp_path / "x.csv"), "--output: .* .jsonl"),
        (str(chapter / "nope.tsv"), str(out), "--corpus: corpus .* does"),
        (str(out), str(out), "--corpus: corpus .* none of the layouts"),
    ]:
        with pytest.raises(CliError, match=message):
            write_corpus_manifest(corpus, output)
    assert read_manifest(str(out)) == back  # the failed runs left it alone


@pytest.mark.slow  # trains, exports, transcribes: about 40 s
def test_conformer_trains_on_a_librispeech_tree_and_streams(tmp_path):
    chapter, _ = librispeech_tree(tmp_path, 12)
    corpus = tmp_path / "LibriSpeech"
    run_dir, export_dir = tmp_path / "run", tmp_path / "tflite"
    conformer = dict(encoder="conformer", conformer_dim=16, conformer_layers=2,
                     conformer_heads=2, subsampling=4, chunk_size=2,
                     left_context=4, chunk_sizes="1,2", lr_warmup_epochs=1)  # fmt: skip
    lstm_only = ("encoder_units",)  # refused with --encoder conformer, tried below
    flags = {k: v for k, v in SMALL.items() if k not in lstm_only}
    flags.update(train_files=corpus, epochs=2, checkpoint_dir=run_dir)
    result = ok(run("train", **flags, **conformer))
    assert "training stopped: all 2 epochs" in result.stdout
    saved = json.loads((run_dir / "run.json").read_text())
    encoder = saved["config"]["model"]["encoder"]
    assert (encoder["class_name"], encoder["chunk_sizes"], encoder["left_context"]) == (
        "ConformerEncoder", [1, 2], 4,
    )  # fmt: skip
    assert saved["config"]["data"]["train_files"] == [str(corpus)]
    ok(run("export", checkpoint_dir=run_dir, export_dir=export_dir))
    meta = json.loads((export_dir / "export.json").read_text())
    assert (meta["encoder"], meta["chunk_size"], meta["left_context"]) == (
        "ConformerEncoder", 2, 4,
    )  # fmt: skip
    assert meta["chunk_frames"] == 8
    clip = chapter / "84-121123-0000.flac"
    streamed = ok(run("transcribe", export_dir=export_dir, wav=clip)).stdout
    want = TransducerStream(str(export_dir)).transcribe(load_audio(str(clip), 8000))
    assert streamed.strip() == want.strip()
    heads = (
        "model.encoder .ConformerEncoder.: num_heads must divide d_model, got "
        "num_heads=3 for d_model=16 .set by --conformer_dim, --conformer_heads."
    )
    for extra, message in [
        (dict(encoder="lstm", chunk_size=2), "--chunk_size is for --encoder conformer"),
        (dict(conformer, encoder_units=16), "--encoder_units is for --encoder lstm"),
        (dict(conformer, conformer_heads=3), heads),
        (dict(conformer, chunk_sizes="1,x"), "--chunk_sizes must be a list of ints"),
    ]:
        result = run("train", **dict(flags, checkpoint_dir=tmp_path / "bad"), **extra)
        assert result.returncode == 1, result.stderr[-2000:]
        assert re.search(f"error: {message}", result.stderr), result.stderr[-2000:]


def test_train_on_a_localhost_cluster_through_launch(tmp_path):
    # As the README documents: the same flags, two workers on this machine.
    run_dir = tmp_path / "run"
    flags = dict(SMALL, epochs=1, train_batch_size=8, checkpoint_dir=run_dir)
    argv = [sys.executable, "-m", "tf_transducer.cli.launch", "--workers=2",
            "--timeout_s=400", f"--log_dir={tmp_path / 'logs'}", "--",
            "python", "-m", "tf_transducer.cli.transducer", "train",
            *(f"--{k}={v}" for k, v in flags.items())]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = ok(subprocess.run(argv, capture_output=True, text=True, env=env,
                               timeout=600))  # fmt: skip
    assert "training stopped: all 1 epochs" in result.stdout
    assert result.stdout.count("epoch 1/1") == 1  # the chief alone prints
    state = json.loads((run_dir / "run.json").read_text())["state"]
    assert state["finished"] and state["epochs_done"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "run"]
    assert (run_dir / "best.keras").is_file()
    ok(run("evaluate", test_files=manifest("digits_test"), checkpoint_dir=run_dir))
