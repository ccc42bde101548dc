# SPDX-License-Identifier: Apache-2.0
"""Seeded malformed and extreme inputs to the public API, run in a child process.

`python -m tests.fuzz_cases FAMILY FIRST COUNT` builds cases FIRST ..
FIRST + COUNT - 1 of a family (case i from seed (family, i)), runs each, and
prints one JSON line per case:

  {"case": "...", "legal": bool, "names": [...], "outcome": "ok" | "error" |
   "wrong", "error": "Type: message", "detail": "..."}

Each case decides for itself whether its input is legal. A legal case must
return what a reference computes (or an invariant that must hold); an
illegal one must raise ValueError, TypeError, FileNotFoundError or
InvalidArgumentError whose message names one of `names` (the argument, file
or flag at fault). tests/test_fuzz.py runs the families and judges.
"""

import json
import os
import sys
import tempfile
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_transducer as tt  # noqa: E402
from tests.ops.mi_reference import mi_reference  # noqa: E402
from tests.ops.rnnt_reference import rnnt_loss_reference  # noqa: E402
from tests.ops.tdt_reference import tdt_loss_reference  # noqa: E402


class Case:
    """One input: run() returns what to compare; check(result) says whether
    a legal input's result is right (None: right, else why not)."""

    def __init__(self, name, run, legal=True, names=(), check=None):
        self.name, self.run, self.legal = name, run, legal
        self.names, self.check = list(names), check


def close(want, rtol=1e-4, atol=1e-4):
    def check(got):
        got, expected = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != expected.shape:
            return f"shape {got.shape} != {expected.shape}"
        if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=False):
            return f"got {got.ravel()[:6]}, want {expected.ravel()[:6]}"
        return None

    return check


def finite(got):
    for x in tf.nest.flatten(got):
        if not np.isfinite(np.asarray(x, np.float64)).all():
            return "not finite"
    return None


# ------------------------------------------------------------------ families


