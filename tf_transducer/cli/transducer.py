# SPDX-License-Identifier: Apache-2.0
r"""Transducers from the command line: train, evaluate, export, transcribe, manifest.

  T="python -m tf_transducer.cli.transducer"
  $T train --train_files a.csv --dev_files b.csv --checkpoint_dir runs/t
  $T evaluate --test_files c.csv --checkpoint_dir runs/t
  $T export --checkpoint_dir runs/t --export_dir runs/t/tflite \
     [--quantization dynamic | int8]
  $T export --checkpoint_dir runs/t --export_dir runs/t/one --single_program \
     [--hotwords names.txt]
  $T transcribe --export_dir runs/t/tflite --wav x.wav,y.flac \
     [--timestamps] [--confidence] [--hotwords names.txt] [--output out.jsonl]
  $T evaluate|transcribe ... --decoder ctc   (a model trained with --ctc_weight)
  $T manifest --corpus LibriSpeech/dev-clean --output dev.jsonl

Flags and conventions follow the DeepSpeech command line (manifests,
--checkpoint_dir, --export_dir, --audio_sample_rate, --beam_width, exit code
1 with a message naming the file or flag on bad input). The recipe is
`tf_transducer.training.transducer_recipe`; `train` builds its `RunConfig`
from the flags (each setting's flag is made from its field), a `--config`
file (a run.json) and `--set section.setting=value` overrides.
On several machines: `--distribution multi_worker` (or TF_CONFIG naming
several workers), or `python -m tf_transducer.cli.launch --workers 2 -- ...`
on one.
"""

import os
import re

from absl import app
from absl import flags

from tf_transducer.cli import define
from tf_transducer.cli import define_distribution
from tf_transducer.cli import flag_group
from tf_transducer.cli import run as run_app
from tf_transducer.cli._common import CliError
from tf_transducer.cli._common import manifest_paths
from tf_transducer.cli._common import read_audio_flag
from tf_transducer.cli._common import word_scorer
from tf_transducer.cli.config_flags import config_from_flags
from tf_transducer.cli.config_flags import define_config_flags
from tf_transducer.models.presets import PARTS
from tf_transducer.models.presets import PRESETS
from tf_transducer.training import transducer_recipe as recipe
from tf_transducer.training.config import RunConfig
from tf_transducer.training.distributed import strategy_from_environment

FLAGS = flags.FLAGS
COMMANDS = ("train", "evaluate", "export", "transcribe", "manifest")

