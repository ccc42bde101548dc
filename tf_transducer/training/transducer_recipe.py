# SPDX-License-Identifier: Apache-2.0
"""The transducer recipe: a log-mel RNN-T model trained on manifests.

It trains on one machine or several; the models are then evaluated and
decoded.

    from tf_transducer.training import transducer_recipe as recipe

    model, encoder, history = recipe.train(
        ["train.csv"], checkpoint_dir="runs/t", dev_files=["dev.csv"], epochs=30
    )
    test, features = recipe.speech_data(["test.csv"], encoder, 16000, 80)
    wer, cer, pairs = recipe.evaluate(model, encoder, test, beam_width=4)

Everything a run needs later is in `checkpoint_dir`: the best model by dev
loss (best.keras), the text encoder (text_encoder.json), run.json (the whole
configuration and progress), history.csv, summaries/ and the checkpoints
(backup/) that resume an interrupted run at its step. Training runs through
`train_loop` under `strategy_from_environment(distribution)`: several
workers each read their own shard of the manifests.
"""

import functools
import json
import os

import keras

from tf_transducer.data.text import save_text_encoder_json
from tf_transducer.models.transducer import CONFORMER_PRESETS
from tf_transducer.training import speech
from tf_transducer.training.distributed import (
    all_reduce_sums,
    is_chief,
    strategy_from_environment,
)
from tf_transducer.training.loop import check_verbose
from tf_transducer.training.run_dir import RUN_FILE

MODEL_FILE, ENCODER_FILE = "best.keras", "text_encoder.json"
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
TEXT_ENCODERS = ("chars", "words", "subwords")
# The `loss` argument: RnntLoss, FusedRnntLoss (the same loss, its logits
# never stored) or PrunedRnntLoss.
LOSSES = ("full", "fused", "pruned")
# Waveform augmentation of the training audio: `WaveAugment`'s parameters
# and "babble" (mix in babble made of 64 training utterances).
WAVE_AUGMENT_DEFAULT = dict(
    speeds=[0.9, 1.0, 1.1],
    pitch_prob=0.3,
    pitch_semitones=2.0,
    tempo_prob=0.2,
    tempo_range=[0.9, 1.1],
    reverb_prob=0.3,
    rt60_range=[0.1, 0.5],
    telephone_prob=0.2,
    noise_prob=0.5,
    snr_range=[8.0, 30.0],
    gain_db=10.0,
    dc_prob=0.2,
    dc_max=0.02,
    babble=True,
)
# Epochs trained on clean audio and features (no SpecAugment, no waveform
# augmentation) first: augmented from the first step, the demo's transducer
# stays on its blank-only plateau (SpecAugment: training loss 8.8 after 10
# epochs). With 4 clean epochs none of three seeds had left it when the
# waveform augmentation began, and one was still on it after 16 (loss
# 10.3); with 10, seeds 0 and 2 left it at epochs 7 and 9.
WARMUP_EPOCHS = 10
BABBLE_UTTERANCES = 64

# The recipe's model, which the CLI and the demo train: the encoder's size is
# an argument of `train` (these are its defaults); the prediction network and
# the joiner are these.
ENCODER_UNITS = 256
ENCODER_LAYERS = 2
STACK = 3
PREDICTOR = "stateless"
PREDICTION_WIDTHS = dict(embedding_dim=64, predictor_units=128, joiner_units=128)
ENCODERS = ("lstm", "conformer")
# The Conformer encoder's default sizes (`train(encoder="conformer")`; the
# `conformer` argument overrides any of them): the encoder of
# CONFORMER_PRESETS["conformer-2m"], 1.53 M parameters in the demo's model
# (its LSTMs: 1.03 M), chunks of 8 encoder frames (320 ms at a 10 ms hop and
# 4x subsampling: the algorithmic latency) and 32 frames of left context.
CONFORMER = {
    key: CONFORMER_PRESETS["conformer-2m"][key]
    for key in ("conformer_dim", "conformer_layers", "conformer_heads",
                "conformer_kernel", "subsampling", "chunk_size", "left_context",
                "encoder_dropout")
}  # fmt: skip
CONFORMER["chunk_sizes"] = None


