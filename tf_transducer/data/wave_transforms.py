# SPDX-License-Identifier: Apache-2.0
"""The waveform transforms of `WaveAugment`, each usable on its own.

Every function takes one utterance, `audio` [N] float32 (any N, None
included), and is made of TensorFlow ops, so it runs inside `tf.data` maps
and `tf.function`s (time_stretch's sequential search is a numpy loop in a
`tf.numpy_function`: not for SavedModels or TFLite). Randomness is
stateless: a `seed` is a [2] int tensor, and the same seed gives the same
output on every run.

Lengths: `speed_perturb` and `time_stretch` change the length (N / factor);
everything else keeps it, and keeps the speech where it was (reverberation
puts the direct path first), so transcripts stay aligned.
"""

import fractions
import functools
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike

_LN_1000 = math.log(1000.0)  # 60 dB of amplitude decay
PITCH_STEPS = 4  # WaveAugment's pitch shifts each way


def audio_tensor(audio, name="audio"):
    """audio as a float32 tensor [N]; ValueError naming `name` otherwise."""
    audio = tf.convert_to_tensor(audio)
    if audio.dtype != tf.float32:
        raise ValueError(f"{name} must be float32, got {audio.dtype.name}")
    if audio.shape.rank is not None and audio.shape.rank != 1:
        raise ValueError(f"{name} must be 1-D [samples], got shape {audio.shape}")
    return audio


def _positive(value, name):
    if not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _positive_factor(value, name):
    """A python number is checked now, a tensor when it runs."""
    if isinstance(value, (int, float, np.number)):
        _positive(float(value), name)
        return tf.constant(value, tf.float32)
    value = tf.cast(value, tf.float32)
    if value.shape.rank not in (None, 0):
        raise ValueError(f"{name} must be a scalar, got shape {value.shape}")
    tf.debugging.assert_positive(value, message=f"{name} must be > 0")
    tf.debugging.assert_all_finite(value, message=f"{name} must be finite")
    return value


def _sinc_resample(audio, step, taps):
    """Samples at positions 0, step, 2 step, ... of `audio`.

    Band-limited interpolation: Hann-windowed sinc, cut off at min(1, 1/step)
    of Nyquist.
    """
    n = tf.shape(audio)[0]
    step = tf.cast(step, tf.float64)
    count = tf.cast(tf.math.floor(tf.cast(n - 1, tf.float64) / step), tf.int32) + 1
    count = tf.where(n > 0, count, 0)
    where = tf.range(count, dtype=tf.float64) * step  # exact to 1e-9 sample
    base = tf.cast(tf.math.floor(where), tf.int32)
    fraction = tf.cast(where - tf.cast(base, tf.float64), tf.float32)
    offsets = tf.range(-taps + 1, taps + 1)
    # distance [M, 2 taps] from each output position to its input samples
    distance = fraction[:, None] - tf.cast(offsets, tf.float32)[None, :]
    cutoff = tf.cast(tf.minimum(tf.constant(1.0, tf.float64), 1.0 / step), tf.float32)
    values = tf.gather(tf.pad(audio, [[taps, taps]]), base[:, None] + offsets + taps)
    return tf.reduce_sum(values * _kernel(distance, cutoff, taps), axis=1)


def _kernel(distance, cutoff, taps):
    """Hann-windowed sinc at `distance` samples (numpy or TF float32)."""
    lib = np if isinstance(distance, np.ndarray) else tf.math
    window = 0.5 + 0.5 * lib.cos((math.pi / taps) * distance)
    x = (math.pi * cutoff) * distance
    small = abs(x) < 1e-6 if lib is np else tf.abs(x) < 1e-6
    safe = lib.where(small, 1.0, x) if lib is np else tf.where(small, 1.0, x)
    sinc = lib.sin(safe) / safe
    sinc = np.where(small, 1.0, sinc) if lib is np else tf.where(small, 1.0, sinc)
    return cutoff * sinc * window


