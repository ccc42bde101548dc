# SPDX-License-Identifier: Apache-2.0
"""RNN-T against TDT on the demo's data: accuracy and the cost of decoding.

Each run trains the demo's LSTM transducer (examples/digits_transducer_demo.py:
lstm-1m with 4 frames per encoder step, the digits corpus with word
delimiters, waveform augmentation, learning rate 0.004) for --epochs epochs
with one seed, as an RNN-T (FusedRnntLoss) or as a Token-and-Duration
Transducer (the same model with a duration head, --durations;
FusedTdtLoss). Then, on the synthetic test voices and on the real
recordings, with one thread:

  * WER of greedy and of beam search (beam 4, standard), Keras;
  * the utterances greedy search gets wrong, and how many of those are
    search errors (the model gives the transcript a higher probability
    than the labels found: -log P by the loss) rather than model errors;
  * joint evaluations per utterance of greedy search (TDT: counted by the
    search; RNN-T: encoder frames + emitted symbols, the joiner's runs);
  * wall time per utterance, Keras (traced step functions): of the
    encoder, of greedy and of beam search alone (given the encoder's
    output), of the label-looping greedy search as one traced graph
    (`label_looping_greedy`, checked to give the same labels), and of the
    whole transcription (encoder, search, text) as `evaluate` runs it;
  * the float TFLite export streamed chunk by chunk: WER, real-time factor
    and (TDT) the joiner program's runs per utterance.

Each run trains in its own process (2 threads), and is evaluated in another
(1 thread). The table gives each run, then the mean and spread (min-max)
over the seeds of each loss.

Usage: python -m benchmarks.bench_tdt_demo [--epochs 72] [--seeds 0,1,2]
  [--work_dir runs/tdt_vs_rnnt] [--notrain] [--train_losses tdt]
  [--tdt_sigma 0.05 --tdt_omega 0.1] [--durations 0,1,2]
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

EPOCHS = flags.DEFINE_integer("epochs", 72, "Training epochs of every run.")
SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds of each loss's runs.")
SIGMA = flags.DEFINE_float(
    "tdt_sigma", 0.0, "The TDT runs' sigma (training.tdt_sigma)."
)
OMEGA = flags.DEFINE_float(
    "tdt_omega", 0.0, "The TDT runs' omega (training.tdt_omega)."
)
WORK_DIR = flags.DEFINE_string("work_dir", "runs/tdt_vs_rnnt", "The runs' folders.")
TRAIN = flags.DEFINE_bool(
    "train", True, "Train the runs (--notrain: evaluate the runs in --work_dir again)."
)
TRAIN_LOSSES = flags.DEFINE_list(
    "train_losses", ["rnnt", "tdt"],
    "With --train, the losses whose runs train; the others' runs must be in "
    "--work_dir already and are evaluated again.",
)  # fmt: skip
DURATIONS_FLAG = flags.DEFINE_list(
    "durations", ["0", "1", "2", "3", "4"], "The TDT runs' durations."
)
WORKER = flags.DEFINE_string("worker", None, "Internal: 'train|eval,loss,seed'.")

NAN = float("nan")  # a column a run's results lack (measured by a later version)
LOSSES = {"rnnt": "fused", "tdt": "fused_tdt"}
BEAM = 4
SETS = {"synthetic": "digits_test", "real": "digits_real"}


def run_config(loss, seed):
    """The demo's LSTM RunConfig, as an RNN-T or a TDT."""
    from tf_transducer.training.digits_recipe import digits_config

    config = digits_config("lstm", EPOCHS.value, LOSSES[loss], seed=seed)
    overrides = [
        f"training.tdt_sigma={SIGMA.value}",
        f"training.tdt_omega={OMEGA.value}",
    ]
    if loss == "tdt":
        overrides.append(f"model.joiner.durations={json.dumps(durations())}")
    return config.with_overrides(overrides)


def durations():
    return [int(d) for d in DURATIONS_FLAG.value]


def run_dir(loss, seed):
    return os.path.join(WORK_DIR.value, f"{loss}-{seed}")


def train(loss, seed):
    import tensorflow as tf

    from tf_transducer.training import transducer_recipe as recipe

    tf.config.threading.set_intra_op_parallelism_threads(2)
    start = time.time()
    recipe.train(run_config(loss, seed), run_dir(loss, seed), verbose=2,
                 overwrite=True)  # fmt: skip
    return {"train_s": time.time() - start}


def graph_greedy(model, loss):
    """Label-looping greedy search as one traced graph (unknown batch, time)."""
    import tensorflow as tf

    from tf_transducer.decoding import keras_graph_steps
    from tf_transducer.decoding import label_looping_greedy

    steps, units = keras_graph_steps(model), model.joiner.units
    heads = getattr(model.joiner, "durations", None)
    return tf.function(
        lambda e, n: label_looping_greedy(e, n, steps, heads),
        input_signature=[tf.TensorSpec([None, None, units]),
                         tf.TensorSpec([None], tf.int32)],
    )  # fmt: skip


