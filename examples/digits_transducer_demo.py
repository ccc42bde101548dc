# SPDX-License-Identifier: Apache-2.0
"""`make demo`: a streaming RNN-T transducer for spoken digits, end to end.

1. Train two small transducers side by side, each in its own process
   (log-mel -> a 2-layer LSTM encoder, 72 epochs; or a streaming Conformer
   encoder, 6 blocks, 320 ms chunks, with a CTC head beside the
   transducer loss, 48 epochs; stateless prediction network, joiner;
   FusedRnntLoss: the RNN-T loss with the joiner inside it, its logits
   never stored; whole words with a delimiter class between them;
   `digits_recipe.digits_config`) on the bundled spoken-digits corpus: 520
   utterances of 76 synthetic voices (a quarter read one word at a time).
   After 10 epochs on clean audio, each epoch is augmented afresh (speed
   0.9 / 1.0 / 1.1, pitch, tempo, reverberation, telephone band, noise and
   babble, gain, DC offset; `train_loop`: a line per epoch).
2. Decode, with each, the synthetic test voices (never heard in training) and the
   bundled real human recordings (digits_real: Allison Smith's digits from
   Debian's asterisk-core-sounds-en-wav, a TIDIGITS utterance from
   pocketsphinx-testdata; never trained on): WER and CER of greedy search
   and of standard beam search (beam 4; several words per frame allowed,
   which read the real voice slightly better than one per frame), and of
   the Conformer's CTC head.
3. Keep the one with the lower beam WER on the real voices. Export its
   streaming TFLite programs (features, encoder chunk, prediction step,
   joiner) three times: float, dynamic-range quantised (int8
   weights) and full-integer int8 (calibrated on 200 training utterances).
4. Transcribe both sets chunk by chunk with the LiteRT interpreter with each
   export: WER, size and real-time factor side by side, and the float
   streams checked against the offline Keras transcripts.

Everything stays in --work_dir (default runs/digits_demo).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

from tf_transducer.data.corpora import manifest  # noqa: E402
from tf_transducer.training import transducer_recipe as recipe  # noqa: E402
from tf_transducer.training.digits_recipe import EPOCHS as DEMO_EPOCHS  # noqa: E402
from tf_transducer.training.digits_recipe import N_MELS  # noqa: E402
from tf_transducer.training.digits_recipe import SAMPLE_RATE  # noqa: E402
from tf_transducer.training.digits_recipe import digits_config  # noqa: E402

WORK_DIR = flags.DEFINE_string("work_dir", "runs/digits_demo", "Outputs.")
EPOCHS = flags.DEFINE_integer(
    "demo_epochs", DEMO_EPOCHS["lstm"], "The LSTM transducer's epochs.", lower_bound=1
)
CONFORMER_EPOCHS = flags.DEFINE_integer(
    "demo_conformer_epochs", DEMO_EPOCHS["conformer"],
    "The Conformer transducer's epochs.", lower_bound=1,
)  # fmt: skip
ENCODERS = flags.DEFINE_multi_enum(
    "demo_encoders",
    ["lstm", "conformer"],
    ["lstm", "conformer"],
    "The encoders to train (the demo keeps the better one on the real voices).",
)
LOSS = flags.DEFINE_enum(
    "demo_loss", "fused", list(recipe.LOSSES), "The RNN-T loss (see recipe.train)."
)
WAVE_AUGMENT = flags.DEFINE_enum(
    "demo_wave_augment", "default", ["default", "none"], "Waveform augmentation."
)
PARALLEL = flags.DEFINE_boolean(
    "demo_parallel",
    True,
    "Train the encoders side by side, each in its own process with an equal "
    "share of the cores (their epoch lines go to --work_dir/train_KIND.log "
    "and here, their errors to train_KIND.err); the demo then goes on with "
    "each run's best.keras.",
)
TRAIN_ONE = flags.DEFINE_enum(
    "demo_train_one", None, ["lstm", "conformer"],
    "Internal (--demo_parallel): train this encoder and exit.",
)  # fmt: skip
THREADS = flags.DEFINE_integer(
    "demo_threads", None, "TensorFlow's threads (default: all cores).", lower_bound=1
)
RUNS = {"lstm": "checkpoint", "conformer": os.path.join("conformer", "checkpoint")}
BEAM, BEAM_METHOD = 4, "standard"
MODES = ("float", "dynamic", "int8")
SETS = {"synthetic": "digits_test", "real": "digits_real"}
SOURCES = {
    "synthetic": "3 espeak-ng voices never heard in training",
    "real": "human recordings, never trained on: Allison Smith's digits from "
    "Debian's asterisk-core-sounds-en-wav, joined into 24 strings, and a "
    "TIDIGITS utterance from pocketsphinx-testdata (see the corpora README)",
}


def banner(step, text):
    print(f"\n=== {step}. {text} ===", flush=True)


def run_config(kind):
    """The demo's RunConfig with an "lstm" or "conformer" encoder."""
    epochs = EPOCHS.value if kind == "lstm" else CONFORMER_EPOCHS.value
    return digits_config(kind, epochs, LOSS.value, WAVE_AUGMENT.value)


