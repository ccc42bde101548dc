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
    return Case(kind, lambda: fn(px[:, :0], py[:, :1]), False, ["S"])


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
        return Case(kind, lambda: loss(clamp=float("inf")), False, ["clamp"])
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
            "batch", "frames"][i // 2 % 8]  # fmt: skip
    layer = make()
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
            "object"][i % 8]  # fmt: skip
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
            else b"wav_filename,wav_filesize,transcript\na.wav\n"
        )
    else:
        path = os.path.join(folder, "m.jsonl")
        good = '{"audio_filepath": "b.wav", "text": "b"}\n'
        content = (good * int(rng.integers(0, 3)) + lines[kind] + "\n").encode()
    with open(path, "wb") as f:
        f.write(content)
    return Case(kind, lambda: tt.data.read_manifest(path), False, [path + ":"])


_EXPORT = {}


def _transducer_stream():
    """A TransducerStream over a tiny untrained export (built once per child)."""
    if "stream" not in _EXPORT:
        from tf_transducer.export import TransducerStream, export_transducer

        alphabet = tt.CharacterAlphabet.english()
        model = tt.models.Transducer(alphabet.vocab_size, feature_dim=20,
                                     encoder_units=8, predictor_units=8,
                                     joiner_units=8, embedding_dim=4)  # fmt: skip
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


FAMILIES = {
    "augment": augment_cases,
    "mi": mi_cases,
    "rnnt": rnnt_cases,
    "simple": simple_cases,
    "keras_losses": keras_loss_cases,
    "features": feature_cases,
    "manifests": manifest_cases,
    "runners": runner_cases,
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
