"""Transducers from the command line: train, evaluate, export, transcribe.

  T="python -m tf_transducer.cli.transducer"
  $T train --train_files a.csv --dev_files b.csv --checkpoint_dir runs/t
  $T evaluate --test_files c.csv --checkpoint_dir runs/t
  $T export --checkpoint_dir runs/t --export_dir runs/t/tflite
  $T transcribe --export_dir runs/t/tflite --wav x.wav

Flags and conventions follow the DeepSpeech command line (manifests,
--checkpoint_dir, --export_dir, --audio_sample_rate, --beam_width, exit code
1 with a message naming the file or flag on bad input). The functions below
are the recipe; `examples/digits_transducer_demo.py` (`make demo`) uses them.
"""

import json
import os
import sys

from absl import app, flags, logging

from tf_transducer.cli import define, flag_group, run
from tf_transducer.cli._common import (
    CliError,
    keras_pairs,
    manifest_paths,
    read_audio_flag,
    word_scorer,
)

FLAGS = flags.FLAGS
COMMANDS = ("train", "evaluate", "export", "transcribe")

flag_group("data")
define("string", "train_files", "", "Comma-separated training manifests.")
define("string", "dev_files", "", "Comma-separated validation manifests.")
define("string", "test_files", "", "Comma-separated test manifests.")
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
define("bool", "skip_bad", False, "Drop (and count) unusable items instead of failing.")
flag_group("training")
define("integer", "train_batch_size", 16, "Training batch size.", lower_bound=1)
define("integer", "epochs", 50, "Training epochs.", lower_bound=1)
define("float", "learning_rate", 0.004, "Peak Adam learning rate (cosine decay).")
define("enum", "loss", "full", ["full", "pruned"], "RnntLoss or PrunedRnntLoss.")
define(
    "string",
    "transducer_augment",
    "default",
    "SpecAugment: default, none, LB, LD, SM, SS.",
)
define("integer", "random_seed", 0, "Seed of weights, shuffling, augmentation.")
define(
    "bool",
    "overwrite",
    False,
    "train: replace a run in --checkpoint_dir made with another configuration "
    "(the same configuration resumes it).",
)
flag_group("model")
define("integer", "encoder_units", 256, "Encoder LSTM width.")
define("integer", "encoder_layers", 2, "Encoder LSTMs.")
define("integer", "stack", 3, "Frames stacked per encoder step.")
define("enum", "predictor", "stateless", ["lstm", "stateless"], "Prediction network.")
flag_group("decoding")
define("integer", "beam_width", 1, "1: greedy; else modified beam search.")
define(
    "string", "lm_binary_path", "", "KenLM model (or ARPA file) for the beam search."
)
define("float", "lm_alpha", 0.75, "Language model weight.")
define("float", "lm_beta", 1.85, "Word insertion bonus.")
define("bool", "export_quantized", False, "transcribe with the quantised programs.")

MODEL_FILE, ENCODER_FILE, HISTORY_FILE = (
    "best.keras",
    "text_encoder.json",
    "history.csv",
)
AUGMENT_DEFAULT = dict(
    freq_mask_max_bins=10,
    freq_mask_count=2,
    time_mask_max_frames=20,
    time_mask_count=2,
    time_mask_max_ratio=0.2,
    freq_warp_max_bins=4,
    time_warp_max_frames=10,
    time_warp_max_ratio=0.1,
)


def make_text_encoder(kind, transcripts, vocab_size=256):
    """chars: the English alphabet; words / subwords: SentencePiece on transcripts."""
    from tf_transducer.data import CharacterAlphabet, SubwordEncoder

    if kind == "chars":
        return CharacterAlphabet.english()
    if kind == "words":
        words = {w for t in transcripts for w in t.split()}
        return SubwordEncoder.train(transcripts, len(words) + 2, model_type="word")
    return SubwordEncoder.train(transcripts, vocab_size)


def save_text_encoder(encoder, path):
    with open(path, "w") as f:
        json.dump({"kind": type(encoder).__name__, "config": encoder.get_config()}, f)