def search_costs(model, batch, loss, graph):
    """Per utterance of a batch of one: seconds to encode, seconds of greedy
    and of beam search alone (the encoder's output given), the joint
    evaluations of greedy search, and seconds of the graph greedy search."""
    from tf_transducer.decoding import beam_search
    from tf_transducer.decoding import greedy_search
    from tf_transducer.decoding import tdt_beam_search
    from tf_transducer.decoding import tdt_greedy_search
    from tf_transducer.decoding.keras_steps import KerasSteps
    from tf_transducer.decoding.keras_steps import encode_projected

    began = time.perf_counter()
    projected, lengths = encode_projected(
        model, (batch["features"], batch["feature_length"])
    )
    encoded = time.perf_counter()
    steps = KerasSteps(model)
    heads = getattr(model.joiner, "durations", None)
    if loss == "tdt":
        hyps, _, counts = tdt_greedy_search(projected, lengths, steps, heads)
        greedy = time.perf_counter()
        tdt_beam_search(projected[0, : lengths[0]], steps, heads, BEAM)
    else:
        hyps, _ = greedy_search(projected, lengths, steps)
        counts = [int(lengths[0]) + len(hyps[0])]  # the joiner's runs
        greedy = time.perf_counter()
        beam_search(projected[0, : lengths[0]], steps, BEAM)
    done = time.perf_counter()
    graph_hyps = graph(projected, lengths.astype("int32"))
    graph_done = time.perf_counter()
    if (
        graph_hyps.labels[0, : int(graph_hyps.label_length[0])].numpy().tolist()
        != hyps[0]
    ):
        raise AssertionError("the graph greedy search differs from the numpy one")
    return (encoded - began, greedy - encoded, done - greedy, int(counts[0]),
            graph_done - done)  # fmt: skip


def path_cost(model, batch, labels):
    """-log P(labels | utterance) under the model (its loss, sigma = 0)."""
    import tensorflow as tf

    from tf_transducer.ops import rnnt_loss
    from tf_transducer.ops import tdt_loss

    encoded, frames = model.encode(
        (batch["features"], batch["feature_length"]), training=False
    )
    symbols = tf.constant([labels or [0]], tf.int32)
    decoded = model.predictor(tf.concat([[[0]], symbols], 1), training=False)
    encoder = model.joiner.project_encoder(encoded)[:, :, None]
    decoder = model.joiner.project_decoder(decoded)[:, None]
    options = dict(reduction="none", logit_lengths=frames, label_lengths=[len(labels)])
    durations = getattr(model.joiner, "durations", None)
    if durations is None:
        logits = model.joiner.joint(encoder, decoder)
        return float(rnnt_loss(logits, symbols, 0, **options)[0])
    tokens, durs = model.joiner.joint_heads(encoder, decoder)
    return float(tdt_loss(tokens, durs, symbols, 0, durations, **options)[0])


def search_errors(model, data):
    """(greedy errors, of which search errors): an utterance whose greedy
    labels differ from its transcript's is a search error if the model
    gives the transcript the higher probability."""
    from tf_transducer.decoding import transducer_greedy_decode

    errors = found = 0
    for batch in data.dataset(1, shuffle=False):
        hyp = transducer_greedy_decode(
            model, (batch["features"], batch["feature_length"])
        )[0]
        ref = [int(x) for x in batch["labels"][0].numpy() if x > 0]
        if hyp != ref:
            errors += 1
            found += path_cost(model, batch, ref) < path_cost(model, batch, hyp)
    return errors, found


def evaluate(loss, seed):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from tf_transducer.data.corpora import manifest
    from tf_transducer.export import TransducerStream
    from tf_transducer.export import export_transducer
    from tf_transducer.training import transducer_recipe as recipe
    from tf_transducer.training.digits_recipe import N_MELS
    from tf_transducer.training.digits_recipe import SAMPLE_RATE

    model, text_encoder = recipe.load_checkpoint(run_dir(loss, seed))
    report = {}
    export_dir = os.path.join(run_dir(loss, seed), "tflite")
    for name, key in SETS.items():
        data, features = recipe.speech_data(
            [manifest(key)], text_encoder, SAMPLE_RATE, N_MELS, 30.0
        )
        count = len(data.transcripts)
        row = {}
        beam = dict(beam_width=BEAM, beam_method="standard")
        for label, options in (("greedy", {}), ("beam", beam)):
            began = time.perf_counter()
            wer, _, _ = recipe.evaluate(model, text_encoder, data, batch_size=1,
                                        **options)  # fmt: skip
            row[f"{label}_wer"] = wer
            row[f"{label}_ms"] = (time.perf_counter() - began) * 1e3 / count
        graph = graph_greedy(model, loss)
        first = next(iter(data.dataset(1, shuffle=False)))
        search_costs(model, first, loss, graph)  # tracing
        costs = [search_costs(model, batch, loss, graph)
                 for batch in data.dataset(1, shuffle=False)]  # fmt: skip
        for i, key in enumerate(("encode_ms", "greedy_search_ms", "beam_search_ms")):
            row[key] = sum(c[i] for c in costs) * 1e3 / count
        row["joint_evals"] = sum(c[3] for c in costs) / count
        row["wrong"], row["search_errors"] = search_errors(model, data)
        row["graph_greedy_ms"] = sum(c[4] for c in costs) * 1e3 / count
        if not os.path.isdir(export_dir):
            export_transducer(model, export_dir, text_encoder, features)
        streamed = recipe.evaluate_export(export_dir, data.paths, data.transcripts)
        row["tflite_wer"], row["tflite_rtf"] = streamed["wer"], streamed["rtf"]
        if loss == "tdt":
            from tf_transducer.data import load_audio

            stream, runs = TransducerStream(export_dir, num_threads=1), 0
            for path in data.paths:
                stream.transcribe(load_audio(path, stream.sample_rate))
                runs += stream.joint_evaluations
            row["tflite_joint_evals"] = runs / count
        report[name] = row
    return report


