# SPDX-License-Identifier: Apache-2.0
r"""DeepSpeech on Keras 3: train, test, export and transcribe, with DeepSpeech's flags.

What runs depends on the flags given, in this order (as in DeepSpeech):

  --train_files            train (and validate on --dev_files), keeping the
                           best weights in --checkpoint_dir; an interrupted
                           run resumes where it stopped when started again;
  --test_files             WER / CER of the best checkpoint, with examples;
  --export_dir             streaming TFLite programs (float, or quantised
                           with --export_quantization dynamic | int8);
  --one_shot_infer WAV     the transcript of one file: with the checkpoint
                           model, or with the TFLite export in --export_dir
                           when no --checkpoint_dir is given.

Examples (the bundled spoken digits):

  D=tf_transducer/data/corpora/digits
  python -m tf_transducer.cli.deepspeech --train_files $D/train.csv \
      --dev_files $D/dev.csv --test_files $D/test.csv --audio_sample_rate 8000 \
      --n_hidden 256 --epochs 30 --checkpoint_dir runs/ds
  python -m tf_transducer.cli.deepspeech --checkpoint_dir runs/ds \
      --export_dir runs/ds/tflite
  python -m tf_transducer.cli.deepspeech --export_dir runs/ds/tflite \
      --audio_sample_rate 8000 --one_shot_infer a.wav

Bad input (missing or empty manifests, a checkpoint folder without a
checkpoint, transcripts the alphabet does not cover, a WAV at another sample
rate, labels too long for CTC) ends with a message naming the file or flag
and exit code 1; exports are written to a temporary folder and moved into
place.
"""

import os

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
from tf_transducer.data import read_manifest
from tf_transducer.training import deepspeech_recipe as recipe
from tf_transducer.training.deepspeech_config import DeepSpeechRunConfig
from tf_transducer.training.distributed import strategy_from_environment

FLAGS = flags.FLAGS

define_config_flags(
    DeepSpeechRunConfig,
    {"data": "data", "model": "model", "optimizer": "training", "training": "training"},
)
flag_group("data")
define("string", "test_files", "", "Comma-separated test manifests.")
define("integer", "test_batch_size", 16, "Test batch size.", lower_bound=1)
define(
    "string",
    "alphabet_config_path",
    "",
    "Alphabet file (default: space, a-z and the apostrophe).",
)
flag_group("training")
define_distribution()
define("string", "checkpoint_dir", "", "Weights, config, backups and history.")
define(
    "bool",
    "overwrite",
    False,
    "Replace a run in --checkpoint_dir made with other flags (the same flags "
    "resume it).",
)
define(
    "string", "summary_dir", "", "TensorBoard logs (default: checkpoint_dir/summaries)."
)
flag_group("export and inference")
define("string", "export_dir", "", "Where to write the streaming TFLite programs.")
define("bool", "export_tflite", True, "Export TFLite programs (the only format).")
define("integer", "n_steps", 16, "Frames per streaming step of the export.")
define(
    "enum",
    "export_quantization",
    "float",
    ["float", "dynamic", "int8"],
    "Export float programs, int8 weights (dynamic) or full integer (int8, "
    "calibrated on --calibration_utterances of --train_files).",
)
define(
    "integer",
    "calibration_utterances",
    200,
    "--export_quantization int8: training utterances to calibrate on.",
    lower_bound=1,
)
define("string", "one_shot_infer", "", "A WAV file to transcribe.")
define(
    "string", "lm_binary_path", "", "KenLM model (or ARPA file) for the beam search."
)
define("float", "lm_alpha", 0.75, "Language model weight.")
define("float", "lm_beta", 1.85, "Word insertion bonus.")
define(
    "integer", "beam_width", 1, "Beam width of the decoder (1: greedy).", lower_bound=1
)
define("integer", "report_count", 5, "Example transcripts in the test report.")


def _manifests(flag):
    return manifest_paths(getattr(FLAGS, flag), flag)


def _alphabet():
    from tf_transducer.data import CharacterAlphabet

    if FLAGS.alphabet_config_path:
        if not os.path.isfile(FLAGS.alphabet_config_path):
            raise CliError(
                f"--alphabet_config_path: {FLAGS.alphabet_config_path!r} does not exist"
            )
        return CharacterAlphabet.from_file(FLAGS.alphabet_config_path)
    return CharacterAlphabet.english()


def _require_utterances(flag):
    for path in _manifests(flag):
        if not read_manifest(path):
            raise CliError(f"--{flag}: manifest {path!r} is empty")


def _require_checkpoint_dir(why):
    if not FLAGS.checkpoint_dir:
        raise CliError(f"--checkpoint_dir is needed to {why}")


def run_config():
    """The DeepSpeechRunConfig of the command line (--config, the flags, --set)."""
    given = {}
    if FLAGS.alphabet_config_path:
        given["data.alphabet"] = "".join(_alphabet().characters)
    config = config_from_flags(DeepSpeechRunConfig, given)
    if not config.data.train_files:
        raise CliError(
            "--train_files is needed (or a --config naming data.train_files)"
        )
    for flag, files in (
        ("train_files", config.data.train_files),
        ("dev_files", config.data.dev_files),
    ):
        for path in manifest_paths(",".join(files), flag):
            if not read_manifest(path):
                raise CliError(f"--{flag}: manifest {path!r} is empty")
    return config


def train(callbacks=()):
    """Trains as the flags say (`deepspeech_recipe.train`).

    Returns the history of this run (None when --checkpoint_dir holds it
    finished).

    A run interrupted before its last epoch resumes when started again with
    the same flags; other flags are refused unless --overwrite.
    """
    _require_checkpoint_dir("train")
    return recipe.train(
        run_config(),
        FLAGS.checkpoint_dir,
        strategy=strategy_from_environment(FLAGS.distribution),
        overwrite=FLAGS.overwrite,
        summary_dir=FLAGS.summary_dir or None,
        callbacks=callbacks,
        verbose="auto",  # a progress bar on a terminal, else epoch lines
    )


