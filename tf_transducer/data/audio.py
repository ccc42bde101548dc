"""Audio files: checking them, and decoding them in or out of the graph.

16-bit PCM WAV files are decoded in the graph (`tf.audio.decode_wav`);
everything else that libsndfile reads (FLAC, OGG, 24-bit or float WAV, ...)
through `soundfile` in numpy. Channels are averaged to mono. A file whose
rate differs from the model's is resampled in numpy (`resample.resample`,
float64 windowed sinc).
"""

import dataclasses
import os
import struct

import numpy as np

from tf_transducer.data.resample import resample


class BadAudioError(ValueError):
    """An audio file that cannot be used; the message names it and says why."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class AudioInfo:
    """sample_rate (Hz), channels, frames (samples per channel), and
    in_graph: whether tf.audio.decode_wav reads it (16-bit PCM WAV)."""

    sample_rate: int
    channels: int
    frames: int
    in_graph: bool

    @property
    def duration(self):
        return self.frames / self.sample_rate


def _probe_wav(path, size):
    """AudioInfo of a RIFF/WAVE file from its chunks, checking the data size."""
    with open(path, "rb") as f:
        f.seek(12)  # RIFF, size, WAVE
        fmt = None
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
                return AudioInfo(rate, channels, frames, tag == 1 and bits == 16)
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
        import soundfile as sf

        try:
            sf_info = sf.info(path)
        except Exception as error:  # libsndfile's own errors vary by format
            raise BadAudioError(path, f"not a readable audio file ({error})") from None
        info = AudioInfo(sf_info.samplerate, sf_info.channels, sf_info.frames, False)
    if info.frames <= 0:
        raise BadAudioError(path, "no audio samples")
    return info


def read_audio(path: str, sample_rate: int) -> np.ndarray:
    """float32 [N] mono samples in [-1, 1] at sample_rate (numpy, soundfile)."""
    import soundfile as sf

    try:
        audio, rate = sf.read(path, dtype="float64", always_2d=True)
    except Exception as error:
        raise BadAudioError(path, f"cannot be decoded ({error})") from None
    if audio.shape[0] == 0:
        raise BadAudioError(path, "no audio samples")
    mono = audio.mean(axis=1)
    if rate != sample_rate:
        mono = resample(mono, int(rate), int(sample_rate))
    return mono.astype(np.float32)


def decode_wav(contents):
    """float32 [N] mono samples of 16-bit PCM WAV bytes, in the graph."""
    import tensorflow as tf

    audio, _ = tf.audio.decode_wav(contents)
    return tf.reduce_mean(audio, axis=1)