def speech_data(manifests, encoder, sample_rate, n_mels, max_duration, skip_bad=False):
    """A SpeechDataset of log-mel features; over-long audio is an error."""
    import tf_transducer as tt
    from tf_transducer.data import read_manifest

    utterances = [u for path in manifests for u in read_manifest(path)]
    if not utterances:
        raise CliError(f"{','.join(manifests)}: no utterances")
    features = tt.LogMelSpectrogram(sample_rate=sample_rate, n_mels=n_mels)
    data = tt.SpeechDataset(
        utterances, encoder, sample_rate, features, skip_bad=skip_bad
    )
    for path, seconds in zip(data.paths, data.durations, strict=True):
        if seconds > max_duration:
            raise CliError(
                f"{path}: {seconds:.1f} s of audio is longer than the model's limit "
                f"(--max_duration {max_duration})"
            )
    return data, features


def train(
    train_files,
    dev_files,
    checkpoint_dir,
    text_encoder="chars",
    vocab_size=256,
    sample_rate=16000,
    n_mels=80,
    max_duration=30.0,
    epochs=50,
    batch_size=16,
    learning_rate=0.004,
    loss="full",
    encoder_units=256,
    encoder_layers=2,
    stack=3,
    predictor="stateless",
    augment="default",
    seed=0,
    skip_bad=False,
    verbose=1,
    extra_callbacks=(),
    overwrite=False,
):
    """Trains a Transducer (MirroredStrategy over the visible devices).

    Everything the model needs later is saved in checkpoint_dir: the best
    model by dev loss (best.keras), the text encoder (text_encoder.json) and
    run.json (the whole configuration: features, model, data, training; and
    progress). Training again into the same folder resumes an interrupted
    run or leaves a finished one alone when the configuration is the same,
    and is refused (ValueError naming the differences) when it is not,
    unless overwrite.

    Returns (model, text encoder, History; None when the run had finished
    earlier).
    """
    import keras
    import tensorflow as tf

    from tf_transducer.data import read_manifest
    from tf_transducer.losses import PrunedRnntLoss, RnntLoss
    from tf_transducer.models import Transducer
    from tf_transducer.training import RunDirectory, RunStateCallback
    from tf_transducer.training.run_dir import BACKUP_DIR

    keras.utils.set_random_seed(seed)
    train_manifests = manifest_paths(train_files, "train_files", required=True)
    dev_manifests = manifest_paths(dev_files, "dev_files") if dev_files else []
    transcripts = [u.transcript for p in train_manifests for u in read_manifest(p)]
    encoder = make_text_encoder(text_encoder, transcripts, vocab_size)
    if augment == "default":
        augment = AUGMENT_DEFAULT
    elif augment == "none":
        augment = None
    model_config = dict(
        vocab_size=encoder.vocab_size,
        feature_dim=n_mels,
        normalization="global",
        augment=augment,
        encoder_units=encoder_units,
        encoder_layers=encoder_layers,
        stack=stack,
        predictor=predictor,
        embedding_dim=64,
        predictor_units=128,
        joiner_units=128,
    )
    config = dict(
        features=dict(sample_rate=sample_rate, n_mels=n_mels),
        model=model_config,
        data=dict(
            train_files=[os.path.abspath(p) for p in train_manifests],
            dev_files=[os.path.abspath(p) for p in dev_manifests],
            text_encoder=text_encoder,
            vocab_size=vocab_size,
            max_duration=max_duration,
        ),
        training=dict(
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            loss=loss,
            seed=seed,
        ),
    )
    run_dir = RunDirectory(
        checkpoint_dir,
        config,
        owned=(MODEL_FILE, ENCODER_FILE, HISTORY_FILE, "summaries"),
        overwrite=overwrite,
    )
    if run_dir.announce(epochs) == "done":
        model, encoder = load_checkpoint(checkpoint_dir)
        return model, encoder, None
    train_data, _ = speech_data(
        train_manifests, encoder, sample_rate, n_mels, max_duration, skip_bad
    )
    dev_data = None
    if dev_manifests:
        dev_data, _ = speech_data(
            dev_manifests, encoder, sample_rate, n_mels, max_duration, skip_bad
        )
    save_text_encoder(encoder, run_dir.file(ENCODER_FILE))
    train_ds = train_data.dataset(batch_size, seed=seed, bucket_boundaries="auto")
    steps_per_epoch = sum(1 for _ in train_ds)
    with tf.distribute.MirroredStrategy().scope():
        model = Transducer(**model_config)
        model.build()
        model.normalizer.adapt(train_data.dataset(64, shuffle=False))
        schedule = keras.optimizers.schedules.CosineDecay(
            learning_rate, epochs * steps_per_epoch, alpha=0.05
        )
        loss_fn = PrunedRnntLoss(s_range=4) if loss == "pruned" else RnntLoss()
        model.compile(
            optimizer=keras.optimizers.Adam(schedule, clipnorm=5.0), loss=loss_fn
        )
    monitor = "val_loss" if dev_data is not None else "loss"
    run_dir.trim_history(HISTORY_FILE, run_dir.resume_epoch())
    early_stopping = None
    if dev_data is not None:
        early_stopping = keras.callbacks.EarlyStopping(
            "val_loss", patience=max(5, epochs // 5)
        )
    callbacks = [
        keras.callbacks.BackupAndRestore(run_dir.file(BACKUP_DIR)),
        keras.callbacks.ModelCheckpoint(
            run_dir.file(MODEL_FILE),
            monitor=monitor,
            save_best_only=True,
            # A resumed run keeps the best model of its earlier epochs.
            initial_value_threshold=run_dir.state.get("best"),
        ),
        keras.callbacks.CSVLogger(run_dir.file(HISTORY_FILE), append=True),
        keras.callbacks.TensorBoard(run_dir.file("summaries")),
        *extra_callbacks,
    ]
    if dev_data is not None:
        callbacks += [WerCallback(dev_data, encoder), early_stopping]
    callbacks.append(RunStateCallback(run_dir, monitor, early_stopping))
    history = model.fit(
        keras_pairs(train_ds),
        validation_data=keras_pairs(dev_data.dataset(64, shuffle=False))
        if dev_data
        else None,
        epochs=epochs,
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,  # the dataset shuffles itself, every epoch
    )
    return model, encoder, history


def _decode_batch(model, batch, beam_width, scorer=None, alpha=0.75, beta=1.85):
    from tf_transducer.decoding.transducer import (
        transducer_beam_search,
        transducer_greedy_decode,
    )

    inputs = (batch["features"], batch["feature_length"])
    if beam_width == 1 and scorer is None:
        return transducer_greedy_decode(model, inputs)
    return transducer_beam_search(
        model, inputs, beam_width, scorer=scorer, alpha=alpha, beta=beta
    )


def evaluate(
    model,
    encoder,
    data,
    beam_width=1,
    batch_size=64,
    scorer=None,
    alpha=0.75,
    beta=1.85,
):
    """(WER, CER, [(reference, hypothesis)]) of a model on a SpeechDataset.

    beam_width 1 without a scorer is greedy search; otherwise modified beam
    search, with the scorer's LM weighted by alpha and beta per word.
    """
    from tf_transducer.decoding import char_error_rate, word_error_rate

    pairs = []
    for batch in data.dataset(batch_size, shuffle=False):
        hyps = _decode_batch(model, batch, beam_width, scorer, alpha, beta)
        for index, labels in zip(batch["index"].numpy(), hyps, strict=True):
            pairs.append((data.transcripts[index], encoder.decode(labels)))
    refs, hyps = [p[0] for p in pairs], [p[1] for p in pairs]
    return word_error_rate(refs, hyps), char_error_rate(refs, hyps), pairs


class WerCallback:
    """Keras callback: greedy WER / CER on a dev SpeechDataset after each epoch."""

    def __new__(cls, data, encoder, every=1):
        import keras

        class _Callback(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                if (epoch + 1) % every:
                    return
                wer, cer, _ = evaluate(self.model, encoder, data)
                if logs is not None:
                    logs["val_wer"], logs["val_cer"] = wer, cer
                print(f" - val_wer: {wer:.3f} - val_cer: {cer:.3f}")

        return _Callback()


def load_checkpoint(checkpoint_dir):
    """(model, text encoder) from a training run's folder."""
    import keras

    from tf_transducer.export.transducer import load_text_encoder_config

    model_path = os.path.join(checkpoint_dir, MODEL_FILE)
    encoder_path = os.path.join(checkpoint_dir, ENCODER_FILE)
    if not (os.path.isfile(model_path) and os.path.isfile(encoder_path)):
        raise CliError(
            f"--checkpoint_dir {checkpoint_dir!r} holds no checkpoint ({MODEL_FILE} "
            f"and {ENCODER_FILE}); train first"
        )
    model = keras.models.load_model(model_path, compile=False)
    encoder = load_text_encoder_config(encoder_path)
    if encoder.vocab_size != model.vocab_size:
        raise CliError(
            f"{encoder_path}: the text encoder has {encoder.vocab_size} classes but "
            f"the model in {model_path} has {model.vocab_size}"
        )
    return model, encoder


def saved_features(checkpoint_dir):
    """The feature settings a checkpoint was trained with (from run.json),
    checked against --audio_sample_rate / --n_mels when those are given."""
    from tf_transducer.training.run_dir import RUN_FILE

    path = os.path.join(checkpoint_dir, RUN_FILE)
    try:
        with open(path) as f:
            features = json.load(f)["config"]["features"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CliError(
            f"{path}: cannot read the run's feature settings ({error}); train into "
            "--checkpoint_dir again"
        ) from None
    check_flag_against("audio_sample_rate", features["sample_rate"], path)
    check_flag_against("n_mels", features["n_mels"], path)
    return features


def check_flag_against(flag, saved, source):
    """A flag given on the command line must agree with the saved value."""
    if FLAGS[flag].present and FLAGS[flag].value != saved:
        raise CliError(
            f"--{flag}={FLAGS[flag].value} contradicts {source}, which says "
            f"{saved}: leave the flag out (the saved value is used)"
        )


def main(argv):
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise app.UsageError(f"give one command: {' | '.join(COMMANDS)}")
    command = argv[1]
    try:
        if command == "train":
            if not FLAGS.checkpoint_dir:
                raise CliError("--checkpoint_dir is needed to train")
            train(
                FLAGS.train_files,
                FLAGS.dev_files,
                FLAGS.checkpoint_dir,
                text_encoder=FLAGS.text_encoder,
                vocab_size=FLAGS.vocab_size,
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
                augment=FLAGS.transducer_augment,
                seed=FLAGS.random_seed,
                skip_bad=FLAGS.skip_bad,
                verbose=1 if sys.stdout.isatty() else 2,
                overwrite=FLAGS.overwrite,
            )
        elif command == "evaluate":
            model, encoder = load_checkpoint(FLAGS.checkpoint_dir)
            features = saved_features(FLAGS.checkpoint_dir)
            data, _ = speech_data(
                manifest_paths(FLAGS.test_files, "test_files", required=True),
                encoder,
                features["sample_rate"],
                features["n_mels"],
                FLAGS.max_duration,
                FLAGS.skip_bad,
            )
            wer, cer, pairs = evaluate(
                model,
                encoder,
                data,
                FLAGS.beam_width,
                scorer=word_scorer(FLAGS.lm_binary_path, encoder),
                alpha=FLAGS.lm_alpha,
                beta=FLAGS.lm_beta,
            )
            print(f"{len(pairs)} utterances: WER {wer:.3f}, CER {cer:.3f}")
            for ref, hyp in pairs[:5]:
                print(f" - ref: {ref!r}\n   hyp: {hyp!r}")
        elif command == "export":
            import tf_transducer as tt
            from tf_transducer.export import export_transducer

            if not FLAGS.export_dir:
                raise CliError("--export_dir is needed to export")
            model, encoder = load_checkpoint(FLAGS.checkpoint_dir)
            features = tt.LogMelSpectrogram(**saved_features(FLAGS.checkpoint_dir))
            sizes = export_transducer(model, FLAGS.export_dir, encoder, features)
            for name, size in sizes.items():
                print(
                    f"exported {os.path.join(FLAGS.export_dir, name)} "
                    f"({size / 1e6:.2f} MB)"
                )
        else:
            from tf_transducer.export import TransducerStream

            if not FLAGS.wav:
                raise CliError("--wav is needed to transcribe")
            stream = TransducerStream(
                FLAGS.export_dir, quantized=FLAGS.export_quantized
            )
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


if __name__ == "__main__":
    run(main)
