# SPDX-License-Identifier: Apache-2.0
r"""Transducers from the command line: train, evaluate, export, transcribe, manifest.

  T="python -m tf_transducer.cli.transducer"
  $T train --train_files a.csv --dev_files b.csv --checkpoint_dir runs/t
  $T evaluate --test_files c.csv --checkpoint_dir runs/t
  $T export --checkpoint_dir runs/t --export_dir runs/t/tflite \
     [--quantization dynamic | int8]
  $T transcribe --export_dir runs/t/tflite --wav x.wav
  $T manifest --corpus LibriSpeech/dev-clean --output dev.jsonl

Flags and conventions follow the DeepSpeech command line (manifests,
--checkpoint_dir, --export_dir, --audio_sample_rate, --beam_width, exit code
1 with a message naming the file or flag on bad input). The recipe is
`tf_transducer.training.transducer_recipe`; this maps flags to its keywords.
On several machines: `--distribution multi_worker` (or TF_CONFIG naming
several workers), or `python -m tf_transducer.cli.launch --workers 2 -- ...`
on one.
"""

import os
import sys

from absl import app, flags, logging

from tf_transducer.cli import define, define_distribution, flag_group
from tf_transducer.cli import run as run_app
from tf_transducer.cli._common import (
    CliError,
    manifest_paths,
    read_audio_flag,
    word_scorer,
)
from tf_transducer.training import transducer_recipe as recipe

FLAGS = flags.FLAGS
COMMANDS = ("train", "evaluate", "export", "transcribe", "manifest")