def model_config(
    vocab_size,
    n_mels,
    *,
    augment=None,
    encoder_units=ENCODER_UNITS,
    encoder_layers=ENCODER_LAYERS,
    stack=STACK,
    predictor=PREDICTOR,
    encoder="lstm",
    conformer=None,
):
    """The recipe's model as `Transducer` keyword arguments.

    `Transducer(**model_config(...))` builds what `train` trains (with
    global feature normalisation over `n_mels` log-mel features).

    Args:
      vocab_size: classes including the blank (the text encoder's vocab_size).
      n_mels: log-mel features per frame.
      augment: SpecAugment's configuration, or None.
      encoder_units: the encoder's LSTM units.
      encoder_layers: the encoder's LSTM layers.
      stack: input frames per encoder output frame (subsampling).
      predictor: "stateless" or "lstm".
      encoder: "lstm" (encoder_units, encoder_layers, stack) or "conformer"
        (CONFORMER's sizes; the three LSTM arguments are then unused).
      conformer: for "conformer": a dict overriding some of CONFORMER's
        sizes (keys as its), e.g. {"chunk_size": 4}.
    """
    if not isinstance(encoder, str) or encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
    if conformer is not None and (
        encoder != "conformer" or not isinstance(conformer, dict)
    ):
        raise ValueError(
            'conformer: a dict of Conformer sizes, for encoder="conformer" only; '
            f"got {conformer!r} with encoder={encoder!r}"
        )
    unknown = sorted(set(conformer or {}) - set(CONFORMER))
    if unknown:
        raise ValueError(
            f"conformer: unknown sizes {unknown}; they are {sorted(CONFORMER)}"
        )
    if encoder == "conformer":
        sizes = {**CONFORMER, **(conformer or {})}
        encoder_kwargs = dict(encoder="conformer", **sizes)
    else:
        encoder_kwargs = dict(
            encoder_units=encoder_units, encoder_layers=encoder_layers, stack=stack
        )
    return dict(
        vocab_size=vocab_size,
        feature_dim=n_mels,
        normalization="global",
        augment=augment,
        **encoder_kwargs,
        predictor=predictor,
        **PREDICTION_WIDTHS,
    )


def manifest_list(value, name):
    """Manifest or corpus paths from a list or a comma-separated string, checked.

    A corpus is a folder (LibriSpeech), a .tsv (Common Voice) or a .txt
    (a folder of audio files): see `tf_transducer.data.corpus_utterances`.
    """
    paths = [p for p in value.split(",") if p] if isinstance(value, str) else value
    paths = list(paths or [])
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{name}: manifest or corpus {path!r} does not exist"
            )
    return paths


def read_utterances(manifests, name):
    """Every utterance of manifests and corpora (a ValueError names an empty set)."""
    from tf_transducer.data import load_utterances

    utterances = [u for path in manifests for u in load_utterances(path)]
    if manifests and not utterances:
        raise ValueError(f"{name}: {','.join(manifests)} hold no utterances")
    return utterances


def make_text_encoder(kind, transcripts, vocab_size=256, word_delimiter=False):
    """The text encoder of a kind: chars, words or subwords.

    chars: the English alphabet; words / subwords: SentencePiece on
    transcripts, with a delimiter class between words if word_delimiter
    (characters have theirs, the space).
    """
    from tf_transducer.data import CharacterAlphabet, SubwordEncoder

    if kind not in TEXT_ENCODERS:
        raise ValueError(f"text_encoder must be one of {TEXT_ENCODERS}, got {kind!r}")
    if not isinstance(word_delimiter, bool):
        raise ValueError(f"word_delimiter must be a bool, got {word_delimiter!r}")
    if kind == "chars":
        if word_delimiter:
            raise ValueError(
                'word_delimiter: text_encoder "chars" has one already (the space); '
                'it is for "words" and "subwords"'
            )
        return CharacterAlphabet.english()
    if kind == "words":
        words = {w for t in transcripts for w in t.split()}
        return SubwordEncoder.train(
            transcripts,
            len(words) + 2 + word_delimiter,  # + blank, <unk>
            model_type="word",
            word_delimiter=word_delimiter,
        )
    return SubwordEncoder.train(transcripts, vocab_size, word_delimiter=word_delimiter)


