# SPDX-License-Identifier: Apache-2.0
"""Audio files: checking them, and decoding them in or out of the graph.

16-bit PCM WAV files are decoded in the graph (`tf.audio.decode_wav`);
everything else that libsndfile reads (FLAC, OGG, 24-bit or float WAV, ...)
through `soundfile` in numpy. Channels are averaged to mono. A file whose
rate differs from the model's is resampled in numpy (`resample.resample`,
float64 windowed sinc).
"""

import dataclasses
import math
import os
import struct
from typing import Any

import numpy as np

from tf_transducer._optional import require
from tf_transducer.data.resample import resample


class BadAudioError(ValueError):
    """An audio file that cannot be used; the message names it and says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class AudioInfo:
    """What `probe` finds out about an audio file.

    Attributes:
      sample_rate: Hz.
      channels: the number of channels.
      frames: samples per channel.
      in_graph: whether tf.audio.decode_wav reads it (16-bit PCM WAV).
      float_samples: whether it stores floating-point samples (which, unlike
        integer ones, can be NaN or infinite).
    """

    sample_rate: int
    channels: int
    frames: int
    in_graph: bool
    float_samples: bool = False

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate


def _probe_wav(path, size):
    """AudioInfo of a RIFF/WAVE file from its chunks, checking the data size."""
    with open(path, "rb") as f:
        f.seek(12)  # RIFF, size, WAVE
        fmt, floats = None, False
        while True:
            chunk = f.read(8)
            if len(chunk) < 8:
                break
            name, length = struct.unpack("<4sI", chunk)
            if name == b"fmt ":
                body = f.read(length)
                if len(body) < 16:
                    raise BadAudioError(path, "truncated WAV header (fmt chunk)")
                tag, channels, rate, _, align, bits = struct.unpack(
                    "<HHIIHH", body[:16]
                )
                fmt = (tag, channels, rate, align, bits)
                # IEEE float samples: format tag 3, or WAVE_FORMAT_EXTENSIBLE
                # with a sub-format GUID that starts with 3.
                floats = tag == 3 or (tag == 0xFFFE and body[24:26] == b"\x03\x00")
            elif name == b"data":
                if fmt is None:
                    raise BadAudioError(path, "WAV data chunk before its fmt chunk")
                have = size - f.tell()
                if have < length:
                    raise BadAudioError(
                        path,
                        f"truncated WAV: the data chunk declares {length} bytes, "
                        f"the file holds {have}",
                    )
                tag, channels, rate, align, bits = fmt
                if channels == 0 or align == 0 or rate == 0:
                    raise BadAudioError(path, f"bad WAV format {fmt}")
                frames = length // align
                # tf.audio.decode_wav takes 16-bit PCM whose block alignment
                # and data size agree; anything else goes to libsndfile.
                in_graph = (
                    tag == 1
                    and bits == 16
                    and align == 2 * channels
                    and length % align == 0
                )
                return AudioInfo(rate, channels, frames, in_graph, floats)
            else:
                f.seek(length + (length & 1), os.SEEK_CUR)
    raise BadAudioError(path, "WAV file without a data chunk")


def probe(path: str) -> AudioInfo:
    """Checks that path is a readable, non-empty audio file; returns its info.

    Raises:
      BadAudioError: missing, unreadable, empty, truncated (WAV), not audio,
        or without samples.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as error:
        raise BadAudioError(path, f"cannot be read ({error.strerror})") from None
    if size == 0:
        raise BadAudioError(path, "empty file")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        info = _probe_wav(path, size)
    else:
        sf = require("soundfile")

        try:
            sf_info = sf.info(path)
        except Exception as error:  # libsndfile's own errors vary by format
            raise BadAudioError(path, f"not a readable audio file ({error})") from None
        info = AudioInfo(
            sf_info.samplerate,
            sf_info.channels,
            sf_info.frames,
            False,
            sf_info.subtype in ("FLOAT", "DOUBLE"),
        )
    if info.frames <= 0:
        raise BadAudioError(path, "no audio samples")
    return info