flag_group("data")
CORPORA = (
    " or corpora (a LibriSpeech folder, a Common Voice .tsv, the .txt "
    "transcripts of a folder of audio files)."
)
define("string", "train_files", "", "Comma-separated training manifests" + CORPORA)
define("string", "dev_files", "", "Comma-separated validation manifests" + CORPORA)
define("string", "test_files", "", "Comma-separated test manifests" + CORPORA)
define(
    "string",
    "corpus",
    "",
    "manifest: the corpus to list (a LibriSpeech folder, a Common Voice .tsv, "
    "the .txt transcripts of a folder of audio files).",
)
define("string", "output", "", "manifest: the JSON-lines manifest to write.")
define("string", "checkpoint_dir", "", "Model, text encoder, backups, history.")
define("string", "export_dir", "", "Streaming TFLite programs.")
define("string", "wav", "", "transcribe: the audio file (any rate: resampled).")
define(
    "integer",
    "audio_sample_rate",
    16000,
    "train: sample rate of the model's audio (saved with it; later commands "
    "read it from the checkpoint).",
)
define("integer", "n_mels", 80, "train: log-mel bands (saved with the model).")
define("float", "max_duration", 30.0, "Longest utterance, seconds.")
define("enum", "text_encoder", "chars", ["chars", "words", "subwords"], "Units.")
define("integer", "vocab_size", 256, "SentencePiece vocabulary (subwords).")
define(
    "bool",
    "word_delimiter",
    False,
    "train, words / subwords: a class between words (the model must mark each "
    "word boundary, which lets whole-word models hear repeated words).",
)
define("bool", "skip_bad", False, "Drop (and count) unusable items instead of failing.")
flag_group("training")
define("integer", "train_batch_size", 16, "Training batch size.", lower_bound=1)
define("integer", "epochs", 50, "Training epochs.", lower_bound=1)
define("float", "learning_rate", 0.004, "Peak Adam learning rate (cosine decay).")
define(
    "integer",
    "lr_warmup_epochs",
    0,
    "Epochs of a linear learning-rate rise before the decay (a Conformer wants a few).",
    lower_bound=0,
)
define(
    "enum",
    "loss",
    "full",
    list(recipe.LOSSES),
    "RnntLoss (full), FusedRnntLoss (fused: the full loss without storing the "
    "joiner's logits, for large vocabularies) or PrunedRnntLoss (pruned).",
)
define(
    "string",
    "transducer_augment",
    "default",
    "SpecAugment: default, none, LB, LD, SM, SS.",
)
define(
    "enum",
    "wave_augment",
    "default",
    ["default", "none"],
    "Waveform augmentation of the training audio (speed, pitch, tempo, "
    "reverberation, telephone band, noise, babble, gain, DC): default or none.",
)
define(
    "integer",
    "warmup_epochs",
    recipe.WARMUP_EPOCHS,
    "First epochs trained on clean audio and features (no augmentation).",
    lower_bound=0,
)
define("integer", "random_seed", 0, "Seed of weights, shuffling, augmentation.")
define_distribution()
define(
    "bool",
    "overwrite",
    False,
    "train: replace a run in --checkpoint_dir made with another configuration "
    "(the same configuration resumes it).",
)
flag_group("model")
define("integer", "encoder_units", recipe.ENCODER_UNITS, "Encoder LSTM width.")
define("integer", "encoder_layers", recipe.ENCODER_LAYERS, "Encoder LSTMs.")
define("integer", "stack", recipe.STACK, "Frames stacked per encoder step.")
define(
    "enum",
    "encoder",
    "lstm",
    list(recipe.ENCODERS),
    "lstm: --encoder_units/--encoder_layers/--stack; conformer: a streaming "
    "Conformer (the --conformer_* flags, --subsampling, --chunk_size, "
    "--left_context, --chunk_sizes).",
)
C = recipe.CONFORMER
define("integer", "conformer_dim", C["conformer_dim"], "Conformer width.")
define("integer", "conformer_layers", C["conformer_layers"], "Conformer blocks.")
define("integer", "conformer_heads", C["conformer_heads"], "Attention heads.")
define(
    "integer", "conformer_kernel", C["conformer_kernel"], "Causal convolution kernel."
)
define(
    "enum",
    "subsampling",
    str(C["subsampling"]),
    ["2", "4", "8"],
    "Conformer: feature frames per encoder frame.",
)
define(
    "integer",
    "chunk_size",
    C["chunk_size"],
    "Conformer: encoder frames per attention chunk (the latency: chunk_size * "
    "subsampling feature frames).",
)
define(
    "integer",
    "left_context",
    C["left_context"],
    "Conformer: encoder frames before its chunk that a frame sees.",
)
define(
    "list",
    "chunk_sizes",
    None,
    "Conformer: chunk sizes drawn from in training (one model, several latencies).",
)
CONFORMER_FLAGS = (
    "conformer_dim", "conformer_layers", "conformer_heads", "conformer_kernel",
    "subsampling", "chunk_size", "left_context", "chunk_sizes",
)  # fmt: skip
define(
    "enum", "predictor", recipe.PREDICTOR, ["lstm", "stateless"], "Prediction network."
)
flag_group("decoding")
define("integer", "beam_width", 1, "1: greedy; else beam search (--beam_method).")
define(
    "enum",
    "beam_method",
    "modified",
    ["modified", "standard"],
    "Beam search: one symbol per frame at most (modified) or several (standard).",
)
define(
    "string", "lm_binary_path", "", "KenLM model (or ARPA file) for the beam search."
)
define("float", "lm_alpha", 0.75, "Language model weight.")
define("float", "lm_beta", 1.85, "Word insertion bonus.")
flag_group("export")
define(
    "enum",
    "quantization",
    "float",
    ["float", "dynamic", "int8"],
    "export: float programs, int8 weights (dynamic) or full integer (int8, "
    "calibrated on training audio); transcribe uses what the export holds.",
)
define(
    "integer",
    "calibration_utterances",
    200,
    "export --quantization int8: training utterances (from --train_files, or "
    "the run's own) to calibrate on.",
    lower_bound=1,
)


def saved_features(checkpoint_dir):
    """The feature settings a checkpoint was trained with (from run.json).

    They are checked against --audio_sample_rate / --n_mels when those are
    given.
    """
    from tf_transducer.training.run_dir import RUN_FILE

    features = recipe.saved_features(checkpoint_dir)
    path = os.path.join(checkpoint_dir, RUN_FILE)
    check_flag_against("audio_sample_rate", features["sample_rate"], path)
    check_flag_against("n_mels", features["n_mels"], path)
    return features