def child(mode, loss, seed):
    command = [*_harness.self_command(__spec__), f"--worker={mode},{loss},{seed}",
               f"--epochs={EPOCHS.value}", f"--work_dir={WORK_DIR.value}",
               f"--tdt_sigma={SIGMA.value}", f"--tdt_omega={OMEGA.value}",
               f"--durations={','.join(DURATIONS_FLAG.value)}"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=_harness.ROOT)
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise RuntimeError(f"{mode} of {loss} seed {seed} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


COLUMNS = (
    ("greedy_wer", "greedy WER", "{:.3f}"),
    ("beam_wer", "beam 4 WER", "{:.3f}"),
    ("wrong", "greedy: wrong utts", "{:.0f}"),
    ("search_errors", "of them search errors", "{:.0f}"),
    ("joint_evals", "joint evals / utt", "{:.1f}"),
    ("encode_ms", "encoder ms / utt", "{:.1f}"),
    ("greedy_search_ms", "greedy search ms / utt", "{:.1f}"),
    ("beam_search_ms", "beam search ms / utt", "{:.1f}"),
    ("graph_greedy_ms", "graph greedy ms / utt", "{:.1f}"),
    ("greedy_ms", "greedy ms / utt, all", "{:.1f}"),
    ("beam_ms", "beam ms / utt, all", "{:.1f}"),
    ("tflite_wer", "TFLite WER", "{:.3f}"),
    ("tflite_rtf", "TFLite RTF", "{:.4f}"),
)


def main(argv):
    del argv
    if WORKER.value:
        mode, loss, seed = WORKER.value.split(",")
        result = (train if mode == "train" else evaluate)(loss, int(seed))
        print(json.dumps(result))
        return
    runs = {}
    for loss in LOSSES:
        for seed in SEEDS.value:
            retrain = TRAIN.value and loss in TRAIN_LOSSES.value
            trained = child("train", loss, seed) if retrain else {}
            runs[loss, seed] = dict(child("eval", loss, seed), **trained)
            print(f"{loss} seed {seed}: {json.dumps(runs[loss, seed])}", flush=True)
    print(f"\n{EPOCHS.value} epochs; seeds {', '.join(SEEDS.value)}; 1 thread.\n")
    header = " | ".join(title for _, title, _ in COLUMNS)
    print(f"| set | run | {header} |")
    print("|" + " --- |" * (len(COLUMNS) + 2))
    for name in SETS:
        for loss in LOSSES:
            rows = [runs[loss, seed][name] for seed in SEEDS.value]
            for seed, row in zip(SEEDS.value, rows, strict=True):
                cells = " | ".join(
                    fmt.format(row.get(key, NAN)) for key, _, fmt in COLUMNS
                )
                print(f"| {name} | {loss} seed {seed} | {cells} |")
            cells = " | ".join(
                fmt.format(statistics.mean(r.get(key, NAN) for r in rows))
                + " ("
                + fmt.format(min(r.get(key, NAN) for r in rows))
                + "-"
                + fmt.format(max(r.get(key, NAN) for r in rows))
                + ")"
                for key, _, fmt in COLUMNS
            )
            print(f"| {name} | **{loss} mean (min-max)** | {cells} |")
    for name in SETS:
        ratio = {
            key: statistics.mean(
                runs["tdt", s][name].get(key, NAN) for s in SEEDS.value
            )
            / statistics.mean(runs["rnnt", s][name].get(key, NAN) for s in SEEDS.value)
            for key in (
                "joint_evals",
                "greedy_search_ms",
                "beam_search_ms",
                "greedy_ms",
                "beam_ms",
                "tflite_rtf",
            )  # fmt: skip
        }
        print(f"\n{name}: TDT / RNN-T " + ", ".join(
            f"{key} {value:.2f}x" for key, value in ratio.items()))  # fmt: skip


if __name__ == "__main__":
    app.run(main)
