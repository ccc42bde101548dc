# SPDX-License-Identifier: Apache-2.0
"""A run's inputs: manifests and corpora, text encoders, log-mel SpeechDatasets.

What the transducer and DeepSpeech recipes (and the command lines) share
to turn paths into utterances and utterances into batches.
"""

import os

from tf_transducer.training.config import TEXT_ENCODERS


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
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.data import SubwordEncoder

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