def training_manifests():
    """--train_files, or the manifests the run in --checkpoint_dir trained on."""
    if FLAGS.train_files:
        return manifest_paths(FLAGS.train_files, "train_files")
    try:
        files = recipe.saved_train_files(FLAGS.checkpoint_dir)
    except ValueError as error:
        raise CliError(
            f"--quantization int8 calibrates on training audio: {error}; or give "
            "--train_files"
        ) from None
    missing = [p for p in files if not os.path.exists(p)]
    if missing or not files:
        raise CliError(
            f"--quantization int8 calibrates on training audio: the run's "
            f"manifests ({missing or files}) do not exist; give --train_files"
        )
    return files


def check_flag_against(flag, saved, source):
    """A flag given on the command line must agree with the saved value."""
    if FLAGS[flag].present and FLAGS[flag].value != saved:
        raise CliError(
            f"--{flag}={FLAGS[flag].value} contradicts {source}, which says "
            f"{saved}: leave the flag out (the saved value is used)"
        )


def conformer_sizes():
    """The --conformer_* etc. flags given, as `recipe.train`'s conformer dict."""
    given = [name for name in CONFORMER_FLAGS if FLAGS[name].present]
    if FLAGS.encoder != "conformer":
        if given:
            raise CliError(f"--{given[0]} is for --encoder conformer")
        return None
    sizes = {name: FLAGS[name].value for name in CONFORMER_FLAGS}
    sizes["subsampling"] = int(sizes["subsampling"])
    for name in CONFORMER_FLAGS[:4] + ("chunk_size",):
        if sizes[name] < 1:
            raise CliError(f"--{name} must be >= 1, got {sizes[name]}")
    if sizes["left_context"] < 0:
        raise CliError(f"--left_context must be >= 0, got {sizes['left_context']}")
    if sizes["chunk_sizes"] is not None:
        try:
            sizes["chunk_sizes"] = [int(v) for v in sizes["chunk_sizes"]]
        except ValueError:
            raise CliError(
                f"--chunk_sizes must be positive ints, got {sizes['chunk_sizes']}"
            ) from None
        if not sizes["chunk_sizes"] or min(sizes["chunk_sizes"]) < 1:
            raise CliError(
                f"--chunk_sizes must be positive ints, got {sizes['chunk_sizes']}"
            )
    if sizes["conformer_dim"] % sizes["conformer_heads"]:
        raise CliError(
            f"--conformer_dim ({sizes['conformer_dim']}) must be a multiple of "
            f"--conformer_heads ({sizes['conformer_heads']})"
        )
    return sizes


def write_corpus_manifest(corpus, output):
    """`manifest`: writes the utterances of --corpus to --output (JSON lines)."""
    from tf_transducer.data import corpus_utterances, write_manifest

    if not corpus:
        raise CliError("--corpus is needed to write a manifest")
    if not output:
        raise CliError("--output is needed to write a manifest")
    if os.path.splitext(output)[1].lower() not in (".jsonl", ".json"):
        raise CliError(
            f"--output: {output!r} must end in .jsonl (a JSON-lines manifest)"
        )
    try:
        utterances = corpus_utterances(corpus)
    except (ValueError, FileNotFoundError) as error:
        raise CliError(f"--corpus: {error}") from None
    try:
        count = write_manifest(utterances, output)
    except (ValueError, OSError) as error:
        raise CliError(f"--output: {error}") from None
    hours = sum(u.duration or 0.0 for u in utterances) / 3600
    print(f"wrote {output}: {count} utterances, {hours:.2f} hours")