def load_checkpoint():
    """(model with the best weights, alphabet) from --checkpoint_dir.

    The feature flags, when given, must agree with the saved model.
    """
    _require_checkpoint_dir("load a model")
    model, alphabet, saved = recipe.load_checkpoint(FLAGS.checkpoint_dir)
    config_path = os.path.join(FLAGS.checkpoint_dir, recipe.CONFIG)
    for flag, key in (
        ("audio_sample_rate", "sample_rate"),
        ("feature_win_len", "feature_win_len"),
        ("feature_win_step", "feature_win_step"),
    ):
        if FLAGS[flag].present and FLAGS[flag].value != saved[key]:
            raise CliError(
                f"--{flag}={FLAGS[flag].value} contradicts {config_path}, which "
                f"says {saved[key]}: leave the flag out (the model's "
                "features are used)"
            )
    return model, alphabet


def _scorer(alphabet):
    return word_scorer(FLAGS.lm_binary_path, alphabet)


def _decode(logits, lengths, scorer):
    return recipe.decode(
        logits, lengths, FLAGS.beam_width, scorer, FLAGS.lm_alpha, FLAGS.lm_beta
    )


def test():
    """WER and CER of the checkpoint on --test_files; returns them."""
    model, alphabet = load_checkpoint()
    _require_utterances("test_files")
    data = recipe.speech_data(
        _manifests("test_files"), alphabet, model.mfcc, FLAGS.skip_bad, "test_files"
    )
    wer, cer, pairs = recipe.evaluate(
        model, alphabet, data, FLAGS.test_batch_size, beam_width=FLAGS.beam_width,
        scorer=_scorer(alphabet), alpha=FLAGS.lm_alpha, beta=FLAGS.lm_beta,
    )  # fmt: skip
    print(f"Test on {FLAGS.test_files}: {len(pairs)} utterances, "
          f"WER {wer:.3f}, CER {cer:.3f}")  # fmt: skip
    for ref, hyp in pairs[: FLAGS.report_count]:
        print(f" - ref: {ref!r}\n   hyp: {hyp!r}")
    return wer, cer


def export():
    """Exports the checkpoint's model to --export_dir as TFLite programs.

    int8 quantization calibrates on --train_files audio.
    """
    from tf_transducer.export import export_deepspeech

    model, alphabet = load_checkpoint()
    calibration = None
    if FLAGS.export_quantization == "int8":
        from tf_transducer.data import calibration_audio

        if not FLAGS.train_files:
            raise CliError(
                "--export_quantization int8 calibrates on training audio: give "
                "--train_files"
            )
        calibration = calibration_audio(
            manifest_paths(FLAGS.train_files, "train_files"),
            model.sample_rate,
            FLAGS.calibration_utterances,
        )
    sizes = export_deepspeech(
        model,
        FLAGS.export_dir,
        alphabet,
        FLAGS.n_steps,
        quantization=FLAGS.export_quantization,
        calibration_audio=calibration,
    )
    for name, size in sizes.items():
        print(f"exported {os.path.join(FLAGS.export_dir, name)} ({size / 1e6:.1f} MB)")


def transcribe():
    """Prints and returns the transcript of --one_shot_infer."""
    import numpy as np

    if FLAGS.checkpoint_dir:
        model, alphabet = load_checkpoint()
        audio = read_audio_flag(
            FLAGS.one_shot_infer, model.sample_rate, "one_shot_infer"
        )
        mfcc, frames = model.mfcc(audio[np.newaxis])
        logits = model((mfcc, frames), training=False).numpy()
        (labels,) = _decode(logits, frames.numpy(), _scorer(alphabet))
        text = alphabet.decode(labels)
    elif FLAGS.export_dir:
        from tf_transducer.export import DeepSpeechStream

        stream = DeepSpeechStream(FLAGS.export_dir)
        if FLAGS["audio_sample_rate"].present and (
            FLAGS.audio_sample_rate != stream.sample_rate
        ):
            raise CliError(
                f"--audio_sample_rate={FLAGS.audio_sample_rate} contradicts "
                f"{FLAGS.export_dir}/export.json, which says {stream.sample_rate}: "
                "leave the flag out"
            )
        audio = read_audio_flag(
            FLAGS.one_shot_infer, stream.sample_rate, "one_shot_infer"
        )
        text, _ = stream.transcribe(
            audio, beam_width=FLAGS.beam_width, scorer=_scorer(stream.alphabet),
            alpha=FLAGS.lm_alpha, beta=FLAGS.lm_beta,
        )  # fmt: skip
    else:
        raise CliError("--one_shot_infer needs --checkpoint_dir or --export_dir")
    print(text)
    return text


def main(argv):
    """Trains, tests, exports and transcribes, as the flags given ask, in order.

    Bad input ends with a message and exit code 1.
    """
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not (
        FLAGS.train_files
        or FLAGS.config
        or FLAGS.test_files
        or FLAGS.export_dir
        or FLAGS.one_shot_infer
    ):
        raise app.UsageError(
            "nothing to do: give --train_files (or --config), --test_files, "
            "--export_dir or --one_shot_infer"
        )
    if FLAGS.train_files or FLAGS.config:
        train()
    if FLAGS.test_files:
        test()
    if FLAGS.export_dir and FLAGS.export_tflite and FLAGS.checkpoint_dir:
        export()
    if FLAGS.one_shot_infer:
        transcribe()


def run():
    """The `tf-transducer-deepspeech` console script."""
    run_app(main)


if __name__ == "__main__":
    run()