def speech_data(
    manifests, encoder, sample_rate, n_mels, max_duration=30.0, skip_bad=False
):
    """(SpeechDataset of log-mel features, the feature layer).

    Args:
      manifests: manifest paths, or a list of `Utterance`s (a worker's shard).
      encoder: the text encoder of the transcripts.
      sample_rate: the audio's sample rate, in Hz.
      n_mels: mel bands of the features.
      max_duration: seconds; longer audio is an error naming the file.
      skip_bad: drop (and count) unusable items instead of failing.
    """
    import tf_transducer as tt

    utterances = manifests
    if manifests and isinstance(manifests[0], str):
        utterances = read_utterances(manifests, "manifests")
    if not utterances:
        raise ValueError("manifests: no utterances")
    features = tt.LogMelSpectrogram(sample_rate=sample_rate, n_mels=n_mels)
    data = tt.SpeechDataset(
        utterances, encoder, sample_rate, features, skip_bad=skip_bad
    )
    for path, seconds in zip(data.paths, data.durations, strict=True):
        if seconds > max_duration:
            raise ValueError(
                f"{path}: {seconds:.1f} s of audio is longer than the model's limit "
                f"(max_duration {max_duration})"
            )
    return data, features


def train(
    train_files,
    checkpoint_dir,
    *,
    dev_files=(),
    text_encoder="chars",
    vocab_size=256,
    word_delimiter=False,
    sample_rate=16000,
    n_mels=80,
    max_duration=30.0,
    epochs=50,
    batch_size=16,
    learning_rate=0.004,
    lr_warmup_epochs=0,
    loss="full",
    encoder_units=ENCODER_UNITS,
    encoder_layers=ENCODER_LAYERS,
    stack=STACK,
    predictor=PREDICTOR,
    encoder="lstm",
    conformer=None,
    augment="default",
    wave_augment="default",
    warmup_epochs=WARMUP_EPOCHS,
    seed=0,
    skip_bad=False,
    distribution="auto",
    strategy=None,
    overwrite=False,
    callbacks=(),
    verbose="auto",
):
    """Trains a Transducer; returns (model, text encoder, history dict).

    The history is None when the run in checkpoint_dir had finished earlier.

    Training again into the same folder resumes an interrupted run at its
    step, or leaves a finished one alone, when the configuration is the same;
    another configuration is refused (ValueError naming the differences)
    unless overwrite.

    Args:
      train_files: manifests or corpora (LibriSpeech folders, Common Voice
        .tsv files, .txt transcripts of audio folders: `read_utterances`),
        a list or a comma-separated string.
      checkpoint_dir: the run folder (on a file system every worker sees).
      dev_files: validation manifests, as train_files.
      text_encoder: "chars", "words" or "subwords" (SentencePiece of
        vocab_size pieces).
      vocab_size: the pieces of a "subwords" encoder.
      word_delimiter: words and subwords: a class between words (see
        `SubwordEncoder`); it lets whole-word models hear repeated words.
      sample_rate: the log-mel features' sample rate (saved with the model).
      n_mels: the log-mel features' bands (saved with the model).
      max_duration: seconds; a longer utterance is an error.
      epochs: epochs to train.
      batch_size: the global batch size (over every replica).
      learning_rate: the peak of a cosine decay.
      lr_warmup_epochs: epochs of a linear rise from 0 to learning_rate
        before the decay (Conformers want one; the LSTMs train without).
      loss: "full" (RnntLoss), "fused" (FusedRnntLoss: the same loss without
        storing the joiner's logits) or "pruned" (PrunedRnntLoss).
      encoder_units: the model's encoder LSTM units.
      encoder_layers: the model's encoder LSTM layers.
      stack: input frames per encoder output frame (subsampling).
      predictor: the model's prediction network (see `Transducer`).
      encoder: "lstm" (the three arguments above) or "conformer" (a
        streaming Conformer of CONFORMER's sizes).
      conformer: a dict overriding some of CONFORMER's sizes.
      augment: "default" (AUGMENT_DEFAULT), "none", a SpecAugment policy
        name (LB, LD, SM, SS) or a dict of SpecAugment arguments.
      wave_augment: augmentation of the training audio before its features:
        "default" (WAVE_AUGMENT_DEFAULT: speed, pitch, tempo, reverberation,
        telephone band, noise and babble, gain, DC offset), "none", or a
        dict of `WaveAugment` arguments (with "babble": bool).
      warmup_epochs: the first epochs train without either augmentation.
      seed: training's random seed.
      skip_bad: drop (and count) unusable items instead of failing.
      distribution: see `strategy_from_environment` ("auto": TF_CONFIG
        naming several workers -> multi-worker); or give `strategy`.
      strategy: a tf.distribute strategy, or None.
      overwrite: start over in a run folder of another configuration.
      callbacks: Keras callbacks run at each epoch's end.
      verbose: as Keras `fit`'s: "auto" or 1: a progress bar through
        each epoch on a terminal (the chief's), else a line per epoch;
        2: a line per epoch and four within it; 0: quiet.
    """
    from tf_transducer.layers import SpecAugment
    from tf_transducer.layers.spec_augment import PRESETS
    from tf_transducer.losses import FusedRnntLoss, PrunedRnntLoss, RnntLoss
    from tf_transducer.models import Transducer

    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    check_verbose(verbose)
    strategy = strategy or strategy_from_environment(distribution)
    chief = is_chief(strategy)
    train_manifests = manifest_list(train_files, "train_files")
    if not train_manifests:
        raise ValueError("train_files: give at least one manifest")
    dev_manifests = manifest_list(dev_files, "dev_files")
    train_utterances = read_utterances(train_manifests, "train_files")
    text_enc = make_text_encoder(
        text_encoder, [u.transcript for u in train_utterances], vocab_size,
        word_delimiter,
    )  # fmt: skip
    if augment == "default":
        augment = AUGMENT_DEFAULT
    elif augment == "none":
        augment = None
    SpecAugment.from_arg(augment)  # its errors name the bad argument
    if (
        isinstance(warmup_epochs, bool)
        or not isinstance(warmup_epochs, int)
        or warmup_epochs < 0
    ):
        raise ValueError(f"warmup_epochs must be an int >= 0, got {warmup_epochs!r}")
    if (
        isinstance(lr_warmup_epochs, bool)
        or not isinstance(lr_warmup_epochs, int)
        or not 0 <= lr_warmup_epochs < epochs
    ):
        raise ValueError(
            f"lr_warmup_epochs must be an int in [0, epochs = {epochs}), got "
            f"{lr_warmup_epochs!r}"
        )
    wave_config = wave_augment_config(wave_augment)
    model_kwargs = model_config(
        text_enc.vocab_size,
        n_mels,
        augment=augment,
        encoder_units=encoder_units,
        encoder_layers=encoder_layers,
        stack=stack,
        predictor=predictor,
        encoder=encoder,
        conformer=conformer,
    )
    config = dict(
        features=dict(sample_rate=sample_rate, n_mels=n_mels),
        model=model_kwargs,
        data=dict(
            train_files=[os.path.abspath(p) for p in train_manifests],
            dev_files=[os.path.abspath(p) for p in dev_manifests],
            text_encoder=text_encoder,
            vocab_size=vocab_size,
            word_delimiter=word_delimiter,
            max_duration=max_duration,
            wave_augment=wave_config,
        ),
        training=dict(
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            lr_warmup_epochs=lr_warmup_epochs,
            loss=loss,
            warmup_epochs=warmup_epochs,
            seed=seed,
        ),
    )
    run_dir = speech.run_directory(
        checkpoint_dir, config, (MODEL_FILE, ENCODER_FILE), overwrite, strategy
    )
    if run_dir.announce(epochs) == "done":
        model, text_enc = load_checkpoint(checkpoint_dir)
        return model, text_enc, None
    mine = speech.shard_utterances(train_utterances, strategy)
    train_data, _ = speech_data(
        mine, text_enc, sample_rate, n_mels, max_duration, skip_bad
    )
    dev_data = None
    if dev_manifests:
        dev_utterances = read_utterances(dev_manifests, "dev_files")
        dev_data, _ = speech_data(
            speech.shard_utterances(dev_utterances, strategy),
            text_enc, sample_rate, n_mels, max_duration, skip_bad,
        )  # fmt: skip
    if chief:
        save_text_encoder_json(text_enc, run_dir.file(ENCODER_FILE))
    wave = make_wave_augment(wave_config, train_manifests, sample_rate, seed)

    def model_fn(steps):
        spec_augment = augment
        if augment is not None:  # clean features for the warm-up
            policy = PRESETS[augment] if isinstance(augment, str) else augment
            spec_augment = dict(policy, start_step=warmup_epochs * steps)
        model = Transducer(**dict(model_kwargs, augment=spec_augment))
        model.build()
        # Statistics over every worker's shard: the same on each.
        model.normalizer.adapt(
            train_data.dataset(64, shuffle=False),
            combine=functools.partial(all_reduce_sums, strategy),
        )
        rise = lr_warmup_epochs * steps
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0 if rise else learning_rate,
            (epochs * steps) - rise,
            alpha=0.05,
            warmup_target=learning_rate if rise else None,
            warmup_steps=rise,
        )
        loss_fn = {
            "full": RnntLoss,
            "fused": FusedRnntLoss,
            "pruned": lambda: PrunedRnntLoss(s_range=4),
        }[loss]()
        model.compile(
            optimizer=keras.optimizers.Adam(schedule, clipnorm=5.0), loss=loss_fn
        )
        return model

    model, history = speech.fit(
        model_fn,
        train_data,
        run_dir,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        strategy=strategy,
        best_file=MODEL_FILE,
        dev_data=dev_data,
        error_counts=functools.partial(error_counts, encoder=text_enc),
        early_stopping=(max(5, epochs // 5), 0.0) if dev_data is not None else None,
        callbacks=callbacks,
        verbose=verbose,
        augment=wave,
        augment_from_epoch=warmup_epochs,
    )
    return model, text_enc, history


def wave_augment_config(wave_augment):
    """The waveform augmentation's parameters (a dict, or None for none)."""
    from tf_transducer.data.augment import WaveAugment

    if wave_augment == "none" or wave_augment is None:
        return None
    if wave_augment == "default":
        wave_augment = WAVE_AUGMENT_DEFAULT
    if not isinstance(wave_augment, dict):
        raise ValueError(
            'wave_augment must be "default", "none" or a dict of WaveAugment '
            f"arguments, got {wave_augment!r}"
        )
    params = dict(wave_augment)
    babble = params.pop("babble", False)
    if not isinstance(babble, bool):
        raise ValueError(f"wave_augment: babble must be true or false, got {babble!r}")
    try:  # checks every argument
        config = WaveAugment(sample_rate=8000, **params).get_config()
    except TypeError as error:
        raise ValueError(f"wave_augment: {error}") from None
    del config["sample_rate"]
    return {**config, "babble": babble}


def make_wave_augment(config, manifests, sample_rate, seed):
    """The `WaveAugment` of a wave_augment config (None: none).

    Its babble is made of BABBLE_UTTERANCES training utterances.
    """
    from tf_transducer.data import calibration_audio
    from tf_transducer.data.augment import WaveAugment, make_babble_bank

    if config is None:
        return None
    params = dict(config)
    bank = None
    if params.pop("babble"):
        talkers = calibration_audio(manifests, sample_rate, BABBLE_UTTERANCES)
        bank = make_babble_bank(talkers, sample_rate=sample_rate, seed=seed)
    return WaveAugment(sample_rate=sample_rate, babble=bank, **params)


def decode_batch(
    model, batch, beam_width=1, scorer=None, alpha=0.75, beta=1.85,
    beam_method="modified",
):  # fmt: skip
    """Label sequences of a SpeechDataset batch.

    Greedy search with beam_width 1 and no scorer, else beam search
    (`beam_method`: "modified", one symbol per frame at most, or "standard")
    with the scorer's LM.
    """
    from tf_transducer.decoding.transducer import (
        transducer_beam_search,
        transducer_greedy_decode,
    )

    inputs = (batch["features"], batch["feature_length"])
    if beam_width == 1 and scorer is None:
        return transducer_greedy_decode(model, inputs)
    return transducer_beam_search(
        model, inputs, beam_width, beam_method, scorer=scorer, alpha=alpha, beta=beta
    )


def transcribe_data(model, encoder, data, batch_size=64, **decoding):
    """[(reference, hypothesis)] of every utterance of a SpeechDataset, in order.

    `decoding` holds beam_width, scorer, alpha, beta, beam_method.
    """
    found = {}
    for batch in data.dataset(batch_size, shuffle=False):
        hyps = decode_batch(model, batch, **decoding)
        for index, labels in zip(batch["index"].numpy(), hyps, strict=True):
            found[int(index)] = (data.transcripts[index], encoder.decode(labels))
    return [found[i] for i in sorted(found)]


def error_counts(model, data, encoder):
    """Error counts of greedy search over a SpeechDataset.

    {"wer": (word errors, words), "cer": (char errors, chars)}: sums that add
    up across workers.
    """
    from tf_transducer.decoding import edit_distance

    counts = {"wer": [0, 0], "cer": [0, 0]}
    for ref, hyp in transcribe_data(model, encoder, data):
        for name, tokens in (("wer", str.split), ("cer", list)):
            counts[name][0] += edit_distance(tokens(ref), tokens(hyp))
            counts[name][1] += len(tokens(ref))
    return {name: tuple(c) for name, c in counts.items()}


def evaluate(
    model, encoder, data, beam_width=1, batch_size=64, scorer=None, alpha=0.75,
    beta=1.85, beam_method="modified",
):  # fmt: skip
    """(WER, CER, [(reference, hypothesis)]) of a model on a SpeechDataset.

    beam_width 1 without a scorer is greedy search; otherwise beam search
    (`beam_method` "modified": one symbol per frame at most, as k2 / icefall;
    "standard": as ESPnet, several per frame), with the scorer's LM weighted
    by alpha and beta per word.
    """
    from tf_transducer.decoding import char_error_rate, word_error_rate

    pairs = transcribe_data(
        model, encoder, data, batch_size, beam_width=beam_width, scorer=scorer,
        alpha=alpha, beta=beta, beam_method=beam_method,
    )  # fmt: skip
    refs, hyps = [p[0] for p in pairs], [p[1] for p in pairs]
    return word_error_rate(refs, hyps), char_error_rate(refs, hyps), pairs


def evaluate_export(export_dir, paths, transcripts, num_threads=1):
    """Streams files through an export's LiteRT programs (greedy search).

    Args:
      export_dir: a folder written by `export_transducer`.
      paths: audio files (read at the export's rate).
      transcripts: the files' transcripts.
      num_threads: interpreter threads.

    Returns:
      {"quantization", "wer", "cer", "rtf" (compute seconds per audio second,
      audio reading excluded), "size" (bytes of the programs), "texts"}.
    """
    import time

    from tf_transducer.data import load_audio
    from tf_transducer.decoding import char_error_rate, word_error_rate
    from tf_transducer.export import TransducerStream

    stream = TransducerStream(export_dir, num_threads=num_threads)
    texts, seconds, compute = [], 0.0, 0.0
    for path in paths:
        audio = load_audio(path, stream.sample_rate)
        began = time.perf_counter()
        texts.append(stream.transcribe(audio))
        compute += time.perf_counter() - began
        seconds += len(audio) / stream.sample_rate
    size = sum(
        os.path.getsize(os.path.join(export_dir, name))
        for name in os.listdir(export_dir)
        if name.endswith(".tflite")
    )
    return {
        "quantization": stream.quantization,
        "wer": word_error_rate(transcripts, texts),
        "cer": char_error_rate(transcripts, texts),
        "rtf": compute / seconds,
        "size": size,
        "texts": texts,
    }


def load_checkpoint(checkpoint_dir):
    """(model, text encoder) of a training run's folder."""
    from tf_transducer.data.text import load_text_encoder_json

    model_path = os.path.join(checkpoint_dir, MODEL_FILE)
    encoder_path = os.path.join(checkpoint_dir, ENCODER_FILE)
    if not (os.path.isfile(model_path) and os.path.isfile(encoder_path)):
        raise FileNotFoundError(
            f"checkpoint_dir {checkpoint_dir!r} holds no checkpoint ({MODEL_FILE} "
            f"and {ENCODER_FILE}); train first"
        )
    model = keras.models.load_model(model_path, compile=False)
    encoder = load_text_encoder_json(encoder_path)
    if encoder.vocab_size != model.vocab_size:
        raise ValueError(
            f"{encoder_path}: the text encoder has {encoder.vocab_size} classes but "
            f"the model in {model_path} has {model.vocab_size}"
        )
    return model, encoder


def _saved(checkpoint_dir, what, read):
    """read(run.json's "config") of a run; a ValueError names the file."""
    path = os.path.join(checkpoint_dir, RUN_FILE)
    try:
        with open(path) as f:
            return read(json.load(f)["config"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path}: cannot read the run's {what} ({error}); train into "
            "checkpoint_dir again"
        ) from None


def saved_features(checkpoint_dir):
    """{"sample_rate", "n_mels"} a run was trained with (from run.json)."""
    return _saved(
        checkpoint_dir,
        "feature settings",
        lambda c: dict(
            sample_rate=c["features"]["sample_rate"], n_mels=c["features"]["n_mels"]
        ),
    )


def saved_train_files(checkpoint_dir):
    """The training manifests a run was trained on (from run.json)."""
    return _saved(
        checkpoint_dir, "training manifests", lambda c: list(c["data"]["train_files"])
    )