def main(argv):
    """Runs the one command given (train, evaluate, export, transcribe, manifest).

    Bad input ends with a message and exit code 1.
    """
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"give one command: {' | '.join(COMMANDS)}")
    command = argv[1]
    try:
        if command == "train":
            if not FLAGS.checkpoint_dir:
                raise CliError("--checkpoint_dir is needed to train")
            recipe.train(
                manifest_paths(
                    FLAGS.train_files, "train_files", required=True, corpora=True
                ),
                FLAGS.checkpoint_dir,
                dev_files=manifest_paths(FLAGS.dev_files, "dev_files", corpora=True),
                text_encoder=FLAGS.text_encoder,
                vocab_size=FLAGS.vocab_size,
                word_delimiter=FLAGS.word_delimiter,
                sample_rate=FLAGS.audio_sample_rate,
                n_mels=FLAGS.n_mels,
                max_duration=FLAGS.max_duration,
                epochs=FLAGS.epochs,
                batch_size=FLAGS.train_batch_size,
                learning_rate=FLAGS.learning_rate,
                loss=FLAGS.loss,
                encoder_units=FLAGS.encoder_units,
                encoder_layers=FLAGS.encoder_layers,
                stack=FLAGS.stack,
                predictor=FLAGS.predictor,
                encoder=FLAGS.encoder,
                conformer=conformer_sizes(),
                lr_warmup_epochs=FLAGS.lr_warmup_epochs,
                augment=FLAGS.transducer_augment,
                wave_augment=FLAGS.wave_augment,
                warmup_epochs=FLAGS.warmup_epochs,
                seed=FLAGS.random_seed,
                skip_bad=FLAGS.skip_bad,
                distribution=FLAGS.distribution,
                overwrite=FLAGS.overwrite,
                verbose="auto",  # a progress bar on a terminal, else epoch lines
            )
        elif command == "evaluate":
            model, encoder = recipe.load_checkpoint(FLAGS.checkpoint_dir)
            features = saved_features(FLAGS.checkpoint_dir)
            data, _ = recipe.speech_data(
                manifest_paths(
                    FLAGS.test_files, "test_files", required=True, corpora=True
                ),
                encoder,
                features["sample_rate"],
                features["n_mels"],
                FLAGS.max_duration,
                FLAGS.skip_bad,
            )
            wer, cer, pairs = recipe.evaluate(
                model,
                encoder,
                data,
                FLAGS.beam_width,
                scorer=word_scorer(FLAGS.lm_binary_path, encoder),
                alpha=FLAGS.lm_alpha,
                beta=FLAGS.lm_beta,
                beam_method=FLAGS.beam_method,
            )
            print(f"{len(pairs)} utterances: WER {wer:.3f}, CER {cer:.3f}")
            for ref, hyp in pairs[:5]:
                print(f" - ref: {ref!r}\n   hyp: {hyp!r}")
        elif command == "export":
            import tf_transducer as tt
            from tf_transducer.export import export_transducer

            if not FLAGS.export_dir:
                raise CliError("--export_dir is needed to export")
            model, encoder = recipe.load_checkpoint(FLAGS.checkpoint_dir)
            features = tt.LogMelSpectrogram(**saved_features(FLAGS.checkpoint_dir))
            calibration = None
            if FLAGS.quantization == "int8":
                calibration = tt.data.calibration_audio(
                    training_manifests(),
                    features.sample_rate,
                    FLAGS.calibration_utterances,
                )
            sizes = export_transducer(
                model,
                FLAGS.export_dir,
                encoder,
                features,
                quantization=FLAGS.quantization,
                calibration_audio=calibration,
            )
            for name, size in sizes.items():
                print(
                    f"exported {os.path.join(FLAGS.export_dir, name)} "
                    f"({size / 1e6:.2f} MB)"
                )
        elif command == "manifest":
            write_corpus_manifest(FLAGS.corpus, FLAGS.output)
        else:
            from tf_transducer.export import TransducerStream

            if not FLAGS.wav:
                raise CliError("--wav is needed to transcribe")
            stream = TransducerStream(FLAGS.export_dir)
            check_flag_against(
                "audio_sample_rate",
                stream.sample_rate,
                os.path.join(FLAGS.export_dir, "export.json"),
            )
            print(
                stream.transcribe(read_audio_flag(FLAGS.wav, stream.sample_rate, "wav"))
            )
    except (CliError, ValueError, FileNotFoundError) as error:
        logging.error("%s", error)
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


def run():
    """The `tf-transducer` console script."""
    run_app(main)


if __name__ == "__main__":
    run()