def mi_cases(rng, i):
    B, S, T = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
    modified = bool(rng.integers(0, 2)) and T >= S
    px = rng.normal(size=(B, S, T if modified else T + 1))
    py = rng.normal(size=(B, S + 1, T))
    s_end = rng.integers(0, S + 1, B)
    t_end = rng.integers(S if modified else 0, T + 1, B)
    boundary = np.stack([np.zeros(B, int), np.zeros(B, int), s_end, t_end], 1)
    fn = [tt.mutual_information_recursion, tt.mutual_information_recursion_tf][i % 2]
    kind = ["legal", "big", "neg_inf", "nan_px", "inf_py", "bad_boundary",
            "float_boundary", "rank", "shape", "empty_s"][i // 2 % 10]  # fmt: skip
    if kind == "legal":
        want, _, _ = mi_reference(px, py, boundary)
        return Case(kind, lambda: fn(px, py, boundary), check=close(want))
    if kind == "big":  # |values| ~ 1e6 in float64: still exact enough
        px, py = px * 1e6, py * 1e6
        want, _, _ = mi_reference(px, py, boundary)
        return Case(kind, lambda: fn(px, py, boundary), check=close(want, 1e-6))
    if kind == "neg_inf":
        px[rng.random(px.shape) < 0.3] = -np.inf
        want, _, _ = mi_reference(px, py, boundary)
        return Case(kind, lambda: fn(px, py, boundary), check=close(want))
    if kind == "nan_px":
        px.flat[rng.integers(px.size)] = np.nan
        return Case(kind, lambda: fn(px, py), False, ["px"])
    if kind == "inf_py":
        py.flat[rng.integers(py.size)] = np.inf
        return Case(kind, lambda: fn(px, py), False, ["py"])
    if kind == "bad_boundary":
        bad = boundary.copy()
        bad[rng.integers(B), int(rng.choice([2, 3]))] += 100
        return Case(kind, lambda: fn(px, py, bad), False, ["boundary"])
    if kind == "float_boundary":
        return Case(kind, lambda: fn(px, py, boundary + 0.5), False, ["boundary"])
    if kind == "rank":
        return Case(kind, lambda: fn(px[0], py), False, ["px"])
    if kind == "shape":
        return Case(kind, lambda: fn(px, py[:, :-1]), False, ["py"])
    # S = 0 (every transcript empty): legal, the sum of py's only row.
    want, _, _ = mi_reference(px[:, :0], py[:, :1])
    return Case(kind, lambda: fn(px[:, :0], py[:, :1]), check=close(want))


def rnnt_cases(rng, i):
    B, T, S, C = 2, int(rng.integers(2, 6)), int(rng.integers(1, 4)), 5
    logits = rng.normal(size=(B, T, S + 1, C)).astype(np.float32)
    symbols = rng.integers(1, C, (B, S))
    frames = np.array([T, int(rng.integers(1, T + 1))])
    labels = np.array([S, int(rng.integers(0, S + 1))])
    boundary = np.stack([[0, 0], [0, 0], labels, frames], 1)
    lengths = dict(logit_lengths=frames, label_lengths=labels)

    def loss(**kw):
        return tt.rnnt_loss(logits, symbols, 0, reduction="none", **{**lengths, **kw})

    kind = ["legal", "padding_nan", "modified", "labels_-1", "labels_C", "nan",
            "long_frames", "negative_labels", "float_lengths", "reduction",
            "fastemit", "clamp", "delay", "blank", "batch"][i % 15]  # fmt: skip
    if kind == "legal":
        want = rnnt_loss_reference(logits, symbols, 0, boundary)
        return Case(kind, loss, check=close(want))
    if kind == "padding_nan":
        want = rnnt_loss_reference(logits, symbols, 0, boundary)
        logits[1, frames[1] :] = np.nan
        logits[1, :, labels[1] + 1 :] = np.inf
        return Case(kind, loss, check=close(want))
    if kind == "modified":
        if T < S:
            return Case(kind, lambda: loss(rnnt_type="modified"), False, ["T >= S"])
        modified_frames = np.maximum(frames, labels)
        bnd = np.stack([[0, 0], [0, 0], labels, modified_frames], 1)
        want = rnnt_loss_reference(logits, symbols, 0, bnd, "modified")
        return Case(
            kind,
            lambda: tt.rnnt_loss(logits, symbols, 0, bnd, "modified", reduction="none"),
            check=close(want),
        )
    if kind == "labels_-1":
        symbols[0, -1] = -1
        return Case(kind, loss, False, ["symbols"])
    if kind == "labels_C":
        symbols[1, 0] = C
        return Case(kind, loss, False, ["symbols"])
    if kind == "nan":
        logits[0, 0, 0, int(rng.integers(C))] = np.nan
        return Case(kind, loss, False, ["logits"])
    if kind == "long_frames":
        return Case(kind, lambda: loss(logit_lengths=frames + T), False,
                    ["logit_lengths"])  # fmt: skip
    if kind == "negative_labels":
        return Case(kind, lambda: loss(label_lengths=-labels - 1), False,
                    ["label_lengths"])  # fmt: skip
    if kind == "float_lengths":
        return Case(kind, lambda: loss(logit_lengths=frames + 0.5), False,
                    ["logit_lengths"])  # fmt: skip
    if kind == "reduction":
        return Case(
            kind,
            lambda: tt.rnnt_loss(
                logits, symbols, 0, reduction=rng.choice([None, "avg"])
            ),
            False,
            ["reduction"],
        )
    if kind == "fastemit":
        return Case(kind, lambda: loss(fastemit_lambda=float("nan")), False,
                    ["fastemit_lambda"])  # fmt: skip
    if kind == "clamp":
        return Case(kind, lambda: loss(clamp=float("nan")), False, ["clamp"])
    if kind == "delay":
        return Case(kind, lambda: loss(delay_penalty=float("inf")), False,
                    ["delay_penalty"])  # fmt: skip
    if kind == "blank":
        return Case(kind, lambda: tt.rnnt_loss(logits, symbols, C), False,
                    ["termination_symbol"])  # fmt: skip
    return Case(kind, lambda: tt.rnnt_loss(logits, symbols[:1], 0), False, ["symbols"])


def simple_cases(rng, i):
    B, T, S, C = 2, int(rng.integers(2, 8)), int(rng.integers(1, 4)), 6
    scale = [1.0, 30.0, 100.0][i % 3]
    lm = (rng.uniform(-1, 1, (B, S + 1, C)) * scale).astype(np.float32)
    am = (rng.uniform(-1, 1, (B, T, C)) * scale).astype(np.float32)
    symbols = rng.integers(1, C, (B, S))
    fn = [tt.rnnt_loss_simple, tt.rnnt_loss_smoothed][i // 3 % 2]
    kind = ["legal", "half", "nan_lm", "bad_c", "symbols", "prune_s_end",
            "prune_s_range", "pruning_ranges"][i // 6 % 8]  # fmt: skip

    def grads(lm_, am_):
        lm_t, am_t = tf.constant(lm_), tf.constant(am_)
        with tf.GradientTape() as tape:
            tape.watch([lm_t, am_t])
            value = fn(lm_t, am_t, symbols, 0, reduction="none")
        return value, tape.gradient(value, [lm_t, am_t])

    if kind == "legal":
        want = fn(lm.astype(np.float64), am.astype(np.float64), symbols, 0,
                  reduction="none")  # fmt: skip

        def check(got):
            value, gradients = got
            return close(want, 1e-4, 1e-3)(value) or finite(gradients)

        return Case(kind, lambda: grads(lm, am), check=check)
    if kind == "half":
        half_lm, half_am = lm.astype(np.float16), am.astype(np.float16)
        want = fn(half_lm.astype(np.float64), half_am.astype(np.float64), symbols, 0,
                  reduction="none")  # fmt: skip
        return Case(
            kind,
            lambda: fn(half_lm, half_am, symbols, 0, reduction="none"),
            check=close(want, 1e-4, 1e-3),
        )
    if kind == "nan_lm":
        lm.flat[rng.integers(lm.size)] = np.nan
        return Case(kind, lambda: fn(lm, am, symbols, 0), False, ["lm"])
    if kind == "bad_c":
        return Case(kind, lambda: fn(lm, am[..., :-1], symbols, 0), False, ["lm", "am"])
    if kind == "symbols":
        symbols[0, 0] = C + 3
        return Case(kind, lambda: fn(lm, am, symbols, 0), False, ["symbols"])
    _, (px_grad, py_grad) = tt.rnnt_loss_simple(lm, am, symbols, 0, return_grad=True)
    if kind == "prune_s_end":
        bad = [[0, 0, S + 2, T], [0, 0, S, T]]
        return Case(kind, lambda: tt.get_rnnt_prune_ranges(px_grad, py_grad, bad, 2),
                    False, ["boundary"])  # fmt: skip
    if kind == "prune_s_range":
        bnd = [[0, 0, S, T]] * 2
        return Case(kind, lambda: tt.get_rnnt_prune_ranges(px_grad, py_grad, bnd, 0),
                    False, ["s_range"])  # fmt: skip
    ranges = np.broadcast_to(np.array([S + 5, S + 6]), (B, T, 2))
    return Case(kind, lambda: tt.do_rnnt_pruning(am, lm, ranges), False, ["ranges"])


def keras_loss_cases(rng, i):
    B, T, C = 2, int(rng.integers(4, 8)), 5
    labels = np.array([[1, 2, 3], [4, 2, -1]])
    ctc_logits = rng.normal(size=(B, T, C)).astype(np.float32)
    rnnt_logits = rng.normal(size=(B, T, 4, C)).astype(np.float32)
    loss, y_pred = [(tt.CtcLoss, ctc_logits), (tt.RnntLoss, rnnt_logits)][i % 2]
    kind = ["legal", "middle_padding", "label_C", "float_labels", "weights",
            "y_pred_rank", "blank_label"][i // 2 % 7]  # fmt: skip
    call = loss(reduction="none")
    if kind == "legal":
        if loss is tt.CtcLoss:
            want = tf.nn.ctc_loss(np.maximum(labels, 0), ctc_logits, [3, 2], [T, T],
                                  logits_time_major=False, blank_index=0)  # fmt: skip
        else:
            want = rnnt_loss_reference(rnnt_logits, np.maximum(labels, 0), 0,
                                       [[0, 0, 3, T], [0, 0, 2, T]])  # fmt: skip
        return Case(kind, lambda: call(labels, y_pred), check=close(want))
    if kind == "middle_padding":
        return Case(kind, lambda: call([[1, -1, 2], [1, 2, 3]], y_pred), False,
                    ["y_true"])  # fmt: skip
    if kind == "label_C":
        return Case(kind, lambda: call([[1, C, 2], [1, 2, 3]], y_pred), False,
                    ["y_true"])  # fmt: skip
    if kind == "float_labels":
        return Case(kind, lambda: call(labels + 0.5, y_pred), False, ["y_true"])
    if kind == "weights":
        return Case(kind, lambda: loss()(labels, y_pred, sample_weight=[1.0, 2, 3]),
                    False, ["sample_weight"])  # fmt: skip
    if kind == "y_pred_rank":
        return Case(kind, lambda: call(labels, y_pred[0]), False, ["y_pred"])
    if loss is tt.CtcLoss:
        return Case(kind, lambda: call([[1, 0, 2], [1, 2, 3]], y_pred), False,
                    ["y_true"])  # fmt: skip
    # RNN-T labels may equal the blank (k2 allows it): a legal input.
    blank_labels = np.array([[1, 0, 2], [1, 2, 3]])
    want = rnnt_loss_reference(rnnt_logits, blank_labels, 0)
    return Case(kind, lambda: call(blank_labels, y_pred), check=close(want))


def feature_cases(rng, i):
    B, N = 2, int(rng.integers(50, 2000))
    audio = rng.uniform(-1, 1, (B, N)).astype(np.float32)
    lengths = np.array([N, int(rng.integers(0, N + 1))])
    make = [
        lambda: tt.LogMelSpectrogram(sample_rate=8000, n_mels=10),
        lambda: tt.Mfcc(sample_rate=8000),
    ][i % 2]
    kind = ["padding", "short", "too_long", "negative", "float", "list",
            "batch", "frames", "loud"][i // 2 % 9]  # fmt: skip
    layer = make()
    if kind == "loud":  # finite, but its float32 spectrum overflows: named
        loud = audio.copy()
        loud[0, int(rng.integers(0, N))] = float(rng.choice([1e20, -1e30, 3e38]))
        return Case(kind, lambda: layer(loud, lengths), False, ["audio"])
    if kind == "padding":
        clean = layer(audio, lengths)
        noisy = audio.copy()
        noisy[1, lengths[1] :] = rng.choice([np.nan, 1e30, -np.inf])

        def check(got):
            values, frames = got
            n = int(frames[1])
            return (
                close(clean[0][1, :n])(values[1, :n])
                or close(0.0 * values[1, n:])(values[1, n:])
                or finite(values)
            )

        return Case(kind, lambda: layer(noisy, lengths), check=check)
    if kind == "short":  # shorter than one frame: no frames, no error
        short = audio[:, : int(rng.integers(0, 150))]

        def check(got):
            return None if got[0].shape[1] == 0 and (got[1] == 0).all() else "frames"

        return Case(kind, lambda: layer(short, [short.shape[1]] * 2), check=check)
    if kind == "too_long":
        return Case(kind, lambda: layer(audio, lengths + N), False, ["lengths"])
    if kind == "negative":
        return Case(kind, lambda: layer(audio, -lengths - 1), False, ["lengths"])
    if kind == "float":
        return Case(kind, lambda: layer(audio, lengths + 0.5), False, ["lengths"])
    if kind == "list":  # plain lists are legal lengths
        want = layer(audio, lengths)
        return Case(kind, lambda: layer(audio, lengths.tolist()), check=lambda got: (
            close(want[0])(got[0])))  # fmt: skip
    if kind == "batch":
        return Case(kind, lambda: layer(audio, lengths[:1]), False, ["lengths"])
    stack = [
        tt.FrameStacking(1, 1),
        tt.FeatureNormalization(),
        tt.SpecAugment(time_mask_max_frames=2, time_mask_count=1),
    ][i % 3]
    features = rng.normal(size=(B, 9, 4)).astype(np.float32)
    return Case(kind, lambda: stack(features, [9, 12]), False, ["lengths"])


def manifest_cases(rng, i):
    folder = tempfile.mkdtemp(prefix="fuzz-manifest-")
    kind = ["text", "filepath", "duration", "offset", "utf8", "json", "columns",
            "object", "bom", "skipped"][i % 10]  # fmt: skip
    if kind == "skipped":  # with skip_bad a malformed CSV row is left out
        import soundfile as sf

        sf.write(os.path.join(folder, "a.wav"), np.zeros(800), 8000, "PCM_16")
        bad = ",".join(["a.wav", "1", "x", "y"][: int(rng.choice([1, 2, 4]))])
        path = os.path.join(folder, "m.csv")
        with open(path, "w") as f:
            f.write(f"wav_filename,wav_filesize,transcript\n{bad}\na.wav,1,ok\n")
        alphabet = tt.CharacterAlphabet.english()

        def kept():
            data = tt.SpeechDataset(path, alphabet, 8000, skip_bad=True)
            return repr((data.transcripts, [w for w, _ in data.skipped]))

        want = repr((["ok"], [f"{path}:2"]))
        return Case(kind, kept, check=lambda got: None if got == want else got)
    if kind == "bom":  # a byte order mark (spreadsheets write one) is legal
        path = os.path.join(folder, str(rng.choice(["m.csv", "m.jsonl"])))
        content = ("wav_filename,wav_filesize,transcript\na.wav,1,hi\n"
                   if path.endswith(".csv")
                   else '{"audio_filepath": "a.wav", "text": "hi"}\n')  # fmt: skip
        with open(path, "w", encoding="utf-8-sig") as f:
            f.write(content)
        want = repr([(os.path.join(folder, "a.wav"), "hi")])
        return Case(kind, lambda: repr([(u.path, u.transcript) for u in
                                        tt.data.read_manifest(path)]),
                    check=lambda got: None if str(got) == want
                    else str(got))  # fmt: skip
    fields = int(rng.choice([1, 2, 4]))  # of a row under a header of 3
    lines = {
        "text": '{"audio_filepath": "a.wav", "text": 123}',
        "filepath": '{"audio_filepath": null, "text": "a"}',
        "duration": '{"audio_filepath": "a.wav", "duration": "abc"}',
        "offset": '{"audio_filepath": "a.wav", "offset": -2}',
        "json": '{"audio_filepath": "a.wav", ',
        "object": '"a.wav"',
    }
    if kind in ("utf8", "columns"):
        path = os.path.join(folder, "m.csv")
        content = (
            b"wav_filename,wav_filesize,transcript\na.wav,1,caf\xe9\n"
            if kind == "utf8"
            else b"wav_filename,wav_filesize,transcript\n"
            + b",".join([b"a.wav", b"1", b"x", b"y"][:fields])
            + b"\n"
        )
    else:
        path = os.path.join(folder, "m.jsonl")
        good = '{"audio_filepath": "b.wav", "text": "b"}\n'
        content = (good * int(rng.integers(0, 3)) + lines[kind] + "\n").encode()
    with open(path, "wb") as f:
        f.write(content)
    names = [path + ":"]
    if kind == "columns":  # the message counts the row's fields right
        names = [f"{path}:2: 3 columns expected (wav_filename,wav_filesize,"
                 f"transcript), the row has {fields}"]  # fmt: skip
    return Case(kind, lambda: tt.data.read_manifest(path), False, names)


_EXPORT = {}


def _transducer_stream():
    """A TransducerStream over a tiny untrained export (built once per child)."""
    if "stream" not in _EXPORT:
        from tf_transducer.export import TransducerStream
        from tf_transducer.export import export_transducer

        alphabet = tt.CharacterAlphabet.english()
        model = tt.models.Transducer(
            alphabet.vocab_size,
            tt.layers.TransducerEncoder(units=8),
            tt.layers.PredictionNetwork(alphabet.vocab_size, embedding_dim=4, units=8),
            tt.layers.TransducerJoiner(alphabet.vocab_size, units=8),
            feature_dim=20,
        )
        model.build()
        folder = os.path.join(tempfile.mkdtemp(prefix="fuzz-export-"), "e")
        features = tt.LogMelSpectrogram(sample_rate=8000, n_mels=20)
        export_transducer(model, folder, alphabet, features)
        _EXPORT["stream"] = TransducerStream(folder)
    return _EXPORT["stream"]


def runner_cases(rng, i):
    """Audio users hand a LiteRT runner: legal ones transcribe as their
    float32 mono equivalent, the others are errors naming the audio."""
    stream = _transducer_stream()
    n = int(rng.integers(1, 6000))
    audio = rng.uniform(-0.5, 0.5, n).astype(np.float32)
    kind = ["float64", "int16", "list", "stereo", "row", "int32", "empty",
            "nan", "inf", "rate", "scalar", "right_rate"][i % 12]  # fmt: skip

    def same_as(reference):
        want = stream.transcribe(reference)
        return lambda got: None if got == want else f"{got!r} != {want!r}"

    if kind == "float64":
        wide = audio.astype(np.float64)
        return Case(kind, lambda: stream.transcribe(wide), check=same_as(audio))
    if kind == "int16":
        pcm = np.round(audio * 32767).astype(np.int16)
        scaled = pcm.astype(np.float32) / 32768
        return Case(kind, lambda: stream.transcribe(pcm), check=same_as(scaled))
    if kind == "list":
        return Case(kind, lambda: stream.transcribe(audio.tolist()),
                    check=same_as(audio))  # fmt: skip
    if kind == "right_rate":
        return Case(kind, lambda: stream.transcribe(audio, sample_rate=8000),
                    check=same_as(audio))  # fmt: skip
    bad = {
        "stereo": lambda: np.stack([audio, audio], 1),
        "row": lambda: audio[None],
        "int32": lambda: (audio * 2**30).astype(np.int32),
        "empty": lambda: audio[:0],
        "nan": lambda: np.where(rng.random(n) < 0.01, np.nan, audio),
        "inf": lambda: np.concatenate([audio, [np.inf]]),
        "rate": lambda: audio,
        "scalar": lambda: np.float32(0.5),
    }[kind]()
    if kind == "nan" and not np.isnan(bad).any():
        bad[0] = np.nan
    rate = 16000 if kind == "rate" else None
    return Case(kind, lambda: stream.transcribe(bad, sample_rate=rate), False,
                ["audio"])  # fmt: skip


def augment_cases(rng, i):
    from tf_transducer.data import augment as A

    n = int(rng.integers(0, 3000))
    audio = (rng.uniform(-1, 1, n) * 10 ** rng.uniform(-4, 0.5)).astype(np.float32)
    seed = tf.constant(rng.integers(0, 2**31, 2))
    kind = ["chain", "silence", "one_sample", "loud", "batch", "factor", "tensor_rate",
            "rank", "dtype", "probability", "range", "lengths", "seed",
            "start_step"][i % 14]  # fmt: skip
    chain = A.WaveAugment(8000, pitch_prob=0.5, tempo_prob=0.5, reverb_prob=0.5,
                          telephone_prob=0.5, noise_prob=0.5, dc_prob=0.5)  # fmt: skip

    def bounded(source):  # finite, and the length speed and tempo allow
        def check(got):
            m, s = len(got), max(len(source), 1)
            if not np.isfinite(got).all():
                return "not finite"
            if len(source) and not s / 1.1 / 1.1 - 2 <= m <= s / 0.9 / 0.9 + 2:
                return f"length {m} from {len(source)}"
            return None

        return check

    if kind in ("chain", "silence", "one_sample", "loud"):
        x = {"chain": audio, "silence": np.zeros(n, np.float32),
             "one_sample": audio[:1] if n else np.ones(1, np.float32),
             "loud": audio * 1e4}[kind]  # fmt: skip
        return Case(kind, lambda: chain(x, seed), check=bounded(x))
    if kind == "batch":
        batch = np.zeros((2, n), np.float32)
        batch[0] = audio
        lengths = [n, int(rng.integers(0, n + 1))]

        def check(got):
            out, out_lengths = got
            rows = [out[b, out_lengths[b] :] for b in range(2)]
            return None if all((r == 0).all() for r in rows) else "padding changed"

        return Case(kind, lambda: A.augment_batch(chain, batch, lengths, seed),
                    check=check)  # fmt: skip
    if kind == "factor":
        bad = float(rng.choice([0.0, -0.5, np.nan, np.inf]))
        return Case(kind, lambda: A.speed_perturb(audio, bad), False, ["factor"])
    if kind == "tensor_rate":
        bad = tf.constant(float(rng.choice([0.0, -2.0])))
        return Case(kind, lambda: A.time_stretch(audio, bad, 8000), False, ["rate"])
    if kind == "rank":
        x = audio.reshape(1, -1)
        return Case(kind, lambda: chain(x, seed), False, ["audio"])
    if kind == "dtype":
        x = (audio * 1000).astype(rng.choice([np.int16, np.float64]))
        return Case(kind, lambda: A.reverberate(x, np.ones(3, np.float32)), False,
                    ["audio"])  # fmt: skip
    if kind == "probability":
        name = str(rng.choice(["pitch_prob", "noise_prob", "reverb_prob", "dc_prob"]))
        bad = float(rng.choice([-0.1, 1.5, np.nan]))
        return Case(kind, lambda: A.WaveAugment(8000, **{name: bad}), False, [name])
    if kind == "range":
        name = str(rng.choice(["tempo_range", "rt60_range", "snr_range"]))
        bad = [(2.0, 1.0), (1.0,), (-1.0, 0.5)][int(rng.integers(3))]
        if name == "snr_range" and bad == (-1.0, 0.5):
            bad = (10.0, 5.0)  # negative SNRs are legal
        return Case(kind, lambda: A.WaveAugment(8000, **{name: bad}), False, [name])
    if kind == "seed":
        bad = tf.constant(rng.integers(0, 9, [(3,), (1,), (2, 2)][i % 3]))
        return Case(kind, lambda: chain(audio, bad), False, ["seed"])
    if kind == "start_step":  # SpecAugment's warm-up before augmenting
        bad = [-1, 2.5, "3"][int(rng.integers(3))]
        return Case(kind, lambda: tt.SpecAugment(start_step=bad), False,
                    ["start_step"])  # fmt: skip
    batch = np.zeros((2, 10), np.float32)
    return Case(kind, lambda: A.augment_batch(chain, batch, [11, 3], seed), False,
                ["lengths"])  # fmt: skip


def _traced(fn, *arrays):
    """fn traced with every dimension of every array unknown, then called."""
    specs = [tf.TensorSpec([None] * np.ndim(a), tf.as_dtype(np.asarray(a).dtype))
             for a in arrays]  # fmt: skip
    return tf.function(fn, input_signature=specs)(*arrays)


def _lm_only_reference(lm, symbols, boundary, blank):
    """-log P of the smoothed loss with lm_only_scale = 1 (float64 numpy)."""
    log_lm = lm - np.log(np.exp(lm).sum(-1, keepdims=True))
    px = np.take_along_axis(log_lm[:, :-1], symbols[..., None], 2)
    T = int(boundary[:, 3].max())
    px = np.concatenate([np.repeat(px, T, 2), np.full(px.shape, -np.inf)], 2)
    for b, t_end in enumerate(boundary[:, 3]):
        px[b, :, t_end] = -np.inf
    py = np.repeat(log_lm[:, :, blank : blank + 1], T, 2)
    scores, _, _ = mi_reference(px, py, boundary)
    return -scores


def edge_cases(rng, i):
    """Values and shapes that used to be taken silently or rejected vaguely."""
    B, T, S, C = 2, int(rng.integers(3, 7)), int(rng.integers(1, 4)), 5
    lm = rng.normal(size=(B, S + 1, C))
    am = rng.normal(size=(B, T, C))
    symbols = rng.integers(1, C, (B, S))
    boundary = np.array([[0, 0, S, T], [0, 0, int(rng.integers(0, S + 1)), T - 1]])
    joint = rng.normal(size=(B, T, S + 1, C)).astype(np.float32)
    traced = bool(i // 20 % 2)  # every kind both eagerly and traced

    def call(fn, *arrays):
        return _traced(fn, *arrays) if traced else fn(*arrays)

    kind = ["logprobs_t_end", "joint_t_end", "prune_nan", "mask_holes",
            "mask_prefix", "mi_columns", "mi_empty_s", "mi_boundary_rows",
            "lm_only", "simple_rows", "pruning_classes", "ctc_nan",
            "ctc_no_labels", "nt_nan", "alignment_nan", "alignment_labels",
            "clamp_inf", "clamp_nan", "smoothed_rows",
            "ctc_mask_holes"][i % 20]  # fmt: skip
    late = boundary.copy()
    late[int(rng.integers(B)), 3] = T + int(rng.integers(1, 4))
    if kind == "logprobs_t_end":
        return Case(kind, lambda: call(
            lambda lm, am, s, b: tt.get_rnnt_logprobs(lm, am, s, 0, boundary=b),
            lm, am, symbols, late), False, ["boundary"])  # fmt: skip
    if kind == "joint_t_end":
        return Case(kind, lambda: call(
            lambda x, s, b: tt.get_rnnt_logprobs_joint(x, s, 0, b),
            joint, symbols, late), False, ["boundary"])  # fmt: skip
    if kind == "prune_nan":
        _, (px_grad, py_grad) = tt.rnnt_loss_simple(lm, am, symbols, 0,
                                                    return_grad=True)  # fmt: skip
        px_grad, py_grad = np.array(px_grad), np.array(py_grad)
        bad = [px_grad, py_grad][i % 2]
        bad.flat[rng.integers(bad.size)] = rng.choice([np.nan, np.inf, -np.inf])
        return Case(kind, lambda: call(
            lambda x, y, b: tt.get_rnnt_prune_ranges(x, y, b, 2),
            px_grad, py_grad, boundary), False, ["px_grad", "py_grad"])  # fmt: skip
    if kind in ("mask_holes", "mask_prefix", "ctc_mask_holes"):
        frames = [T, int(rng.integers(1, T + 1))]
        mask = np.arange(T)[None] < np.array(frames)[:, None]
        if kind != "mask_prefix":
            mask[1, 0] = False  # a hole before the utterance's other frames
            mask[1, -1] = True
        labels = np.where(np.arange(S)[None] < [[S], [0]], symbols, -1)
        ctc = kind == "ctc_mask_holes"
        y_pred = tf.constant(joint[:, :, 0] if ctc else joint)
        y_pred._keras_mask = tf.constant(mask)
        loss = (tt.CtcLoss if ctc else tt.RnntLoss)(reduction="none")
        if kind != "mask_prefix":
            return Case(kind, lambda: loss(labels, y_pred), False, ["mask"])
        want = rnnt_loss_reference(joint, np.maximum(labels, 0), 0,
                                   [[0, 0, S, T], [0, 0, 0, frames[1]]])  # fmt: skip
        return Case(kind, lambda: loss(labels, y_pred), check=close(want))
    if kind == "mi_columns":
        px, py = rng.normal(size=(B, S, T + 2)), rng.normal(size=(B, S + 1, T))
        return Case(kind, lambda: call(tt.mutual_information_recursion_tf, px, py),
                    False, ["px"])  # fmt: skip
    if kind == "mi_empty_s":  # legal: the sum of py's only row
        px, py = rng.normal(size=(B, 0, T + 1)), rng.normal(size=(B, 1, T))
        want = py[:, 0].sum(axis=1)
        return Case(kind, lambda: call(tt.mutual_information_recursion_tf, px, py),
                    check=close(want))  # fmt: skip
    if kind == "mi_boundary_rows":
        px, py = rng.normal(size=(B, S, T + 1)), rng.normal(size=(B, S + 1, T))
        rows = np.concatenate([boundary, boundary[:1]])
        return Case(kind, lambda: call(tt.mutual_information_recursion_tf, px, py,
                                       rows), False, ["boundary"])  # fmt: skip
    if kind == "lm_only":
        want = _lm_only_reference(lm, symbols, boundary, 0)
        return Case(kind, lambda: call(
            lambda lm, am, s, b: tt.rnnt_loss_smoothed(
                lm, am, s, 0, 1.0, 0.0, b, reduction="none"),
            lm, am, symbols, boundary), check=close(want, 1e-8))  # fmt: skip
    if kind in ("simple_rows", "smoothed_rows"):
        fn = tt.rnnt_loss_simple if kind == "simple_rows" else tt.rnnt_loss_smoothed
        rows = np.concatenate([boundary, boundary[:1]])
        return Case(kind, lambda: call(
            lambda lm, am, s, b: fn(lm, am, s, 0, boundary=b), lm, am, symbols,
            rows), False, ["boundary"])  # fmt: skip
    if kind == "pruning_classes":
        ranges = np.broadcast_to(np.arange(2), (B, T, 2)).copy()
        return Case(kind, lambda: call(tt.do_rnnt_pruning, am, lm[..., :-1], ranges),
                    False, ["am", "lm"])  # fmt: skip
    if kind in ("ctc_nan", "ctc_no_labels"):
        logits = joint[:, :, 0]
        labels = np.zeros((B, 0), np.int64)
        if kind == "ctc_nan":
            logits = logits.copy()
            logits[int(rng.integers(B)), int(rng.integers(T))] = rng.choice(
                [np.nan, np.inf]
            )
            labels = np.array([[1, 2], [3, -1]])
            return Case(kind, lambda: call(tt.CtcLoss(reduction="none"), labels,
                                           logits), False, ["y_pred"])  # fmt: skip
        wide = logits.astype(np.float64)
        log_softmax = wide - np.log(np.exp(wide).sum(-1, keepdims=True))
        want = -log_softmax[..., 0].sum(1)  # only blanks
        return Case(kind, lambda: call(tt.CtcLoss(reduction="none"), labels, logits),
                    check=close(want))  # fmt: skip
    if kind in ("nt_nan", "alignment_nan", "alignment_labels"):
        NB, W = 3, 3
        logits = rng.normal(size=(B, NB, S + 1, W, C))
        logits[0, int(rng.integers(NB)), int(rng.integers(S + 1)), int(rng.integers(W)),
               int(rng.integers(C))] = np.nan  # fmt: skip
        num_blocks = np.array([NB, NB])
        lengths = np.array([S, S])
        if kind == "nt_nan":
            loss = tt.NeuralTransducerLoss(W, C - 1, reduction="none")
            labels = rng.integers(0, C - 1, (B, S))
            return Case(kind, lambda: call(
                lambda y, x, n: loss(y, {"logits": x, "num_blocks": n}),
                labels, logits, num_blocks), False, ['logits'])  # fmt: skip
        from tf_transducer.ops.neural_transducer import best_block_alignment

        def align(x, y, n_y, n_b):
            return best_block_alignment(x, y, n_y, n_b, W, C - 1)

        if kind == "alignment_nan":
            return Case(kind, lambda: call(
                align, logits, symbols, lengths, num_blocks), False,
                ["log_probs"])  # fmt: skip
        logits = np.nan_to_num(logits)
        more = rng.integers(0, C - 1, (B, S + 1))
        return Case(kind, lambda: call(align, logits, more, lengths, num_blocks),
                    False, ["log_probs"])  # fmt: skip
    if kind == "clamp_inf":  # +inf clamps nothing, as torchaudio's clamp < 0

        def grads(clamp):
            x = tf.constant(joint)
            with tf.GradientTape() as tape:
                tape.watch(x)
                value = tt.rnnt_loss(x, symbols, 0, clamp=clamp, reduction="sum")
            return value, tape.gradient(value, x)

        want_value, want_grad = grads(-1.0)
        return Case(kind, lambda: grads(float("inf")), check=lambda got: (
            close(want_value, 1e-6)(got[0])
            or close(want_grad, 1e-6)(got[1])))  # fmt: skip
    bad = float(rng.choice([np.nan, -np.nan]))
    return Case(kind, lambda: tt.RnntLoss(clamp=bad), False, ["clamp"])


def train_loop_cases(rng, i):
    """`train_loop`'s verbose: Keras fit's values print as documented (lines,
    no bar, off a terminal; nothing with 0); the others are errors naming
    verbose."""
    import contextlib
    import io

    import keras

    from tf_transducer.training import train_loop

    verbose = ["auto", 0, 1, 2, 3, -1, True, "yes", None, 1.5][i % 10]
    legal = i % 10 < 4
    x = rng.normal(size=(2, 12, 6)).astype(np.float32)
    n = np.array([12, 9], np.int32)
    y = np.array([[1, 2], [3, -1]], np.int32)

    def run():
        keras.utils.set_random_seed(0)
        model = tt.models.Transducer(
            7,
            tt.layers.TransducerEncoder(units=8),
            tt.layers.PredictionNetwork(7, embedding_dim=4, units=8),
            tt.layers.TransducerJoiner(7, units=8),
            feature_dim=6,
        )
        model.build()
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss=tt.RnntLoss())
        data = tf.data.Dataset.from_tensor_slices(((x, n), y)).batch(2)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            history = train_loop(model, lambda context, epoch: data, 1, 1,
                                 log_every=1, verbose=verbose)  # fmt: skip
        return history["loss"][0], printed.getvalue()

    def check(result):
        loss, printed = float(result[0]), str(result[1])
        if not np.isfinite(loss):
            return f"loss {loss}"
        lines = printed.splitlines()
        if verbose == 0:
            return None if not lines else f"verbose=0 printed {lines}"
        want = [f"epoch 1 step 1/1: loss {loss:.4f}", "epoch 1/1 ("]
        if len(lines) != 2 or lines[0] != want[0] or not lines[1].startswith(want[1]):
            return f"printed {lines!r}"
        return None

    return Case(f"verbose={verbose!r}", run, legal, ["verbose"],
                check if legal else None)  # fmt: skip


def _lattice_reference(table, num_frames, labels, num_labels, context, k, local):
    """-log P(labels | frames) [B] of a TableWeightFn lattice, by every path.

    table [I, C, 1 + V] or per batch [B, I, C, 1 + V] (locally normalised by
    `local`: "hat", "log_softmax" or None); frame t reads input t; k: None
    for FrameDependent, else FrameLabelDependent's max_expansions.
    """
    from tests.lattice.test_lattices import enumerate_paths

    table = np.asarray(table, np.float64)
    blank, lexical = table[..., :1], table[..., 1:]
    lse = np.logaddexp.reduce
    if local == "log_softmax":
        table = table - lse(table, axis=-1, keepdims=True)
    elif local == "hat":
        not_blank = -np.logaddexp(0.0, blank)
        lexical = not_blank + lexical - lse(lexical, axis=-1, keepdims=True)
        table = np.concatenate([-np.logaddexp(0.0, -blank), lexical], -1)
    losses = []
    for b, T in enumerate(num_frames):
        paths = enumerate_paths(table[b] if table.ndim == 4 else table,
                                list(range(T)), context, k)  # fmt: skip
        spelled = [w for w, y, _ in paths if y == tuple(labels[b, : num_labels[b]])]
        numerator = lse(spelled) if spelled else -np.inf
        log_z = 0.0 if local else lse([w for w, _, _ in paths])
        losses.append(log_z - numerator)
    return np.array(losses)


def lattice_cases(rng, i):
    """RecognitionLattice over table weights (per batch or shared, locally
    normalised or not) against every path, and its malformed inputs."""
    import keras

    from tf_transducer.lattice import RecognitionLattice
    from tf_transducer.lattice import alignments
    from tf_transducer.lattice import contexts
    from tf_transducer.lattice import semirings
    from tf_transducer.lattice import weight_fns as W

    B, T, V, U = int(rng.integers(1, 4)), int(rng.integers(2, 4)), 2, 3
    context = contexts.FullNGram(V, int(rng.integers(0, 2)))
    k = [None, 1, 2][int(rng.integers(3))]
    alignment = alignments.FrameDependent() if k is None else (
        alignments.FrameLabelDependent(k))  # fmt: skip
    C = context.shape()[0]
    per_batch = bool(rng.integers(2))
    table = rng.normal(size=(B, T, C, 1 + V) if per_batch else (T, C, 1 + V))
    table = table.astype(np.float32)
    local = [None, "hat", "log_softmax"][int(rng.integers(3))]
    frames = rng.normal(size=(B, T, 2)).astype(np.float32)
    frames[..., 0] = np.arange(T)  # frame t reads input t of the table
    num_frames = rng.integers(0, T + 1, B).astype(np.int32)
    num_frames[0] = T - 1  # some padding
    labels = rng.integers(1, V + 1, (B, U)).astype(np.int32)
    most = num_frames * (k or 1)  # labels that fit in the frames
    num_labels = np.minimum(rng.integers(0, U + 1, B), most).astype(np.int32)
    traced = bool(i // 20 % 2)  # every kind both eagerly and traced

    def make():
        table_fn = W.TableWeightFn(table)
        weight_fn = W.LocallyNormalizedWeightFn(table_fn, local) if local else table_fn
        return RecognitionLattice(context, alignment, lambda c: W.NullCacher(),
                                  lambda c: weight_fn)  # fmt: skip

    def call(fn, *arrays):
        return _traced(fn, *arrays) if traced else fn(*arrays)

    def loss(lattice=None, *arrays):
        lattice = lattice or make()
        return call(lattice, *(arrays or (frames, num_frames, labels, num_labels)))

    def want():
        return _lattice_reference(table, num_frames, labels, num_labels, context,
                                  k, local)  # fmt: skip

    kind = ["legal", "padding_junk", "forward", "saved", "empty",
            "nan_frames", "int_frames", "frames_rank", "num_frames_long",
            "num_frames_negative", "num_frames_float", "num_frames_rows",
            "labels_range", "labels_float", "labels_rows", "num_labels_long",
            "table_index", "table_batch", "cache_nan",
            "local_per_batch"][i % 20]  # fmt: skip
    if kind in ("legal", "local_per_batch"):
        if kind == "local_per_batch":  # the lattice: LAST builds it
            table = rng.normal(size=(B, T, C, 1 + V)).astype(np.float32)
            local = local or "hat"
        return Case(kind, loss, check=close(want()))
    if kind == "padding_junk":  # what lies past the lengths changes nothing
        expected = want()
        junk_frames, junk_labels = frames.copy(), labels.copy()
        junk_frames[0, T - 1, int(rng.integers(2))] = rng.choice([np.nan, np.inf])
        junk_labels[np.arange(U)[None] >= num_labels[:, None]] = -7
        return Case(kind, lambda: loss(None, junk_frames, num_frames, junk_labels,
                                       num_labels), check=close(expected))  # fmt: skip
    if kind == "forward":  # log Z, the best path's weight, and shortest_path's
        from tests.lattice.test_lattices import enumerate_paths

        local = None
        weights = [[p[0] for p in enumerate_paths(table[b] if per_batch else table,
                                                  list(range(n)), context, k)]
                   for b, n in enumerate(num_frames)]  # fmt: skip
        best = [max(w) for w in weights]
        expected = [[np.logaddexp.reduce(w) for w in weights], best, best]
        return Case(kind, lambda: call(lambda f, n: [
            make().forward(f, n, semirings.Log),
            make().forward(f, n, semirings.MaxTropical),
            make().shortest_path(f, n)[2]], frames, num_frames),
            check=close(expected))  # fmt: skip
    if kind == "saved":  # get_config / from_config, then called
        config = json.loads(json.dumps(keras.saving.serialize_keras_object(make())))
        return Case(kind, lambda: loss(keras.saving.deserialize_keras_object(
            config)), check=close(want()))  # fmt: skip
    if kind == "empty":  # no frames, no labels: probability 1
        return Case(kind, lambda: loss(None, frames[:, :0], 0 * num_frames,
                                       labels[:, :0], 0 * num_labels),
                    check=close(np.zeros(B)))  # fmt: skip
    b, t = int(rng.integers(B)), int(rng.integers(num_frames.max(initial=0) or 1))
    if kind == "nan_frames":
        num_frames[b] = max(num_frames[b], t + 1)
        frames[b, t, int(rng.integers(2))] = rng.choice([np.nan, np.inf, -np.inf])
        return Case(kind, loss, False, ["frames"])
    if kind == "int_frames":
        as_int = frames.astype(np.int32)
        return Case(kind, lambda: loss(None, as_int, num_frames, labels, num_labels),
                    False, ["frames"])  # fmt: skip
    if kind == "frames_rank":
        return Case(kind, lambda: loss(None, frames[..., 0], num_frames, labels,
                                       num_labels), False, ["frames"])  # fmt: skip
    if kind in ("num_frames_long", "num_frames_negative", "num_frames_float",
                "num_frames_rows"):  # fmt: skip
        bad = num_frames.copy()
        bad[b] = T + int(rng.integers(1, 4)) if kind == "num_frames_long" else -1
        if kind == "num_frames_float":
            bad = num_frames + 0.5
        if kind == "num_frames_rows":
            bad = np.concatenate([num_frames, num_frames[:1]])
        return Case(kind, lambda: loss(None, frames, bad, labels, num_labels),
                    False, ["num_frames"])  # fmt: skip
    if kind in ("labels_range", "labels_float", "labels_rows"):
        bad = labels.copy()
        num = np.maximum(num_labels, 1)
        num_frames[:] = T  # so that one label fits
        bad[b, 0] = rng.choice([0, -1, V + 1])
        counts = num
        if kind == "labels_float":
            bad = labels + 0.5
        if kind == "labels_rows":
            bad, counts = np.concatenate([labels, labels[:1]]), np.append(num, 1)
        return Case(kind, lambda: loss(None, frames, num_frames, bad, counts),
                    False, ["labels"])  # fmt: skip
    if kind == "num_labels_long":
        bad = num_labels.copy()
        bad[b] = U + 1
        return Case(kind, lambda: loss(None, frames, num_frames, labels, bad),
                    False, ["num_labels"])  # fmt: skip
    if kind == "table_index":  # frame[..., 0] past the table's inputs
        num_frames[b] = max(num_frames[b], t + 1)
        frames[b, t, 0] = rng.choice([T, -1, T + 5])
        return Case(kind, loss, False, ["frame"])
    if kind == "table_batch":  # a per-batch table of another batch
        table = rng.normal(size=(B + 1, T, C, 1 + V)).astype(np.float32)
        return Case(kind, loss, False, ["frame"])
    # a cache passed in with NaN in it
    lattice = RecognitionLattice(context, alignment, W.SharedEmbCacher(C, 4),
                                 W.JointWeightFn(V, 4))  # fmt: skip
    lattice.build(frames.shape)
    cache = np.array(lattice.build_cache())
    cache[int(rng.integers(C)), int(rng.integers(4))] = rng.choice([np.nan, np.inf])
    return Case(kind, lambda: call(
        lambda f, n, y, m, c: lattice(f, n, y, m, cache=c),
        frames, num_frames, labels, num_labels, cache), False, ["cache"])  # fmt: skip


def _neural_transducer_export():
    """(folder, NeuralTransducerStream) of a tiny untrained export (once per child)."""
    if "neural_transducer" not in _EXPORT:
        from tf_transducer.export import NeuralTransducerStream
        from tf_transducer.export import export_neural_transducer
        from tf_transducer.layers import NeuralTransducer

        layer = NeuralTransducer(n_out=5, transducer_hidden_units=8,
                                 transducer_max_width=3, input_block_size=4,
                                 embedding_size=4, e_symbol_index=0)  # fmt: skip
        layer(tf.zeros([1, 8, 6]), tf.constant([8]), tf.zeros([1, 2], tf.int32))
        folder = os.path.join(tempfile.mkdtemp(prefix="fuzz-nt-"), "e")
        export_neural_transducer(layer, folder, 6)
        _EXPORT["neural_transducer"] = folder, NeuralTransducerStream(folder)
        _EXPORT["neural_transducer_layer"] = layer
    return _EXPORT["neural_transducer"]


def input_cases(rng, i):
    """Values the feature layers, SpecAugment, FeatureNormalization.adapt,
    SpeechDataset and the Neural Transducer runner must refuse (NaN / inf
    where they are read, integer samples, bad export fields) or take
    (anything in the padding, an empty batch)."""
    B, N = 2, int(rng.integers(300, 1500))
    audio = rng.uniform(-1, 1, (B, N)).astype(np.float32)
    lengths = np.array([N, int(rng.integers(200, N + 1))])
    kinds = ["nan_audio", "int_audio", "traced_nan", "traced_padding", "empty_batch",
             "nan_features", "int_features", "padding_features", "adapt",
             "domain_ids", "stream_frames", "stream_meta", "nan_wav",
             "dataset_args", "audio_args", "export_args"]  # fmt: skip
    kind = kinds[i % len(kinds)]
    layer = [
        lambda: tt.LogMelSpectrogram(sample_rate=8000, n_mels=10),
        lambda: tt.Mfcc(sample_rate=8000),
    ][i // len(kinds) % 2]()
    bad_value = rng.choice([np.nan, np.inf, -np.inf])
    signature = [
        tf.TensorSpec([None, None], tf.float32),
        tf.TensorSpec([None], tf.int32),
    ]
    if kind in ("nan_audio", "traced_nan"):
        audio[1, int(rng.integers(lengths[1]))] = bad_value
        run = layer
        if kind == "traced_nan":
            run = tf.function(layer, input_signature=signature)
        return Case(kind, lambda: run(audio, lengths), False, ["audio"])
    if kind == "int_audio":
        dtype = rng.choice([np.int16, np.int32, np.int8, np.bool_])
        pcm = (audio * 100).astype(dtype)
        return Case(kind, lambda: layer(pcm, lengths), False, ["audio"])
    if kind == "traced_padding":
        run = tf.function(layer, input_signature=signature)
        want = run(audio, lengths)[0].numpy()
        noisy = audio.copy()
        noisy[1, lengths[1] :] = bad_value
        return Case(kind, lambda: run(noisy, lengths)[0],
                    check=lambda got: close(want)(got) or finite(got))  # fmt: skip
    if kind == "empty_batch":
        empty = audio[:0]

        def check(got):
            values, frames = got
            return None if values.shape[0] == 0 and frames.shape == (0,) else "shape"

        return Case(kind, lambda: layer(empty), check=check)
    T, F = int(rng.integers(3, 12)), int(rng.integers(2, 6))
    features = rng.normal(size=(B, T, F)).astype(np.float32)
    frames = np.array([T, int(rng.integers(1, T + 1))])
    augment = tt.SpecAugment(time_warp_max_frames=2, time_warp_max_ratio=0.5,
                             time_mask_max_frames=2, freq_warp_max_bins=1,
                             seed=int(rng.integers(100)))  # fmt: skip
    normalize = tt.FeatureNormalization(str(rng.choice(["utterance", "global"])))
    user = [lambda x: augment(x, frames, training=True),
            lambda x: normalize(x, frames)[0]][i % 2]  # fmt: skip
    if kind == "nan_features":
        features[1, int(rng.integers(frames[1])), int(rng.integers(F))] = bad_value
        return Case(kind, lambda: user(features), False, ["features"])
    if kind == "int_features":
        ints = (features * 10).astype(rng.choice([np.int16, np.int32, np.int64]))
        return Case(kind, lambda: user(ints), False, ["features"])
    if kind == "padding_features":
        noisy = features.copy()
        noisy[1, frames[1] :] = bad_value
        if i % 2 == 0:  # SpecAugment: the padding comes back as it was
            twin = tt.SpecAugment.from_config(augment.get_config())  # same draws
            clean = twin(features, frames, training=True).numpy()

            def check(got):
                padding = got[1, frames[1] :], noisy[1, frames[1] :]
                if not np.array_equal(*padding, equal_nan=True):
                    return "padding changed"
                return close(clean[0])(got[0]) or close(clean[1, : frames[1]])(
                    got[1, : frames[1]]
                )

            return Case(kind, lambda: augment(noisy, frames, training=True),
                        check=check)  # fmt: skip
        want = normalize(features, frames)[0].numpy()
        return Case(kind, lambda: normalize(noisy, frames)[0], check=close(want))
    if kind == "adapt":
        adapting = tt.FeatureNormalization("global")
        choice = int(rng.integers(4))
        if choice == 0:
            features[1, int(rng.integers(frames[1])), 0] = bad_value
            batch, names = (features, frames), ["features"]
        elif choice == 1:
            batch, names = (features, frames + T), ["lengths"]
        elif choice == 2:
            batch, names = (features, frames, frames), ["data"]
        else:
            batch, names = {"features": features}, ["data"]
        good = (rng.normal(size=(B, T, F)), frames)
        return Case(kind, lambda: adapting.adapt([good, batch]), False, names)
    if kind == "domain_ids":
        by_domain = tt.SpecAugment(domain_ids=[0, 1], time_mask_max_frames=2)
        bad = [[0, 1, 1], [0.0, 1.0], [[0, 1]], [1]][int(rng.integers(4))]
        return Case(kind, lambda: by_domain(
            features, frames, domain_ids=bad, training=True), False,
            ["domain_ids"])  # fmt: skip
    if kind == "stream_frames":
        folder, stream = _neural_transducer_export()
        encoded = rng.normal(size=(int(rng.integers(1, 12)), 6))
        encoded[int(rng.integers(len(encoded))), int(rng.integers(6))] = bad_value

        def run():
            stream.reset()
            return stream.feed(encoded) + stream.finish()

        return Case(kind, run, False, ["frames"])
    if kind == "stream_meta":
        import shutil

        from tf_transducer.export import NeuralTransducerStream

        folder, _ = _neural_transducer_export()
        copy = os.path.join(tempfile.mkdtemp(prefix="fuzz-nt-meta-"), "e")
        shutil.copytree(folder, copy)
        with open(os.path.join(copy, "export.json")) as f:
            meta = json.load(f)
        key = str(rng.choice(["input_block_size", "encoder_dim"]))
        meta[key] = [0, -3, "4", 2.0, True, meta[key] + 1][int(rng.integers(6))]
        with open(os.path.join(copy, "export.json"), "w") as f:
            json.dump(meta, f)
        return Case(kind, lambda: NeuralTransducerStream(copy), False,
                    [f"export.json: {key}"])  # fmt: skip
    if kind == "export_args":
        from tf_transducer.export import NeuralTransducerStream
        from tf_transducer.export import export_neural_transducer
        from tf_transducer.layers import NeuralTransducer

        folder, stream = _neural_transducer_export()
        target = os.path.join(tempfile.mkdtemp(prefix="fuzz-nt-args-"), "e")
        choice = int(rng.integers(3))
        if choice == 0:
            built = _EXPORT["neural_transducer_layer"]
            dim = [0, 5, 7, "6", 6.0, True][int(rng.integers(6))]
            return Case(kind, lambda: export_neural_transducer(built, target, dim),
                        False, ["encoder_dim"])  # fmt: skip
        if choice == 1:
            unbuilt = NeuralTransducer(n_out=5, transducer_hidden_units=8,
                                       transducer_max_width=3, input_block_size=4,
                                       embedding_size=4, e_symbol_index=0)  # fmt: skip
            return Case(kind, lambda: export_neural_transducer(unbuilt, target, 6),
                        False, ["layer"])  # fmt: skip
        threads = [0, -1, "2", True, 1.5][int(rng.integers(5))]
        return Case(kind, lambda: NeuralTransducerStream(folder, num_threads=threads),
                    False, ["num_threads"])  # fmt: skip
    import soundfile as sf

    folder = tempfile.mkdtemp(prefix="fuzz-inputs-")
    good_path = os.path.join(folder, "good.wav")
    sf.write(good_path, rng.uniform(-0.5, 0.5, 800), 8000, subtype="PCM_16")
    if kind == "audio_args":
        name, value = [("sample_rate", 0), ("sample_rate", 8000.5),
                       ("sample_rate", "8000"), ("offset", -1.0),
                       ("offset", float("nan")), ("duration", -0.5),
                       ("duration", float("inf"))][int(rng.integers(7))]  # fmt: skip
        args = {"sample_rate": 8000, name: value}
        return Case(kind, lambda: tt.data.read_audio(good_path, **args), False,
                    [name])  # fmt: skip
    utterances = [tt.data.Utterance(good_path, "a")]
    alphabet = tt.CharacterAlphabet.english()
    if kind == "dataset_args":
        name, value = [("sample_rate", True), ("max_duration", float("nan")),
                       ("max_duration", "5"), ("max_label_length", 2.5),
                       ("features", "mfcc"), ("item_check", 3),
                       ("manifest", ["good.wav"]), ("seed", "1"),
                       ("bucket_boundaries", [float("nan")]),
                       ("bucket_boundaries", 2.0)][int(rng.integers(10))]  # fmt: skip
        if name in ("seed", "bucket_boundaries"):
            data = tt.data.SpeechDataset(utterances, alphabet, sample_rate=8000)
            return Case(kind, lambda: data.dataset(2, **{name: value}), False, [name])
        args = {"sample_rate": 8000, name: value}
        given = args.pop("manifest", utterances)
        return Case(kind, lambda: tt.data.SpeechDataset(given, alphabet, **args),
                    False, [name])  # fmt: skip

    # A float WAV with NaN or inf samples: a bad item like any other.
    samples = rng.uniform(-0.5, 0.5, int(rng.integers(100, 4000)))
    sf.write(os.path.join(folder, "good.wav"), samples, 8000, subtype="FLOAT")
    samples[int(rng.integers(len(samples)))] = bad_value
    bad_path = os.path.join(folder, "bad.wav")
    sf.write(bad_path, samples, 8000, subtype=str(rng.choice(["FLOAT", "DOUBLE"])))
    utterances = [tt.data.Utterance(os.path.join(folder, "good.wav"), "a"),
                  tt.data.Utterance(bad_path, "b")]  # fmt: skip
    if i // len(kinds) % 2:
        return Case(kind, lambda: tt.data.SpeechDataset(
            utterances, alphabet, sample_rate=8000), False, [bad_path])  # fmt: skip

    def check(data):
        return None if [p for p, _ in data.skipped] == [bad_path] else "kept"

    return Case(
        kind,
        lambda: tt.data.SpeechDataset(utterances, alphabet, sample_rate=8000,
                                      skip_bad=True),
        check=lambda got: check(got.item()),
    )  # fmt: skip


def fused_loss_cases(rng, i):
    """FusedRnntLoss: the joiner's projections and the joiner, through Keras."""
    B, T, S, J, C = 2, int(rng.integers(3, 8)), 3, 3, 5
    frames = np.array([T, int(rng.integers(1, T + 1))], np.int32)
    labels = np.array([[1, 2, 3], [4, 2, -1]], np.int32)
    encoder = rng.normal(size=(B, T, J)).astype(np.float32)
    decoder = rng.normal(size=(B, S + 1, J)).astype(np.float32)
    joiner = tt.layers.TransducerJoiner(C, J)
    joiner.build((None, J), (None, J))
    kernel, bias = (np.asarray(w, np.float64) for w in joiner.output_weights())
    y_pred = dict(encoder=encoder, decoder=decoder, joiner=joiner,
                  logit_lengths=frames)  # fmt: skip
    call = tt.FusedRnntLoss(reduction="none")
    kinds = ["legal", "mask", "middle_padding", "label_C", "weights", "rows",
             "width", "joiner", "mask_hole", "long_frames"]  # fmt: skip
    kind = kinds[i % len(kinds)]
    if kind in ("legal", "mask"):
        hidden = np.tanh(encoder[:, :, None].astype(np.float64) + decoder[:, None])
        boundary = [[0, 0, 3, frames[0]], [0, 0, 2, frames[1]]]
        want = rnnt_loss_reference(
            hidden @ kernel + bias, np.maximum(labels, 0), 0, boundary
        )
        if kind == "mask":
            masked = tf.convert_to_tensor(encoder)
            masked._keras_mask = tf.sequence_mask(frames, T)
            y_pred = dict(encoder=masked, decoder=decoder, joiner=joiner)
        return Case(kind, lambda: call(labels, y_pred), check=close(want))
    if kind == "middle_padding":
        return Case(kind, lambda: call([[1, -1, 2], [1, 2, 3]], y_pred), False,
                    ["y_true"])  # fmt: skip
    if kind == "label_C":
        return Case(kind, lambda: call([[1, C, 2], [1, 2, 3]], y_pred), False,
                    ["y_true"])  # fmt: skip
    if kind == "weights":
        return Case(kind, lambda: call(labels, y_pred, sample_weight=[1.0, 2, 3]),
                    False, ["sample_weight"])  # fmt: skip
    if kind == "rows":  # S + 2 decoder rows for S labels
        more = np.concatenate([decoder, decoder[:, :1]], axis=1)
        return Case(kind, lambda: call(labels, dict(y_pred, decoder=more)), False,
                    ['y_pred["decoder"]'])  # fmt: skip
    if kind == "width":
        return Case(kind, lambda: call(labels, dict(y_pred, decoder=decoder[..., :2])),
                    False, ['y_pred["decoder"]'])  # fmt: skip
    if kind == "joiner":
        return Case(kind, lambda: call(labels, dict(y_pred, joiner=joiner.joint)),
                    False, ['y_pred["joiner"]'])  # fmt: skip
    if kind == "mask_hole":
        holed = tf.convert_to_tensor(encoder)
        holed._keras_mask = tf.constant([[True, False] + [True] * (T - 2)] * B)
        return Case(kind, lambda: call(labels, dict(encoder=holed, decoder=decoder,
                    joiner=joiner)), False, ['y_pred["encoder"]'])  # fmt: skip
    return Case(kind, lambda: call(labels, dict(y_pred, logit_lengths=frames + 1)),
                False, ["logit_lengths"])  # fmt: skip


def _conformer_stream(encoder, x, lengths, chunk_frames):
    """encoder.step over zero-padded whole chunks of x, cut to the call's frames."""
    frames = x.shape[1]
    x = np.pad(x, [[0, 0], [0, -frames % chunk_frames], [0, 0]])
    states, outputs = encoder.initial_state(x.shape[0]), []
    for start in range(0, x.shape[1], chunk_frames):
        valid = np.clip(lengths - start, 0, chunk_frames).astype(np.int32)
        out, states = encoder.step(x[:, start : start + chunk_frames], states, valid)
        outputs.append(np.asarray(out))
    return np.concatenate(outputs, axis=1)[:, : -(-frames // encoder.subsampling)]


def conformer_cases(rng, i):
    """ConformerEncoder / ConformerBlock: streaming = offline, padding, bad input."""
    factor, chunk = int(rng.choice([2, 4])), int(rng.integers(1, 4))
    left = int(rng.integers(0, 5))
    B, T = int(rng.integers(1, 4)), int(rng.integers(1, 30))
    x = rng.normal(size=(B, T, 5)).astype(np.float32)
    lengths = rng.integers(0, T + 1, B).astype(np.int32)
    lengths[0] = T
    tf.keras.utils.set_random_seed(i)
    encoder = tt.ConformerEncoder(8, 2, 2, ff_mult=2, conv_kernel=3, chunk_size=chunk,
                                  left_context=left, subsampling=factor)  # fmt: skip
    want = np.asarray(encoder(x, lengths)[0])
    kinds = ["legal", "padding", "too_long", "negative", "float_lengths",
             "int_features", "chunk", "states", "state_shape", "argument", "width",
             "mask", "step_lengths"]  # fmt: skip
    kind = kinds[i % len(kinds)]
    if kind == "legal":
        run = lambda: _conformer_stream(encoder, x, lengths, chunk * factor)  # noqa: E731
        return Case(kind, run, check=close(want, 1e-4, 1e-5))
    if kind == "padding":
        noisy = x.copy()
        noisy[np.arange(T)[None] >= lengths[:, None]] = rng.choice([np.nan, 1e30])
        return Case(kind, lambda: encoder(noisy, lengths)[0], check=close(want))
    if kind == "too_long":
        return Case(kind, lambda: encoder(x, lengths + T + 1), False, ["lengths"])
    if kind == "negative":
        return Case(kind, lambda: encoder(x, -lengths - 1), False, ["lengths"])
    if kind == "float_lengths":
        return Case(kind, lambda: encoder(x, lengths + 0.5), False, ["lengths"])
    if kind == "int_features":
        return Case(kind, lambda: encoder(x.astype(np.int32), lengths), False,
                    ["features"])  # fmt: skip
    states = encoder.initial_state(B)
    if kind == "chunk":
        odd = x[:, : factor * chunk - 1] if factor * chunk > 1 else x[:, :0]
        return Case(kind, lambda: encoder.step(odd, states), False, ["features"])
    if kind == "states":
        return Case(kind, lambda: encoder.step(x[:, :factor], states[:-1]), False,
                    ["states"])  # fmt: skip
    if kind == "state_shape":
        k = int(rng.integers(0, len(states)))
        bad = list(states)
        bad[k] = tf.zeros([B, 7, 3])
        return Case(kind, lambda: encoder.step(x[:, :factor], bad), False,
                    [f"states[{k}]"])  # fmt: skip
    if kind == "argument":
        pairs = [("chunk_size", 0), ("left_context", -1), ("subsampling", 3),
                 ("num_heads", 3), ("conv_kernel", 1), ("dropout", 1.5),
                 ("chunk_sizes", [2, 0]), ("num_layers", 0)]  # fmt: skip
        name, value = pairs[int(rng.integers(0, len(pairs)))]
        return Case(kind, lambda: tt.ConformerEncoder(8, **{name: value}), False,
                    [name])  # fmt: skip
    if kind == "width":
        return Case(kind, lambda: encoder(x[..., :4], lengths), False, ["features"])
    if kind == "mask":
        block = tt.ConformerBlock(8, 2, conv_kernel=3)
        y = rng.normal(size=(B, T, 8)).astype(np.float32)
        return Case(kind, lambda: block(y, lengths, np.ones([T, T], np.float32)),
                    False, ["attention_mask"])  # fmt: skip
    chunk_x = np.zeros((B, factor * chunk, 5), np.float32)
    return Case(kind, lambda: encoder.step(chunk_x, states, [factor * chunk + 1] * B),
                False, ["lengths"])  # fmt: skip


def transducer_encoder_cases(rng, i):
    """Transducer(encoder, ...): stream_encode = encode (both encoders), bad parts."""
    factor, chunk = int(rng.choice([2, 4])), int(rng.integers(1, 4))
    B, T = int(rng.integers(1, 4)), int(rng.integers(1, 25))
    x = rng.normal(size=(B, T, 5)).astype(np.float32)
    lengths = rng.integers(0, T + 1, B).astype(np.int32)
    lengths[0] = T
    encoders = {
        "lstm": dict(class_name="TransducerEncoder", units=8, stack=factor),
        "conformer": dict(
            class_name="ConformerEncoder", d_model=8, num_layers=2, num_heads=2,
            conv_kernel=3, subsampling=factor, chunk_size=chunk,
            left_context=int(rng.integers(0, 4)), dropout=0.0,
        ),
    }  # fmt: skip
    parts = dict(
        predictor=dict(class_name="PredictionNetwork", units=8),
        joiner=dict(class_name="TransducerJoiner", units=8),
        feature_dim=5,
    )
    kinds = ["conformer", "lstm", "encoder", "argument", "chunk_frames", "lengths"]
    kind = kinds[i % len(kinds)]
    if kind in ("conformer", "lstm"):
        tf.keras.utils.set_random_seed(i)
        model = tt.models.Transducer(6, encoders[kind], **parts)
        want, frames = model.encode((x, lengths), training=False)
        valid = np.arange(want.shape[1]) < np.asarray(frames)[:, None]
        want = np.where(valid[..., None], want, 0.0)  # (the stream's, past lengths)
        return Case(kind, lambda: model.stream_encode((x, lengths))[0],
                    check=close(want, 1e-4, 1e-5))  # fmt: skip
    if kind == "encoder":
        bad = [{"class_name": "Transformer"}, "transformer", tf.keras.layers.Dense(3),
               {"units": 8}][int(rng.integers(0, 4))]  # fmt: skip
        return Case(kind, lambda: tt.models.Transducer(6, bad, **parts),
                    False, ["encoder"])  # fmt: skip
    if kind == "argument":
        pairs = [("d_model", 0), ("num_layers", 0), ("num_heads", 3),
                 ("conv_kernel", 1), ("dropout", 1.5), ("subsampling", 3),
                 ("chunk_size", 0), ("left_context", -1),
                 ("chunk_sizes", [0])]  # fmt: skip
        name, value = pairs[int(rng.integers(0, len(pairs)))]
        encoder = {**encoders["conformer"], name: value}
        return Case(kind, lambda: tt.models.Transducer(6, encoder, **parts), False,
                    ["encoder", name])  # fmt: skip
    model = tt.models.Transducer(6, encoders[str(rng.choice(list(encoders)))], **parts)
    if kind == "chunk_frames":
        bad = [0, -factor, factor + 1, float(factor)][int(rng.integers(0, 4))]
        return Case(kind, lambda: model.stream_encode((x, lengths), bad), False,
                    ["chunk_frames"])  # fmt: skip
    return Case(kind, lambda: model.stream_encode((x, lengths + T + 1)), False,
                ["lengths"])  # fmt: skip


def _tree_wav(path, rng):
    """A short random 16-bit WAV at 8 or 16 kHz at path; returns its seconds."""
    import soundfile as sf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    rate, n = int(rng.choice([8000, 16000])), int(rng.integers(1, 4000))
    sf.write(path, rng.uniform(-0.5, 0.5, n), rate, subtype="PCM_16")
    return n / rate


def corpus_cases(rng, i):
    """Corpus layouts: a random audio folder read right; bad trees named."""
    root = tempfile.mkdtemp(prefix="fuzz-corpus-")
    kinds = ["wav_folder", "ls_no_text", "ls_no_flac", "ls_empty", "cv_columns",
             "cv_row", "cv_duration", "cv_clip", "txt_no_audio", "txt_unreadable",
             "txt_utf8"]  # fmt: skip
    kind = kinds[i % len(kinds)]
    if kind == "wav_folder":  # legal: names with or without .wav, tab or spaces
        lines, want = [], []
        for k in range(int(rng.integers(1, 5))):
            seconds = _tree_wav(os.path.join(root, "a", f"u{k}.wav"), rng)
            text = " ".join(rng.choice(["one", "two", "oh"], int(rng.integers(1, 4))))
            name = f"a/u{k}" + str(rng.choice(["", ".wav"]))
            lines.append(name + str(rng.choice(["\t", " ", "   "])) + text)
            want.append((os.path.join(root, "a", f"u{k}.wav"), text, seconds))
        path = os.path.join(root, "list.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n" * int(rng.integers(0, 3)))
        want_text = repr(want)
        return Case(kind, lambda: repr([(u.path, u.transcript, u.duration) for u in
                                        tt.data.corpus_utterances(path)]),
                    check=lambda got: None if str(got) == want_text
                    else str(got))  # fmt: skip
    if kind.startswith("ls_"):
        chapter = os.path.join(root, "LS", "19", "198")
        os.makedirs(chapter)
        trans = os.path.join(chapter, "19-198.trans.txt")
        good = int(rng.integers(0, 3))
        for k in range(good):
            _tree_wav(os.path.join(chapter, f"19-198-{k:04d}.flac"), rng)
        lines = [f"19-198-{k:04d} ONE TWO" for k in range(good)]
        bad = {"ls_no_text": "19-198-0009", "ls_no_flac": "19-198-0009 THREE",
               "ls_empty": ""}[kind]  # fmt: skip
        with open(trans, "w") as f:
            f.write("\n".join(lines + [bad]) + "\n")
        names = [f"{trans}:{good + 1}:"] if bad else [os.path.join(root, "LS")]
        if kind == "ls_empty" and good:
            return Case(kind, lambda: len(tt.data.corpus_utterances(
                os.path.join(root, "LS"))), check=close(good))  # fmt: skip
        return Case(kind, lambda: tt.data.corpus_utterances(os.path.join(root, "LS")),
                    False, names)  # fmt: skip
    if kind.startswith("cv_"):
        folder = os.path.join(root, "cv", "en")
        clip = "common_voice_en_1.wav"
        _tree_wav(os.path.join(folder, "clips", clip), rng)
        header = ["client_id", "path", "sentence", "up_votes", "locale"]
        row = ["c", clip, "Hello there.", "2", "en"]
        if kind == "cv_columns":
            header[int(rng.integers(1, 3))] = str(rng.choice(["file", "text", ""]))
        if kind == "cv_row":
            row = row[: int(rng.integers(1, 5))] if rng.integers(0, 2) else row + ["x"]
        if kind == "cv_clip":
            row[1] = str(rng.choice(["nope.mp3", "../x.wav"]))
        if kind == "cv_duration":
            value = str(rng.choice(["abc", "-5", "nan", "inf", ""]))
            with open(os.path.join(folder, "clip_durations.tsv"), "w") as f:
                f.write(f"clip\tduration[ms]\n{clip}\t{value}\n")
        path = os.path.join(folder, "train.tsv")
        with open(path, "w") as f:
            f.write("\t".join(header) + "\n" + "\t".join(row) + "\n")
        where = {"cv_columns": f"{path}:1:", "cv_duration": "clip_durations.tsv:2:"}
        return Case(kind, lambda: tt.data.corpus_utterances(path), False,
                    [where.get(kind, f"{path}:2:")])  # fmt: skip
    path = os.path.join(root, "transcripts.txt")
    with open(os.path.join(root, "bad.wav"), "wb") as f:
        f.write(rng.bytes(int(rng.integers(0, 64))))
    lines = {"txt_no_audio": b"missing\tone two\n", "txt_unreadable": b"bad\tone\n",
             "txt_utf8": b"bad\tcaf\xe9\n"}[kind]  # fmt: skip
    with open(path, "wb") as f:
        f.write(lines)
    return Case(kind, lambda: tt.data.corpus_utterances(path), False, [f"{path}:1:"])


def tdt_cases(rng, i):
    B, T, S, C = 2, int(rng.integers(2, 6)), int(rng.integers(0, 3)), 5
    durations = [[0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 3]][int(rng.integers(3))]
    K = len(durations)
    tokens = rng.normal(size=(B, T, S + 1, C))
    durs = rng.normal(size=(B, T, S + 1, K))
    symbols = rng.integers(1, C, (B, S))
    frames = np.array([T, int(rng.integers(1, T + 1))])
    labels = np.array([S, int(rng.integers(0, S + 1))])
    lengths = dict(logit_lengths=frames, label_lengths=labels)

    def loss(tokens=tokens, durs=durs, durations=durations, **kw):
        kw = {**lengths, "reduction": "none", **kw}
        return tt.tdt_loss(tokens, durs, symbols, 0, durations, **kw)

    kind = ["legal", "padding_nan", "xla", "labels_C", "nan", "no_one",
            "unsorted", "k", "long_frames", "no_frames", "omega", "sigma",
            "blank", "clamp"][i % 14]  # fmt: skip
    if kind in ("legal", "padding_nan", "xla"):
        sigma = float(rng.choice([0.0, 0.1]))
        want = tdt_loss_reference(tokens, durs, symbols, 0, durations, frames, labels,
                                  sigma)  # fmt: skip
        if kind == "padding_nan":
            tokens[1, frames[1] :] = np.nan
            durs[1, :, labels[1] + 1 :] = np.inf
        if kind == "xla":
            traced = tf.function(lambda a, b: loss(a, b, sigma=sigma), jit_compile=True)
            return Case(kind, lambda: traced(tokens, durs), check=close(want))
        return Case(kind, lambda: loss(sigma=sigma), check=close(want))
    if kind == "labels_C":
        symbols[0, :] = C
        return Case(kind, loss, S == 0, ["symbols"], check=finite)
    if kind == "nan":
        tokens[0, 0, 0, int(rng.integers(C))] = np.nan
        return Case(kind, loss, False, ["token_logits"])
    if kind == "no_one":
        return Case(kind, lambda: loss(durations=[0, 2, 3][:K]), False, ["durations"])
    if kind == "unsorted":
        return Case(kind, lambda: loss(durations=durations[::-1]), False, ["durations"])
    if kind == "k":
        return Case(kind, lambda: loss(durs=durs[..., :-1]), False, ["duration_logits"])
    if kind == "long_frames":
        return Case(kind, lambda: loss(logit_lengths=frames + T), False,
                    ["logit_lengths"])  # fmt: skip
    if kind == "no_frames":
        return Case(kind, lambda: loss(logit_lengths=frames * 0), False,
                    ["logit_lengths"])  # fmt: skip
    if kind == "omega":
        return Case(kind, lambda: loss(omega=float(rng.choice([-0.5, 2.0, np.nan]))),
                    False, ["omega"])  # fmt: skip
    if kind == "sigma":
        return Case(kind, lambda: loss(sigma=float("inf")), False, ["sigma"])
    if kind == "blank":
        return Case(kind, lambda: tt.tdt_loss(tokens, durs, symbols, C, durations),
                    False, ["blank"])  # fmt: skip
    return Case(kind, lambda: loss(clamp=float("nan")), False, ["clamp"])


def tdt_family_cases(rng, i):
    """tdt_loss_simple, tdt_loss_pruned (with get_tdt_prune_ranges) and
    tdt_loss_joint: legal inputs against the reference, bad ones named."""
    B, T, S, C, J = 2, int(rng.integers(2, 6)), int(rng.integers(1, 4)), 5, 3
    durations = [[0, 1, 2], [0, 1, 3]][int(rng.integers(2))]
    K = len(durations)
    frames = np.array([T, int(rng.integers(1, T + 1))])
    labels = np.array([S, int(rng.integers(0, S + 1))])
    lengths = dict(logit_lengths=frames, label_lengths=labels, reduction="none")
    symbols = rng.integers(1, C, (B, S))
    lm, am = rng.normal(size=(B, S + 1, C)), rng.normal(size=(B, T, C))
    lm_d, am_d = rng.normal(size=(B, S + 1, K)), rng.normal(size=(B, T, K))
    joint = [rng.normal(size=s) for s in ((B, T, J), (B, S + 1, J), (J, C), (C,),
                                          (J, K), (K,))]  # fmt: skip
    hidden = np.tanh(joint[0][:, :, None] + joint[1][:, None])
    tokens = hidden @ joint[2] + joint[3]
    durs = hidden @ joint[4] + joint[5]
    full = np.full((B, T, S + 1), 0)
    ranges = np.broadcast_to(np.arange(S + 1), (B, T, S + 1)) + full

    def simple(lm=lm, am_d=am_d, durations=durations):
        return tt.tdt_loss_simple(lm, am, lm_d, am_d, symbols, 0, durations, **lengths)

    def pruned(tokens=tokens, ranges=ranges):
        return tt.tdt_loss_pruned(tokens, durs, symbols, ranges, 0, durations,
                                  **lengths)  # fmt: skip

    def fused(*args, activation="tanh"):
        args = args or joint
        return tt.tdt_loss_joint(*args, symbols, 0, durations, activation, **lengths)

    kind = ["simple", "simple_xla", "simple_k", "simple_b", "simple_durations",
            "pruned", "pruned_xla", "pruned_ranges", "pruned_outside", "pruned_nan",
            "joint", "joint_xla", "joint_j", "joint_dtype", "joint_activation",
            "joint_nan"][i % 16]  # fmt: skip
    trivial_t, trivial_d = (
        am[:, :, None] + lm[:, None],
        am_d[:, :, None] + lm_d[:, None],
    )
    if kind in ("simple", "simple_xla"):
        want = tdt_loss_reference(trivial_t, trivial_d, symbols, 0, durations,
                                  frames, labels)  # fmt: skip
        run = simple if kind == "simple" else tf.function(simple, jit_compile=True)
        return Case(kind, run, check=close(want))
    if kind == "simple_k":
        return Case(kind, lambda: simple(am_d=am_d[..., :1]), False, ["am_durations"])
    if kind == "simple_b":
        return Case(kind, lambda: simple(am_d=am_d[:1]), False, ["am_durations"])
    if kind == "simple_durations":
        return Case(kind, lambda: simple(durations=[0, 2, 3]), False, ["durations"])
    want = tdt_loss_reference(tokens, durs, symbols, 0, durations, frames, labels)
    if kind in ("pruned", "pruned_xla"):
        run = pruned if kind == "pruned" else tf.function(pruned, jit_compile=True)
        return Case(kind, run, check=close(want))
    if kind == "pruned_ranges":
        bad = ranges.copy()
        bad[0, 0, -1] = bad[0, 0, 0]
        return Case(kind, lambda: pruned(ranges=bad), False, ["ranges"])
    if kind == "pruned_outside":
        return Case(kind, lambda: pruned(ranges=ranges + 1), False, ["ranges"])
    if kind == "pruned_nan":
        bad = tokens.copy()
        bad[0, 0, 0, 1] = np.nan
        return Case(kind, lambda: pruned(tokens=bad), False, ["token_logits"])
    if kind in ("joint", "joint_xla"):
        run = fused if kind == "joint" else tf.function(fused, jit_compile=True)
        return Case(kind, run, check=close(want))
    if kind == "joint_j":
        return Case(kind, lambda: fused(*joint[:4], joint[4][:-1], joint[5]), False,
                    ["duration_weight"])  # fmt: skip
    if kind == "joint_dtype":
        return Case(kind, lambda: fused(*joint[:5], joint[5].astype(np.float32)),
                    False, ["duration_bias"])  # fmt: skip
    if kind == "joint_activation":
        return Case(kind, lambda: fused(activation="gelu"), False, ["activation"])
    bad = [x.copy() for x in joint]
    bad[0][0, 0, 0] = np.nan
    return Case(kind, lambda: fused(*bad), False, ["encoder"])


def graph_decoding_cases(rng, i):
    """The graph searches (issue 44): found_share, streaming beam state,
    token n-gram fusion and their bad inputs, on table-driven steps."""
    from tests.decoding.test_graph_greedy import V
    from tests.decoding.test_graph_greedy import reference
    from tests.decoding.test_graph_greedy import table_steps
    from tests.decoding.test_graph_greedy import tables
    from tests.decoding.test_graph_greedy import unpad
    from tests.decoding.test_token_lm import ARPA
    from tests.decoding.test_transducer_decoding import frames
    from tf_transducer.decoding import beam_graph_start
    from tf_transducer.decoding import label_looping_greedy
    from tf_transducer.decoding import modified_beam_continue
    from tf_transducer.decoding import token_lm
    from tf_transducer.decoding.graph_beam import modified_beam_graph

    B, T = 2, int(rng.integers(1, 6))
    tokens, _ = tables(B, T, int(rng.integers(1000)), False)
    steps, encoder = table_steps(tokens), frames(B, T)
    lengths = np.array([T, int(rng.integers(0, T + 1))])
    beam = int(rng.integers(1, 4))
    folder = tempfile.mkdtemp(prefix="fuzz-graph-")
    arpa = os.path.join(folder, "tokens.arpa")
    with open(arpa, "w") as f:
        f.write(ARPA)  # a trigram over labels 1-4 (4: no class of the tables)

    kind = ["greedy_share", "share_bad", "beam_stream", "beam_lm", "lm_classes",
            "lm_scale", "lm_type", "vocab_size", "arpa_missing", "state_mismatch",
            "beam_bad", "tdt_beam", "tdt_durations"][i % 13]  # fmt: skip
    if kind == "greedy_share":
        share = float(rng.uniform(0.01, 1.0))
        want = reference(tokens, None, lengths, 3).hyps

        def check(hyps):
            got = unpad(hyps)
            return None if got == want else f"labels {got} != numpy search's {want}"

        return Case(kind, lambda: label_looping_greedy(encoder, lengths, steps,
                                                       found_share=share),
                    check=check)  # fmt: skip
    if kind == "share_bad":
        share = [0.0, -0.5, 1.5, float("nan"), "half", None][int(rng.integers(6))]
        return Case(kind, lambda: label_looping_greedy(encoder, lengths, steps,
                                                       found_share=share),
                    False, ["found_share"])  # fmt: skip
    if kind == "beam_stream":  # chunk by chunk = the whole utterance
        cut = int(rng.integers(0, T + 1))
        whole = modified_beam_graph(encoder, lengths, steps, beam)

        def streamed():
            state = beam_graph_start(steps, B, beam)
            for a, b in ((0, cut), (cut, T)):
                part = np.clip(lengths - a, 0, b - a)
                hyps, state = modified_beam_continue(
                    encoder[:, a:b], part, steps, state
                )
            return hyps

        def check(hyps):
            if unpad(hyps) != unpad(whole):
                return f"streamed {unpad(hyps)} != whole {unpad(whole)}"
            return close(np.asarray(whole.scores))(hyps.scores)

        return Case(kind, streamed, check=check)
    if kind == "beam_lm":  # against the numpy search with the same n-gram
        from tests.decoding.test_graph_beam import check_equal

        fusion = dict(token_lm=token_lm(arpa, V), lm_scale=float(rng.uniform(0, 2)))

        def check(hyps):
            try:
                check_equal(hyps, tokens, lengths, beam, **fusion)
            except AssertionError as error:
                return str(error)
            return None

        return Case(kind, lambda: modified_beam_graph(encoder, lengths, steps, beam,
                                                      **fusion),
                    check=check)  # fmt: skip
    if kind == "lm_classes":
        lm = token_lm(arpa, V + int(rng.integers(1, 3)))
        return Case(kind, lambda: modified_beam_graph(encoder, lengths, steps, beam,
                                                      token_lm=lm),
                    False, ["token_lm"])  # fmt: skip
    if kind == "lm_scale":
        scale = [-1.0, float("nan"), "0.3", None][int(rng.integers(4))]
        lm = token_lm(arpa, V)
        return Case(kind, lambda: modified_beam_graph(encoder, lengths, steps, beam,
                                                      token_lm=lm, lm_scale=scale),
                    False, ["lm_scale"])  # fmt: skip
    if kind == "lm_type":
        bad = [arpa, {"goto": 1}, 3][int(rng.integers(3))]
        return Case(kind, lambda: modified_beam_graph(encoder, lengths, steps, beam,
                                                      token_lm=bad),
                    False, ["token_lm"])  # fmt: skip
    if kind == "vocab_size":
        size = [1, 0, 2.5, "6", -3][int(rng.integers(5))]
        return Case(kind, lambda: token_lm(arpa, size), False, ["vocab_size"])
    if kind == "arpa_missing":
        missing = os.path.join(folder, "missing.arpa")
        return Case(kind, lambda: token_lm(missing, V), False, ["missing.arpa"])
    if kind == "state_mismatch":  # started without the n-gram, continued with it
        state = beam_graph_start(steps, B, beam)
        lm = token_lm(arpa, V)
        return Case(kind, lambda: modified_beam_continue(encoder, lengths, steps, state,
                                                         token_lm=lm),
                    False, ["state"])  # fmt: skip
    if kind == "beam_bad":
        bad_beam = [0, -1, 2.0, "4"][int(rng.integers(4))]
        return Case(kind, lambda: modified_beam_graph(encoder, lengths, steps,
                                                      bad_beam),
                    False, ["beam"])  # fmt: skip
    from tests.decoding.test_graph_greedy import DURATIONS
    from tf_transducer.decoding import tdt_beam_graph

    tokens, durs = tables(B, T, int(rng.integers(1000)), True)
    steps = table_steps(tokens, durs)
    if kind == "tdt_beam":  # against the numpy search, random beam and symbols
        from tests.decoding.test_graph_tdt_beam import check_equal as check_tdt

        symbols = int(rng.integers(1, 4))

        def check(hyps):
            try:
                check_tdt(hyps, tokens, durs, lengths, beam, symbols)
            except AssertionError as error:
                return str(error)
            return None

        return Case(kind, lambda: tdt_beam_graph(encoder, lengths, steps, DURATIONS,
                                                 beam, symbols),
                    check=check)  # fmt: skip
    bad = [[1, 2], [0, 2, 3], [], [[0, 1]]][int(rng.integers(4))]
    return Case(kind, lambda: tdt_beam_graph(encoder, lengths, steps, bad, beam),
                False, ["durations"])  # fmt: skip


FAMILIES = {
    "edges": edge_cases,
    "augment": augment_cases,
    "mi": mi_cases,
    "rnnt": rnnt_cases,
    "simple": simple_cases,
    "keras_losses": keras_loss_cases,
    "features": feature_cases,
    "manifests": manifest_cases,
    "runners": runner_cases,
    "lattice": lattice_cases,
    "train_loop": train_loop_cases,
    "inputs": input_cases,
    "fused_loss": fused_loss_cases,
    "conformer": conformer_cases,
    "transducer_encoders": transducer_encoder_cases,
    "corpora": corpus_cases,
    "tdt": tdt_cases,
    "tdt_family": tdt_family_cases,
    "graph_decoding": graph_decoding_cases,
}
ERRORS = (ValueError, TypeError, FileNotFoundError, tf.errors.InvalidArgumentError)


def run_case(family, index):
    rng = np.random.default_rng([sum(map(ord, family)), index])
    case = FAMILIES[family](rng, index)
    report = {"case": f"{family}/{index}/{case.name}", "legal": case.legal,
              "names": case.names}  # fmt: skip
    try:
        result = case.run()
        result = tf.nest.map_structure(
            lambda x: np.asarray(x) if x is not None else None, result
        )
    except ERRORS as error:
        report.update(outcome="error", error=f"{type(error).__name__}: {error}")
        return report
    except Exception as error:  # an error of an unexpected kind
        report.update(
            outcome="error",
            error=f"{type(error).__name__}: {error}",
            unexpected=traceback.format_exc(limit=3),
        )
        return report
    wrong = case.check(result) if (case.legal and case.check) else None
    report.update(outcome="wrong" if wrong else "ok", detail=wrong or "")
    return report


def main(family, first, count):
    for index in range(first, first + count):
        print(json.dumps(run_case(family, index)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