@functools.lru_cache(maxsize=64)
def _polyphase_matrix(up, down, taps):
    """[down + 2 taps, up] float32 polyphase kernels (once per ratio; read-only).

    Column k is the kernel of output phase k, shifted by (k * down) // up.
    """
    cutoff = min(1.0, 1.0 / (down / up))
    offsets = np.arange(-taps + 1, taps + 1)
    phases = np.arange(up)[:, None] / up - offsets[None, :]
    table = _kernel(phases, cutoff, taps).astype(np.float32)  # [up, 2 taps]
    kernels = np.zeros([down + 2 * taps, up], np.float32)
    for k in range(up):
        shift = (k * down) // up + 1  # offsets[0] + taps = 1
        kernels[shift : shift + 2 * taps, k] = table[(k * down) % up]
    kernels.setflags(write=False)
    return kernels


def _rational_resample(audio, up, down, taps):
    """`_sinc_resample` at step down / up (integers), polyphase.

    Output j = b * up + k reads the input near b * down + k * down / up, so block b
    of `up` outputs is frame b of the input (hop `down`) times a [width, up]
    matrix whose column k is phase k's kernel, shifted by (k * down) // up.
    (One matmul: about 5x faster on the CPU than the same filter as a
    strided conv1d with `up` output channels.)
    """
    kernels = _polyphase_matrix(up, down, taps)
    width = kernels.shape[0]
    n = tf.cast(tf.shape(audio)[0], tf.int64)
    count = tf.where(n > 0, (n - 1) * up // down + 1, 0)
    blocks = (count + up - 1) // up
    length = tf.cast(tf.maximum(blocks - 1, 0) * down + width, tf.int32)
    tail = tf.maximum(0, length - taps - tf.shape(audio)[0])
    padded = tf.pad(audio, [[taps, tail]])[:length]
    out = tf.matmul(tf.signal.frame(padded, width, down), kernels)  # [blocks, up]
    return tf.reshape(out, [-1])[:count]


def speed_perturb(audio: TensorLike, factor: TensorLike, taps: int = 16) -> tf.Tensor:
    """Plays `audio` `factor` times faster, Kaldi style (sox `speed`).

    Tempo and pitch both scale by factor.

    Args:
      audio: [N] float32.
      factor: > 0 (Kaldi uses 0.9, 1.0, 1.1); a float or scalar tensor.
        A float that is a ratio of integers up to 1000 (0.9 = 9 / 10) is
        resampled exactly, with kernels computed once (faster).
      taps: half-width of the interpolation kernel, in input samples.

    Returns:
      [floor((N - 1) / factor) + 1] float32 (0 samples for empty audio).
    """
    audio = audio_tensor(audio)
    if isinstance(factor, (int, float, np.number)):
        _positive(float(factor), "factor")
        ratio = fractions.Fraction(float(factor)).limit_denominator(1000)
        if abs(float(ratio) - float(factor)) < 1e-12:
            return _rational_resample(audio, ratio.denominator, ratio.numerator, taps)
    factor = _positive_factor(factor, "factor")
    return _sinc_resample(audio, factor, taps)


def _hann(length):
    return tf.signal.hann_window(length, periodic=True, dtype=tf.float32)


def _wsola_starts(padded, nominal, hop, length, search):
    """Where each frame starts: within +-search of nominal.

    Each starts where it best continues (cross-correlation) the frame chosen
    before it.
    """
    starts = np.array(nominal, np.int32)
    if not len(starts):
        return starts
    lags = np.arange(2 * search + 1)
    for k in range(1, len(starts)):
        template = padded[starts[k - 1] + hop : starts[k - 1] + hop + length]
        low = nominal[k] - search
        region = padded[low : low + 2 * search + length]
        score = np.correlate(region, template, mode="valid")
        starts[k] = low + lags[int(np.argmax(score))]
    return starts


def time_stretch(
    audio: TensorLike,
    rate: TensorLike,
    sample_rate: float,
    frame_seconds: float = 0.03,
    tolerance: float = 0.5,
) -> tf.Tensor:
    """Changes the tempo by `rate` and keeps the pitch (WSOLA).

    WSOLA: Verhelst and Roelands, 1993. Hann frames are written every hop
    samples; each is read near rate * its output position, at the offset
    (within tolerance * hop) where it best continues the frame before it
    (cross-correlation), so the waveform stays continuous and periodic sounds
    keep their period.

    Args:
      audio: [N] float32.
      rate: > 0; above 1 is faster.
      sample_rate: Hz of audio.
      frame_seconds: frame length (twice the hop).
      tolerance: the search range, as a fraction of the hop.

    Returns:
      [round(N / rate)] float32.
    """
    audio = audio_tensor(audio)
    rate = _positive_factor(rate, "rate")
    _positive(sample_rate, "sample_rate")
    hop = max(1, int(round(frame_seconds * sample_rate / 2)))
    length, search = 2 * hop, int(round(tolerance * hop))
    n = tf.shape(audio)[0]
    out_length = tf.cast(tf.round(tf.cast(n, tf.float32) / rate), tf.int32)
    count = out_length // hop + 2
    nominal = tf.cast(
        tf.round(tf.range(count, dtype=tf.float32) * hop * rate), tf.int32
    )
    # padded[i + lead] = audio[i]; frame k starts near nominal[k] (centred
    # on audio[nominal[k]]) and may read up to search + 2 frames further.
    lead = search + hop
    tail = tf.maximum(0, nominal[-1] + search + 2 * length + hop - n)
    padded = tf.pad(audio, [[lead, tail]])
    start = nominal + (lead - hop)

    # The search is sequential (each frame continues the one chosen before
    # it): a numpy loop, far faster than a graph loop of small ops.
    starts = tf.numpy_function(
        functools.partial(_wsola_starts, hop=hop, length=length, search=search),
        [padded, start],
        tf.int32,
        stateful=False,
    )
    starts = tf.reshape(starts, [count])
    frames = tf.gather(padded, starts[:, None] + tf.range(length)[None, :])
    window = _hann(length)
    stretched = tf.signal.overlap_and_add(frames * window, hop)
    norm = tf.signal.overlap_and_add(tf.tile(window[None, :], [count, 1]), hop)
    stretched = (stretched / tf.maximum(norm, 1e-3))[hop:]
    missing = tf.maximum(0, out_length - tf.shape(stretched)[0])
    return tf.pad(stretched, [[0, missing]])[:out_length]


def pitch_shift(
    audio: TensorLike, semitones: TensorLike, sample_rate: float
) -> tf.Tensor:
    """Raises the pitch by `semitones` (negative lowers it), keeping length and timing.

    `speed_perturb` by 2^(semitones/12), then `time_stretch` back.

    Returns:
      [N] float32.
    """
    audio = audio_tensor(audio)
    _positive(sample_rate, "sample_rate")
    if isinstance(semitones, (int, float, np.number)):
        # A ratio of small integers (within 0.003 semitones): the fast path.
        ratio = fractions.Fraction(2 ** (float(semitones) / 12)).limit_denominator(100)
        factor = float(ratio)
    else:
        factor = tf.pow(2.0, tf.cast(semitones, tf.float32) / 12.0)
    faster = speed_perturb(audio, factor)
    back = time_stretch(faster, 1.0 / factor, sample_rate)
    n = tf.shape(audio)[0]
    back = tf.pad(back, [[0, tf.maximum(0, n - tf.shape(back)[0])]])
    return back[:n]


def add_noise(audio: TensorLike, noise: TensorLike, snr_db: TensorLike) -> tf.Tensor:
    """audio + noise scaled so that the ratio of their mean powers is snr_db.

    Args:
      audio: [N] float32.
      noise: [N] float32 (see `coloured_noise`, `babble_noise`).
      snr_db: dB, scalar.

    Returns:
      [N] float32; audio unchanged where either is silent throughout.
    """
    audio, noise = audio_tensor(audio), audio_tensor(noise, "noise")
    speech = tf.reduce_mean(tf.square(audio))
    power = tf.reduce_mean(tf.square(noise))
    wanted = speech / tf.pow(10.0, tf.cast(snr_db, tf.float32) / 10.0)
    scale = tf.where(
        (power > 0) & (speech > 0), tf.sqrt(wanted / tf.maximum(power, 1e-30)), 0.0
    )
    return audio + scale * noise


def coloured_noise(
    length: TensorLike, exponent: TensorLike, seed: TensorLike
) -> tf.Tensor:
    """Gaussian noise whose power falls as 1 / f^exponent: 0 white, 1 pink, 2 brown.

    Returns:
      [length] float32 of unit mean power.
    """
    white = tf.random.stateless_normal([length], seed)
    if isinstance(exponent, (int, float)) and exponent == 0:
        return white
    size = tf.maximum(length, 2)
    size = size + size % 2
    spectrum = tf.signal.rfft(tf.pad(white, [[0, size - length]]), [size])
    bins = tf.cast(tf.range(size // 2 + 1), tf.float32)
    gain = tf.pow(tf.maximum(bins, 1.0), -tf.cast(exponent, tf.float32) / 2.0)
    gain = tf.concat([[0.0], gain[1:]], 0)  # no DC
    shaped = tf.signal.irfft(spectrum * tf.cast(gain, tf.complex64), [size])[:length]
    return shaped / tf.sqrt(tf.maximum(tf.reduce_mean(tf.square(shaped)), 1e-30))


def babble_noise(bank: TensorLike, length: TensorLike, seed: TensorLike) -> tf.Tensor:
    """[length] float32 of babble from a bank that `make_babble_bank` made.

    A random row of `bank` [K, S] from a random start, repeated as needed.
    """
    bank = tf.convert_to_tensor(bank, tf.float32)
    k, s = tf.shape(bank)[0], tf.shape(bank)[1]
    picks = tf.random.stateless_uniform([2], seed, 0, 2**30, dtype=tf.int32)
    row = bank[picks[0] % k]
    start = picks[1] % s
    index = (start + tf.range(length)) % s
    return tf.gather(row, index)


def make_babble_bank(
    audios: Sequence[np.ndarray], count: int = 16, seconds: float = 4.0,
    talkers: tuple[int, int] = (3, 6), sample_rate: int = 8000, seed: int = 0,
) -> np.ndarray:  # fmt: skip
    """Babble made of other utterances, as a numpy array [count, samples].

    Each row sums `talkers` (a (min, max) range) utterances picked at random,
    each at its own unit power and from a random start, repeated to fill
    `seconds`.

    Args:
      audios: a list of [n] float arrays (other utterances of the corpus).
      count: rows of the bank.
      seconds: the length of each row.
      talkers: (min, max) utterances summed in a row.
      sample_rate: Hz of audios.
      seed: of the numpy random generator.

    Returns:
      float32 [count, round(seconds * sample_rate)], each row of unit power.
    """
    audios = [np.asarray(a, np.float64) for a in audios if len(a) > 0]
    if not audios:
        raise ValueError("audios: give at least one non-empty utterance")
    low, high = talkers
    if not 1 <= low <= high:
        raise ValueError(
            f"talkers must be (min, max) with 1 <= min <= max, got {talkers}"
        )
    samples = int(round(seconds * sample_rate))
    rng = np.random.default_rng(seed)
    bank = np.zeros([count, samples])
    for row in bank:
        for _ in range(rng.integers(low, high + 1)):
            a = audios[rng.integers(len(audios))]
            a = a / max(np.sqrt(np.mean(a**2)), 1e-12)
            row += np.roll(np.resize(a, samples), rng.integers(samples))
        row /= max(np.sqrt(np.mean(row**2)), 1e-12)
    return bank.astype(np.float32)


def gain(audio: TensorLike, db: TensorLike) -> tf.Tensor:
    """audio * 10^(db / 20)."""
    return audio_tensor(audio) * tf.pow(10.0, tf.cast(db, tf.float32) / 20.0)


def dc_offset(audio: TensorLike, offset: TensorLike) -> tf.Tensor:
    """audio + offset (a constant, as a bad microphone input adds)."""
    return audio_tensor(audio) + tf.cast(offset, tf.float32)


def synthetic_rir(
    rt60: TensorLike, sample_rate: float, seed: TensorLike, max_seconds: float = 0.6
) -> tf.Tensor:
    """A synthetic room impulse response: a direct path, then a decaying tail.

    The direct path is 1.0 at sample 0; then comes Gaussian noise decaying by
    60 dB in rt60 seconds (the reverberant tail, starting after 2 ms), cut at
    min(rt60, max_seconds).

    Returns:
      [taps] float32 with taps = round(min(rt60, max_seconds) * sample_rate) + 1.
    """
    rt60 = tf.cast(rt60, tf.float32)
    taps = tf.cast(tf.round(tf.minimum(rt60, max_seconds) * sample_rate), tf.int32) + 1
    t = tf.range(taps, dtype=tf.float32) / sample_rate
    tail = tf.random.stateless_normal([taps], seed) * tf.exp(-_LN_1000 * t / rt60)
    # Diffuse energy comparable to the direct path's, not 0 at first.
    tail = tf.where(t >= 0.002, tail * tf.sqrt(3.0 / (rt60 * sample_rate)), 0.0)
    return tf.concat([[1.0], tail[1:]], 0)


def reverberate(audio: TensorLike, rir: TensorLike) -> tf.Tensor:
    """audio convolved with rir [taps] (FFT), cut to N samples, at audio's power.

    It is scaled to audio's mean power; the direct path stays where the speech
    was.
    """
    audio, rir = audio_tensor(audio), audio_tensor(rir, "rir")
    n, taps = tf.shape(audio)[0], tf.shape(rir)[0]
    size = tf.cast(
        2 ** tf.math.ceil(tf.math.log(tf.cast(n + taps, tf.float32)) / math.log(2.0)),
        tf.int32,
    )
    wet = tf.signal.irfft(
        tf.signal.rfft(audio, [size]) * tf.signal.rfft(rir, [size]), [size]
    )[:n]
    dry_power = tf.reduce_mean(tf.square(audio))
    wet_power = tf.reduce_mean(tf.square(wet))
    scale = tf.where(
        wet_power > 0, tf.sqrt(dry_power / tf.maximum(wet_power, 1e-30)), 1.0
    )
    return wet * scale


def telephone(
    audio: TensorLike,
    sample_rate: float,
    low_hz: float = 300.0,
    high_hz: float = 3400.0,
    mu_law: bool = True,
) -> tf.Tensor:
    """A telephone channel: band-pass low_hz..high_hz, then mu-law coding.

    The band-pass has 100 Hz raised-cosine edges and zero phase; the coding
    is 8-bit mu-law (G.711), when mu_law.

    Returns:
      [N] float32 (clipped to [-1, 1] when mu_law).
    """
    audio = audio_tensor(audio)
    _positive(sample_rate, "sample_rate")
    if not 0 <= low_hz < high_hz:
        raise ValueError(f"need 0 <= low_hz < high_hz, got {low_hz}, {high_hz}")
    n = tf.shape(audio)[0]
    size = tf.maximum(n, 2)
    size = size + size % 2
    spectrum = tf.signal.rfft(audio, [size])
    hz = tf.cast(tf.range(size // 2 + 1), tf.float32) * (
        sample_rate / tf.cast(size, tf.float32)
    )
    edge = 100.0

    def ramp(x):  # 0 below -edge/2, 1 above edge/2, raised cosine between
        x = tf.clip_by_value(x / edge + 0.5, 0.0, 1.0)
        return 0.5 - 0.5 * tf.cos(math.pi * x)

    mask = ramp(hz - low_hz) * ramp(high_hz - hz)
    out = tf.signal.irfft(spectrum * tf.cast(mask, tf.complex64), [size])[:n]
    if mu_law:
        mu = 255.0
        x = tf.clip_by_value(out, -1.0, 1.0)
        coded = tf.sign(x) * tf.math.log1p(mu * tf.abs(x)) / math.log1p(mu)
        coded = tf.round((coded + 1.0) * 127.5) / 127.5 - 1.0
        out = tf.sign(coded) * (tf.pow(1.0 + mu, tf.abs(coded)) - 1.0) / mu
    return out
