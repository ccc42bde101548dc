# SPDX-License-Identifier: Apache-2.0
"""What makes the demo's Conformer generalise: recipe experiments (issue 45).

Each variant is the demo's Conformer run (`digits_config("conformer")`:
conformer-2m's encoder, lstm-1m's prediction network and joiner, the
digits corpus with word delimiters, waveform augmentation, a CTC head of
weight 0.5, batches of 8) changed by `section.setting=value` overrides
(those of `--set`), e.g.

  --variant "before:training.ctc_weight=0;training.batch_size=16"
  --variant "sa:augment.spec_augment=LB"

(`name:` alone is the demo's run; "before" is the run the experiments in
BENCHMARKS.md started from, their overrides written against it). Every
(variant, seed) trains in its own process (--threads: 2) for --epochs and
is then evaluated there: WER of greedy
search and of beam search (beam 4, standard, as the demo) on the synthetic
test voices and on the real recordings, and, for a model with a CTC head,
of the head's best path. Each result is appended to
--work_dir/results.jsonl; a (variant, seed, epochs) already there is not
trained again. The table lists every result of the variants asked for,
then each variant's mean over its seeds.

Usage: python -m benchmarks.bench_conformer_recipe --variant NAME:OVERRIDES
  [--variant ...] [--seeds 0] [--epochs 72] [--work_dir runs/conformer_recipe]
"""

import json
import os
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

from benchmarks import _harness

VARIANTS = flags.DEFINE_multi_string(
    "variant", ["demo:"], "NAME:override;override (section.setting=value)."
)
SEEDS = flags.DEFINE_list("seeds", ["0"], "Seeds of each variant.")
EPOCHS = flags.DEFINE_integer("epochs", 72, "Training epochs.", lower_bound=1)
WORK_DIR = flags.DEFINE_string(
    "work_dir", "runs/conformer_recipe", "The runs and results.jsonl."
)
ENCODER = flags.DEFINE_enum(
    "encoder", "conformer", ["conformer", "lstm"], "The demo run to start from."
)
THREADS = flags.DEFINE_integer(
    "threads", 2, "TensorFlow's threads in each run (intra- and inter-op).",
    lower_bound=1,
)  # fmt: skip
WORKER = flags.DEFINE_string("worker", None, "Internal: the run's JSON.")

SETS = {"synthetic": "digits_test", "real": "digits_real"}
BEAM = 4


def parse_variant(text):
    """(name, [overrides]) of "name:a=1;b=2"."""
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise app.UsageError(f"--variant {text!r}: expected NAME:OVERRIDES")
    return name, [x.strip() for x in rest.split(";") if x.strip()]


def train_and_evaluate(run):
    """Trains one run and evaluates it; returns its results."""
    import tensorflow as tf

    threads = run.get("threads", 2)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    from tf_transducer.data.corpora import manifest
    from tf_transducer.training import transducer_recipe as recipe
    from tf_transducer.training.digits_recipe import N_MELS
    from tf_transducer.training.digits_recipe import SAMPLE_RATE
    from tf_transducer.training.digits_recipe import digits_config

    base = digits_config(run["encoder"], seed=run["seed"])
    config = base.with_overrides(
        [*run["overrides"], f"training.epochs={run['epochs']}"]
    )
    began = time.time()
    model, text_encoder, history = recipe.train(config, run["dir"], verbose=2,
                                                overwrite=True)  # fmt: skip
    result = dict(run, train_s=time.time() - began, params=model.count_params())
    result["final_loss"] = history["loss"][-1] if history else None
    decoders = [("greedy", {}), ("beam", dict(beam_width=BEAM, beam_method="standard"))]
    if model.ctc_head is not None:
        decoders.append(("ctc", dict(decoder="ctc")))
    for name, key in SETS.items():
        data, _ = recipe.speech_data([manifest(key)], text_encoder, SAMPLE_RATE,
                                     N_MELS, 30.0)  # fmt: skip
        for label, options in decoders:
            wer, _, _ = recipe.evaluate(model, text_encoder, data, **options)
            result[f"{name}_{label}"] = wer
    return result


def child(run):
    command = [*_harness.self_command(__spec__), f"--worker={json.dumps(run)}"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=_harness.ROOT)
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise RuntimeError(f"run {run['variant']} seed {run['seed']} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


def cell(row, key):
    value = row.get(key)
    return "-" if value is None else f"{value:.3f}"


# In the table's order: pairs of columns.
KEYS = ("synthetic_greedy", "synthetic_beam", "real_greedy", "real_beam",
        "synthetic_ctc", "real_ctc")  # fmt: skip


def main(argv):
    del argv
    if WORKER.value:
        print(json.dumps(train_and_evaluate(json.loads(WORKER.value))))
        return
    os.makedirs(WORK_DIR.value, exist_ok=True)
    path = os.path.join(WORK_DIR.value, "results.jsonl")
    done = []
    if os.path.exists(path):
        with open(path) as f:
            done = [json.loads(line) for line in f if line.strip()]
    rows = []
    for text in VARIANTS.value:
        name, overrides = parse_variant(text)
        for seed in (int(s) for s in SEEDS.value):
            run = dict(variant=name, overrides=overrides, seed=seed,
                       epochs=EPOCHS.value, encoder=ENCODER.value,
                       threads=THREADS.value,
                       dir=os.path.join(WORK_DIR.value, f"{name}-{seed}"))  # fmt: skip
            same = [r for r in done if all(r.get(k) == run[k] for k in
                                           ("variant", "overrides", "seed", "epochs",
                                            "encoder"))]  # fmt: skip
            if same:
                rows.append(same[-1])
                continue
            result = child(run)
            with open(path, "a") as f:
                f.write(json.dumps(result) + "\n")
            rows.append(result)
            print(f"{name} seed {seed}: " + ", ".join(
                f"{k} {cell(result, k)}" for k in KEYS) +
                f", {result['train_s']:.0f} s", flush=True)  # fmt: skip
    print("\n| setting | seed | WER synth greedy / beam | WER real greedy / beam "
          "| CTC head synth / real | train s |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        pairs = [
            f"{cell(r, a)} / {cell(r, b)}"
            for a, b in zip(KEYS[::2], KEYS[1::2], strict=True)
        ]
        print(f"| {r['variant']}: {'; '.join(r['overrides']) or 'the demo'} | "
              f"{r['seed']} | {' | '.join(pairs)} | {r['train_s']:.0f} |")  # fmt: skip
    names = list(dict.fromkeys(r["variant"] for r in rows))
    print("\n| setting | seeds | mean WER synth beam | mean WER real beam |")
    print("| --- | --- | --- | --- |")
    for name in names:
        mine = [r for r in rows if r["variant"] == name]
        synth = statistics.mean(r["synthetic_beam"] for r in mine)
        real = statistics.mean(r["real_beam"] for r in mine)
        print(f"| {name} | {len(mine)} | {synth:.3f} | {real:.3f} |")


if __name__ == "__main__":
    app.run(main)