def train(kind, run_dir):
    """Trains the demo's transducer with an "lstm" or "conformer" encoder."""
    start = time.time()
    model, text_encoder, _ = recipe.train(
        run_config(kind),
        run_dir,
        verbose="auto",  # a progress bar on a terminal, else epoch lines
        overwrite=True,  # a fresh run every time (the timings stay comparable)
    )
    seconds = time.time() - start
    print(f"{kind}: {model.count_params():,} parameters, trained in {seconds:.0f} s")
    return model, text_encoder


def train_side_by_side(kinds):
    """Trains each encoder in its own process at once; returns {kind: (model, encoder)}.

    On 2 cores two runs of one thread each finish sooner than the same runs
    one after the other with two threads (BENCHMARKS.md, "The Conformer
    recipe"): these small models keep a second thread half idle.
    """
    import subprocess
    import sys

    cores = len(os.sched_getaffinity(0))
    threads = max(1, cores // len(kinds))
    os.makedirs(WORK_DIR.value, exist_ok=True)
    children, logs, errs, seen = {}, {}, {}, {}
    for kind in kinds:
        logs[kind] = os.path.join(WORK_DIR.value, f"train_{kind}.log")
        errs[kind] = logs[kind][: -len(".log")] + ".err"
        argv = [sys.executable, os.path.abspath(__file__), f"--demo_train_one={kind}",
                f"--demo_threads={threads}", f"--work_dir={WORK_DIR.value}",
                f"--demo_epochs={EPOCHS.value}",
                f"--demo_conformer_epochs={CONFORMER_EPOCHS.value}",
                f"--demo_loss={LOSS.value}",
                f"--demo_wave_augment={WAVE_AUGMENT.value}"]  # fmt: skip
        # The children keep their own handles: epoch lines in .log (echoed
        # here), TensorFlow's start-up chatter and errors in .err.
        with open(logs[kind], "wb") as out, open(errs[kind], "wb") as err:
            children[kind] = subprocess.Popen(argv, stdout=out, stderr=err)
        seen[kind] = 0
    print(f"  {len(kinds)} processes of {threads} thread(s) on {cores} cores",
          flush=True)  # fmt: skip

    def echo():  # the children's new whole lines, each marked with its encoder
        for kind, path in logs.items():
            with open(path, "rb") as log:
                log.seek(seen[kind])
                text = log.read()
            text = text[: text.rfind(b"\n") + 1]
            seen[kind] += len(text)
            for line in text.decode(errors="replace").splitlines():
                print(f"  [{kind}] {line}", flush=True)

    try:
        while any(child.poll() is None for child in children.values()):
            time.sleep(5)
            echo()
    finally:  # an interrupted demo leaves no training behind
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    echo()
    for kind, child in children.items():
        if child.returncode != 0:
            with open(errs[kind], errors="replace") as err:
                tail = err.read()[-2000:]
            raise SystemExit(
                f"{tail}\ntraining the {kind} transducer failed (exit "
                f"{child.returncode}); see {errs[kind]}"
            )
    # The finished runs, as their folders keep them (best.keras).
    return {kind: recipe.load_checkpoint(run_folder(kind)) for kind in kinds}


def run_folder(kind):
    return os.path.join(WORK_DIR.value, RUNS[kind])


def decode(kind, model, text_encoder):
    """WERs (greedy, beam[, CTC head]) and offline greedy transcripts of both sets."""
    data, wers, offline = {}, {}, {}
    for name, key in SETS.items():
        data[name], features = recipe.speech_data(
            [manifest(key)], text_encoder, SAMPLE_RATE, N_MELS, 30.0
        )
        greedy_wer, greedy_cer, pairs = recipe.evaluate(model, text_encoder, data[name])
        offline[name] = [hyp for _, hyp in pairs]
        wer, cer, beam_pairs = recipe.evaluate(
            model, text_encoder, data[name], beam_width=BEAM, beam_method=BEAM_METHOD
        )
        wers[name] = [greedy_wer, wer]
        head = ""
        if model.ctc_head is not None:  # a hybrid model: its CTC head's best path
            ctc_wer, _, _ = recipe.evaluate(model, text_encoder, data[name],
                                            decoder="ctc")  # fmt: skip
            wers[name].append(ctc_wer)
            head = f"; CTC head WER {ctc_wer:.3f}"
        print(
            f"  {kind:9s} {name:9s} {len(pairs):3d} utterances: greedy WER "
            f"{greedy_wer:.3f} CER {greedy_cer:.3f}; beam {BEAM} WER {wer:.3f} "
            f"CER {cer:.3f}{head}"
        )
        for ref, hyp in beam_pairs[:1]:
            print(f"    ref: {ref!r}\n    hyp: {hyp!r}")
    return data, features, wers, offline


def main(argv):
    del argv
    if not flags.FLAGS["verbosity"].present:  # as the command lines
        logging.set_verbosity(logging.WARNING)
    if THREADS.value:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(THREADS.value)
        tf.config.threading.set_inter_op_parallelism_threads(THREADS.value)
    if TRAIN_ONE.value:
        train(TRAIN_ONE.value, run_folder(TRAIN_ONE.value))
        return 0
    start = time.time()
    export_dir = os.path.join(WORK_DIR.value, "tflite")
    kinds = [k for k in RUNS if k in ENCODERS.value]

    corpus = manifest("digits_train")
    trained = {}
    if PARALLEL.value and len(kinds) > 1:
        banner(1, f"train the {' and '.join(kinds)} transducers side by side on "
               f"{corpus} (76 voices), {EPOCHS.value} and "
               f"{CONFORMER_EPOCHS.value} epochs")  # fmt: skip
        trained = train_side_by_side(kinds)
    for step, kind in enumerate(k for k in kinds if k not in trained):
        epochs = EPOCHS.value if kind == "lstm" else CONFORMER_EPOCHS.value
        banner(f"1.{step + 1}", f"train the {kind} transducer on {corpus} "
               f"(76 voices), {epochs} epochs")  # fmt: skip
        trained[kind] = train(kind, run_folder(kind))
    training_seconds = time.time() - start

    banner(2, "decoding: synthetic test voices and real human recordings")
    for name, key in SETS.items():
        print(f"{name} ({manifest(key)}): {SOURCES[name]}")
    decoded = {kind: decode(kind, *trained[kind]) for kind in kinds}
    # Kept: the better beam WER on the real voices (then the synthetic ones).
    kind = min(kinds, key=lambda k: (decoded[k][2]["real"][1],
                                     decoded[k][2]["synthetic"][1]))  # fmt: skip
    model, text_encoder = trained[kind]
    data, features, keras_wer, offline = decoded[kind]
    print(f"kept: the {kind} transducer (its beam WER on the real voices)")

    banner(3, f"export the {kind} transducer's streaming programs to {export_dir}")
    from tf_transducer.data import calibration_audio
    from tf_transducer.export import export_transducer

    calibration = calibration_audio(manifest("digits_train"), SAMPLE_RATE, 200)
    for mode in MODES:
        sizes = export_transducer(
            model,
            os.path.join(export_dir, mode),
            text_encoder,
            features,
            quantization=mode,
            calibration_audio=calibration if mode == "int8" else None,
        )
        listed = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in sizes.items())
        print(f"  {mode:8s} {sum(sizes.values()) / 1e6:5.2f} MB ({listed})")

    banner(4, "transcribe both sets chunk by chunk (LiteRT, 1 thread)")
    results = {
        (mode, name): recipe.evaluate_export(
            os.path.join(export_dir, mode), data[name].paths, data[name].transcripts
        )
        for mode in MODES
        for name in SETS
    }
    print(f"  {'programs':26s} {'size MB':>8s} {'WER synth':>10s} {'WER real':>9s} "
          f"{'RTF':>7s}  {'= offline greedy':>16s}")  # fmt: skip
    for other in kinds:
        wers = decoded[other][2]
        for i, label in enumerate(("greedy", f"beam {BEAM}", "CTC head")):
            if i == len(wers["real"]):
                break
            print(
                f"  {'Keras ' + other + ' ' + label:26s} {'':>8s} "
                f"{wers['synthetic'][i]:10.3f} {wers['real'][i]:9.3f}"
            )
    total = sum(len(texts) for texts in offline.values())
    for mode in MODES:
        synth, real = results[mode, "synthetic"], results[mode, "real"]
        same = sum(
            a == b
            for name in SETS
            for a, b in zip(results[mode, name]["texts"], offline[name], strict=True)
        )
        print(
            f"  {'TFLite ' + kind + ' ' + mode:26s} {synth['size'] / 1e6:8.2f} "
            f"{synth['wer']:10.3f} {real['wer']:9.3f} {synth['rtf']:7.4f}  "
            f"{same:>9d} / {total}"
        )
    real = data["real"]
    for i in (0, len(real.paths) - 1):
        print(
            f"  {os.path.basename(real.paths[i])}: "
            f"{results['dynamic', 'real']['texts'][i]!r} (reference "
            f"{real.transcripts[i]!r})"
        )
    print(
        f"\ndone in {time.time() - start:.0f} s (training {training_seconds:.0f} s); "
        f"kept the {kind} transducer: beam {BEAM} WER "
        f"{keras_wer['synthetic'][1]:.3f} on synthetic test voices, "
        f"{keras_wer['real'][1]:.3f} on real recordings; streamed dynamic-range "
        f"programs {results['dynamic', 'synthetic']['wer']:.3f} / "
        f"{results['dynamic', 'real']['wer']:.3f}"
    )
    return 0 if np.isfinite(keras_wer["synthetic"][1]) else 1


if __name__ == "__main__":
    app.run(main)
