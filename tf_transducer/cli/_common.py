# SPDX-License-Identifier: Apache-2.0
"""What the command lines share: user errors, manifests, LMs, audio input."""

import os


class CliError(Exception):
    """A problem with the user's input: printed, exit code 1."""


def manifest_paths(value, flag, required=False, corpora=False):
    """The comma-separated manifests of a flag, each checked to exist.

    With corpora, a path may also be a corpus (a LibriSpeech folder, a
    Common Voice .tsv, a .txt of a folder of audio files).
    """
    paths = [p for p in value.split(",") if p]
    if required and not paths:
        raise CliError(f"--{flag} is needed")
    for path in paths:
        if corpora and not os.path.exists(path):
            raise CliError(f"--{flag}: manifest or corpus {path!r} does not exist")
        if not corpora and not os.path.isfile(path):
            raise CliError(f"--{flag}: manifest {path!r} does not exist")
    return paths


def word_scorer(path, text_encoder, flag="lm_binary_path"):
    """A WordScorer over the KenLM / ARPA model at path, or None without one."""
    if not path:
        return None
    from tf_transducer.decoding import WordScorer
    from tf_transducer.decoding import load_language_model

    if not os.path.isfile(path):
        raise CliError(f"--{flag}: {path!r} does not exist")
    return WordScorer(load_language_model(path), text_encoder)


def read_audio_flag(path, sample_rate, flag):
    """float32 mono samples of the audio file a flag names, at sample_rate.

    The pipeline's rule (`tf_transducer.data.load_audio`): any format
    libsndfile reads, any rate (resampled), and an empty, truncated or
    unreadable file is an error naming the flag and the file.
    """
    from tf_transducer.data import BadAudioError
    from tf_transducer.data import load_audio

    if not path:
        raise CliError(f"--{flag} is needed")
    if not os.path.isfile(path):
        raise CliError(f"--{flag}: {path!r} does not exist")
    try:
        return load_audio(path, sample_rate)
    except BadAudioError as error:
        raise CliError(f"--{flag}: {error}") from None