define_config_flags(
    RunConfig,
    {
        "features": "data",
        "data": "data",
        "model": "model",
        "augment": "training",
        "optimizer": "training",
        "training": "training",
    },
)
flag_group("data")
define("string", "test_files", "", "Comma-separated test manifests or corpora.")
define(
    "string",
    "corpus",
    "",
    "manifest: the corpus to list (a LibriSpeech folder, a Common Voice .tsv, "
    "the .txt transcripts of a folder of audio files).",
)
define(
    "string",
    "output",
    "",
    "manifest: the JSON-lines manifest to write; transcribe: the JSON lines "
    "(one per file: text, words with start, end, confidence) to write.",
)
define("string", "checkpoint_dir", "", "Model, text encoder, backups, history.")
define("string", "export_dir", "", "Streaming TFLite programs.")
define(
    "string",
    "wav",
    "",
    "transcribe: the audio files, comma-separated (any rate: resampled).",
)
define("bool", "timestamps", False, "transcribe: words with start and end times.")
define("bool", "confidence", False, "transcribe: words with their confidence.")
define(
    "string",
    "hotwords",
    "",
    "Phrases to boost, one per line (optionally ' :SCORE'): transcribe with a "
    "four-program export; export --single_program compiles them in.",
)
define("float", "hotword_score", 1.5, "The hotwords' boost per label.")
flag_group("training")
define_distribution()
define(
    "bool",
    "overwrite",
    False,
    "train: replace a run in --checkpoint_dir made with another configuration "
    "(the same configuration resumes it).",
)
flag_group("model")
# Shorthands of model settings (0.1's flags): each sets one argument of a
# part of the --model preset, as --set model.<part>.<argument>=<value> does.
# flag -> (part, argument, the encoder class it is for (None: any), kind,
# the values of an enum, help). tests/cli checks the arguments exist.
MODEL_FLAGS = {
    "encoder_units": ("encoder", "units", "TransducerEncoder", "integer", None,
                      "Encoder LSTM width (lstm-1m: 256)."),
    "encoder_layers": ("encoder", "num_layers", "TransducerEncoder", "integer", None,
                       "Encoder LSTMs (lstm-1m: 2)."),
    "stack": ("encoder", "stack", "TransducerEncoder", "integer", None,
              "Frames stacked per encoder step (lstm-1m: 3)."),
    "conformer_dim": ("encoder", "d_model", "ConformerEncoder", "integer", None,
                      "Conformer width."),
    "conformer_layers": ("encoder", "num_layers", "ConformerEncoder", "integer", None,
                         "Conformer blocks."),
    "conformer_heads": ("encoder", "num_heads", "ConformerEncoder", "integer", None,
                        "Attention heads."),
    "conformer_kernel": ("encoder", "conv_kernel", "ConformerEncoder", "integer",
                         None, "Causal convolution kernel."),
    "subsampling": ("encoder", "subsampling", "ConformerEncoder", "enum",
                    ["2", "4", "8"], "Conformer: feature frames per encoder frame."),
    "chunk_size": ("encoder", "chunk_size", "ConformerEncoder", "integer", None,
                   "Conformer: encoder frames per attention chunk (the latency: "
                   "chunk_size * subsampling feature frames)."),
    "left_context": ("encoder", "left_context", "ConformerEncoder", "integer", None,
                     "Conformer: encoder frames before its chunk that a frame sees."),
    "chunk_sizes": ("encoder", "chunk_sizes", "ConformerEncoder", "list", None,
                    "Conformer: chunk sizes drawn from in training (one model, "
                    "several latencies)."),
    "predictor": ("predictor", "kind", None, "enum", ["lstm", "stateless"],
                  "Prediction network."),
    "durations": ("joiner", "durations", None, "list", None,
                  "A Token-and-Duration Transducer: the joiner's duration head "
                  "(frame counts, e.g. 0,1,2,3,4; train with --loss tdt or "
                  "fused_tdt)."),
}  # fmt: skip
for _name, (_part, _arg, _cls, _kind, _values, _help) in MODEL_FLAGS.items():
    define(_kind, _name, None, *([_values] if _values else []), _help)