def read_audio(
    path: str, sample_rate: int, offset: float = 0.0, duration: float | None = None
) -> np.ndarray:
    """float32 [N] mono samples in [-1, 1] at sample_rate (numpy, soundfile).

    Args:
      path: any file libsndfile reads (WAV, FLAC, OGG, ...).
      sample_rate: Hz of the result; other rates are resampled.
      offset: seconds into the file where the segment to read starts.
      duration: seconds of the segment (None: the rest of the file from
        offset).

    Raises:
      ValueError: a sample_rate that is not a positive int, an offset or
        duration that is not a number of seconds >= 0 (duration: or None).
      BadAudioError: unreadable, no samples (in the segment), or samples
        that are NaN or infinite (a float file can hold them).
    """
    _check_rate(sample_rate)
    if not _seconds(offset, 0.0):
        raise ValueError(f"offset must be a number of seconds >= 0, got {offset!r}")
    if duration is not None and not _seconds(duration, 0.0):
        raise ValueError(f"duration must be None or seconds >= 0, got {duration!r}")
    sf = require("soundfile")

    try:
        with sf.SoundFile(path) as f:
            rate = f.samplerate
            start = int(round(offset * rate))
            if start:
                f.seek(min(start, f.frames))
            count = -1 if duration is None else int(round(duration * rate))
            audio = f.read(count, dtype="float64", always_2d=True)
    except Exception as error:
        raise BadAudioError(path, f"cannot be decoded ({error})") from None
    if audio.shape[0] == 0:
        where = f" at offset {offset} s" if offset else ""
        raise BadAudioError(path, f"no audio samples{where}")
    if not np.isfinite(audio).all():
        raise BadAudioError(path, "samples that are NaN or infinite")
    mono = audio.mean(axis=1)
    if rate != sample_rate:
        mono = resample(mono, int(rate), int(sample_rate))
    return mono.astype(np.float32)


def load_audio(path: str, sample_rate: int) -> np.ndarray:
    """A whole audio file as float32 [N] mono samples at sample_rate.

    The rule every reader here applies: the file is checked as the
    pipeline checks it (`probe`: readable, not empty, not truncated, has
    samples), then decoded and resampled to sample_rate if needed.

    Raises:
      ValueError: a sample_rate that is not a positive int.
      BadAudioError: naming the file and what is wrong with it.
    """
    _check_rate(sample_rate)
    probe(path)
    return read_audio(path, sample_rate)


def _check_rate(sample_rate):
    if (
        isinstance(sample_rate, bool)
        or not isinstance(sample_rate, (int, np.integer))
        or sample_rate <= 0
    ):
        raise ValueError(f"sample_rate must be a positive int, got {sample_rate!r}")


def _seconds(value, least):
    """Whether value is a finite real number >= least."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and least <= value < float("inf")
    )


def decode_wav(contents):
    """float32 [N] mono samples of 16-bit PCM WAV bytes, in the graph."""
    import tensorflow as tf

    audio, _ = tf.audio.decode_wav(contents)
    return tf.reduce_mean(audio, axis=1)


# A manifest's duration may overshoot the file by this much (rounding).
DURATION_SLACK = 0.01


def decoded_samples(info: Any, segment: tuple[float, float], sample_rate: int) -> int:
    """The samples decoding a segment of a file gives at sample_rate.

    info: the file's `probe`; segment: (offset, duration) seconds (duration
    < 0: to the end), as `segment_of` gives.
    """
    offset, duration = segment
    if info.in_graph and info.sample_rate == sample_rate:
        start = min(round(offset * sample_rate), info.frames)
        end = info.frames if duration < 0 else start + round(duration * sample_rate)
        return max(0, min(end, info.frames) - start)
    rate = info.sample_rate
    start = min(int(round(offset * rate)), info.frames)
    count = info.frames - start
    if duration >= 0:
        count = min(int(round(duration * rate)), count)
    if rate == sample_rate:
        return count
    g = math.gcd(rate, sample_rate)
    return -(-count * (sample_rate // g) // (rate // g))


def segment_of(utterance: Any, info: Any) -> tuple[float, float]:
    """(offset, duration) in seconds of the part of the file an utterance reads.

    utterance: its path, offset and duration (None: to the end); info: the
    file's `probe`. A segment past the file's end is a BadAudioError.
    """
    offset = utterance.offset
    if offset >= info.duration:
        raise BadAudioError(
            utterance.path,
            f"offset {offset} s is past the end of the audio ({info.duration:.3f} s)",
        )
    available = info.duration - offset
    duration = available if utterance.duration is None else utterance.duration
    if duration > available + DURATION_SLACK:
        raise BadAudioError(
            utterance.path,
            f"offset {offset} s + duration {duration} s runs past the end of the "
            f"audio ({info.duration:.3f} s)",
        )
    if duration <= 0:
        raise BadAudioError(utterance.path, f"duration {duration} s has no samples")
    return offset, min(duration, available)