# --encoder: 0.1's choice of encoder, the recipe's prediction network kept.
ENCODER_MODELS = {
    "lstm": dict(preset="lstm-1m"),
    "conformer": dict(
        preset="conformer-2m",
        predictor=PRESETS["lstm-1m"]["predictor"],
        joiner=PRESETS["lstm-1m"]["joiner"],
    ),
}
define(
    "enum",
    "encoder",
    None,
    list(ENCODER_MODELS),
    "lstm: the lstm-1m model; conformer: conformer-2m's encoder with lstm-1m's "
    "prediction network and joiner (the recipe's Conformer). Or --model.",
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
define(
    "string",
    "token_lm",
    "",
    "ARPA n-gram over label ids, fused by the modified beam search (evaluate).",
)
define("float", "token_lm_scale", 0.3, "The --token_lm's weight.")
define(
    "enum",
    "decoder",
    "transducer",
    ["transducer", "ctc"],
    "evaluate / transcribe: the transducer search, or the CTC head of a model "
    "trained with --ctc_weight (best path; prefix beam search with --beam_width "
    "and --lm_binary_path).",
)
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
    "bool",
    "single_program",
    False,
    "export: one TFLite program with the greedy search inside "
    "(export_recognizer), instead of four programs and a search in Python.",
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


def model_settings():
    """{"model.<part>": overrides} of the model shorthand flags given.

    --encoder picks the preset (and the recipe's prediction network for
    "conformer"); each size flag must suit the encoder it is for.
    """
    if FLAGS["encoder"].present and FLAGS["model"].present:
        raise CliError("give --model or --encoder, not both")
    model = dict(ENCODER_MODELS[FLAGS.encoder]) if FLAGS["encoder"].present else {}
    preset = model.get("preset") or FLAGS.model
    encoder_class = PRESETS.get(preset, {}).get("encoder", {}).get("class_name")
    parts = {part: dict(model.get(part) or {}) for part in PARTS}
    for name, (part, argument, cls, kind, _, _) in MODEL_FLAGS.items():
        if not FLAGS[name].present:
            continue
        if cls is not None and cls != encoder_class:
            which = "conformer" if cls == "ConformerEncoder" else "lstm"
            raise CliError(f"--{name} is for --encoder {which} (a {cls})")
        value = FLAGS[name].value
        if kind == "enum" and name == "subsampling":
            value = int(value)
        elif kind == "list":
            try:
                value = [int(v) for v in value]
            except ValueError:
                raise CliError(
                    f"--{name} must be a list of ints, got {value}"
                ) from None
        parts[part][argument] = value
    given = {f"model.{part}": values for part, values in parts.items() if values}
    if "preset" in model:
        given["model.preset"] = model["preset"]
    return given


def naming_model_flags(message):
    """A model error with the shorthand flags that set its values named.

    "model.encoder (ConformerEncoder): num_heads must divide d_model, ..."
    given --conformer_heads gains "(set by --conformer_heads)".
    """
    named = [
        f"--{name}"
        for name, (part, argument, *_) in MODEL_FLAGS.items()
        if FLAGS[name].present
        and message.startswith(f"model.{part}")
        and re.search(rf"\b{argument}\b", message)
    ]
    return f"{message} (set by {', '.join(named)})" if named else message


def run_config():
    """The RunConfig of the command line (--config, the flags, --set)."""
    config = config_from_flags(RunConfig, model_settings())
    if not config.data.train_files:
        raise CliError(
            "--train_files is needed (or a --config naming data.train_files)"
        )
    manifest_paths(",".join(config.data.train_files), "train_files", corpora=True)
    manifest_paths(",".join(config.data.dev_files), "dev_files", corpora=True)
    return config


def write_corpus_manifest(corpus, output):
    """`manifest`: writes the utterances of --corpus to --output (JSON lines)."""
    from tf_transducer.data import corpus_utterances
    from tf_transducer.data import write_manifest

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
    if command == "train":
        if not FLAGS.checkpoint_dir:
            raise CliError("--checkpoint_dir is needed to train")
        config = run_config()
        try:
            recipe.train(
                config,
                FLAGS.checkpoint_dir,
                strategy=strategy_from_environment(FLAGS.distribution),
                overwrite=FLAGS.overwrite,
                verbose="auto",  # a progress bar on a terminal, else epoch lines
            )
        except ValueError as error:
            raise CliError(naming_model_flags(str(error))) from None
    elif command == "evaluate":
        model, encoder = recipe.load_checkpoint(FLAGS.checkpoint_dir)
        features = saved_features(FLAGS.checkpoint_dir)
        data, _ = recipe.speech_data(
            manifest_paths(FLAGS.test_files, "test_files", required=True, corpora=True),
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
            decoder=decoder_flag(model),
            **token_lm_flag(model),
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
        if FLAGS.single_program:
            from tf_transducer.export import export_recognizer

            if FLAGS.quantization == "int8":
                raise CliError(
                    "--quantization int8 is not offered with --single_program "
                    "(use dynamic)"
                )
            sizes = export_recognizer(
                model, FLAGS.export_dir, encoder, features,
                quantization=FLAGS.quantization,
                hotwords=hotwords_flag(encoder, model.vocab_size),
            )  # fmt: skip
        else:
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
                f"exported {os.path.join(FLAGS.export_dir, name)} ({size / 1e6:.2f} MB)"
            )
    elif command == "manifest":
        write_corpus_manifest(FLAGS.corpus, FLAGS.output)
    else:
        transcribe()


def decoder_flag(model):
    """The --decoder, checked against the model (a CTC head for "ctc")."""
    from tf_transducer.decoding.hybrid import check_decoder

    try:
        check_decoder(FLAGS.decoder, model)
    except ValueError as error:
        raise CliError(f"--decoder: {error}") from None
    if FLAGS.decoder == "ctc" and FLAGS.token_lm:
        raise CliError(
            "--token_lm is fused by the transducer search, not --decoder ctc"
        )
    return FLAGS.decoder


def token_lm_flag(model):
    """{token_lm, lm_scale} of the --token_lm flags for `evaluate`, or {}."""
    from tf_transducer.decoding import token_lm

    if not FLAGS.token_lm:
        return {}
    if not os.path.isfile(FLAGS.token_lm):
        raise CliError(f"--token_lm {FLAGS.token_lm}: no such file")
    if FLAGS.beam_method != "modified" or FLAGS.beam_width < 2:
        raise CliError(
            "--token_lm is fused by the modified beam search: pass "
            "--beam_width 2 or more and --beam_method modified"
        )
    if getattr(model.joiner, "durations", None) is not None:
        raise CliError("--token_lm: the checkpoint is a TDT (use it with an RNN-T)")
    if FLAGS.token_lm_scale < 0:
        raise CliError(f"--token_lm_scale must be >= 0, got {FLAGS.token_lm_scale}")
    try:
        tables = token_lm(FLAGS.token_lm, model.joiner.vocab_size)
    except ValueError as error:
        raise CliError(f"--token_lm: {error}") from None
    return {"token_lm": tables, "lm_scale": FLAGS.token_lm_scale}


def hotwords_flag(text_encoder, vocab_size):
    """The --hotwords file as a HotwordGraph, or None."""
    from tf_transducer.decoding import hotword_graph
    from tf_transducer.decoding import read_hotwords

    if not FLAGS.hotwords:
        return None
    if not os.path.isfile(FLAGS.hotwords):
        raise CliError(f"--hotwords {FLAGS.hotwords}: no such file")
    try:
        phrases, scores = read_hotwords(
            FLAGS.hotwords, text_encoder, FLAGS.hotword_score
        )
        return hotword_graph(phrases, vocab_size, scores)
    except ValueError as error:
        raise CliError(f"--hotwords: {error}") from None


def transcribe():
    """Transcribes the --wav files with an export.

    The transcripts are printed, or written as JSON lines with the words
    when --timestamps, --confidence or --output ask for them.
    """
    import json

    from tf_transducer.decoding import timed_words
    from tf_transducer.decoding.timestamps import word_records
    from tf_transducer.export import RecognizerStream
    from tf_transducer.export import TransducerStream
    from tf_transducer.export.recognizer import MODEL as RECOGNIZER

    paths = [p for p in FLAGS.wav.split(",") if p]
    if not paths:
        raise CliError("--wav is needed to transcribe")
    meta_path = os.path.join(FLAGS.export_dir, "export.json")
    try:
        with open(meta_path) as f:
            kind = json.load(f).get("model")
    except (OSError, ValueError) as error:
        raise CliError(f"--export_dir: cannot read {meta_path}: {error}") from None
    if kind == RECOGNIZER:
        if FLAGS.hotwords:
            raise CliError(
                "--hotwords: a --single_program export has its hotwords compiled in "
                "(pass --hotwords to export)"
            )
        if FLAGS.decoder == "ctc":
            raise CliError(
                "--decoder ctc: a --single_program export runs the transducer "
                "search (export the four programs for the CTC head)"
            )
        stream = RecognizerStream(FLAGS.export_dir)
    else:
        try:
            stream = TransducerStream(FLAGS.export_dir, decoder=FLAGS.decoder)
        except ValueError as error:
            raise CliError(f"--decoder: {error}") from None
        if FLAGS.decoder == "ctc" and FLAGS.hotwords:
            raise CliError("--hotwords are boosted by the transducer search, not "
                           "--decoder ctc")  # fmt: skip
        stream.hotwords = hotwords_flag(stream.text_encoder, stream.meta["vocab_size"])
    check_flag_against("audio_sample_rate", stream.sample_rate, meta_path)
    meta = stream.meta
    seconds = meta["stack"] * meta["frame_step"] / meta["sample_rate"]
    lines = []
    for path in paths:
        text = stream.transcribe(read_audio_flag(path, stream.sample_rate, "wav"))
        if not (FLAGS.timestamps or FLAGS.confidence or FLAGS.output):
            print(text)
            continue
        words = timed_words(stream.labels, stream.frames, stream.confidence,
                            stream.text_encoder, seconds)  # fmt: skip
        records = word_records(words, FLAGS.timestamps, FLAGS.confidence)
        lines.append(json.dumps({"file": path, "text": text, "words": records}))
    if not lines:
        return
    if not FLAGS.output:
        print("\n".join(lines))
        return
    partial = FLAGS.output + ".partial"  # all or nothing
    with open(partial, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(partial, FLAGS.output)
    print(f"wrote {len(lines)} transcripts to {FLAGS.output}")


def run():
    """The `tf-transducer` console script."""
    run_app(main)


if __name__ == "__main__":
    run()
