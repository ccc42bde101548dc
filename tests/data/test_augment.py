# SPDX-License-Identifier: Apache-2.0
"""Waveform augmentation: what each step must keep (lengths, timing, pitch,
energy) and change, determinism under a seed, padding, and the pipeline."""

from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SpeechDataset
from tf_transducer.data import augment as A
from tf_transducer.data.corpora import manifest

RATE = 8000


def tone(hz, seconds=1.0, amplitude=0.3, rate=RATE):
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def peak_hz(x, rate=RATE):
    spectrum = np.abs(np.fft.rfft(np.asarray(x) * np.hanning(len(x)), 8 * len(x)))
    return np.argmax(spectrum) * rate / (8 * len(x))


def rms(x):
    return float(np.sqrt(np.mean(np.square(np.asarray(x, np.float64)))))


def onset(x, threshold=0.1):
    """First sample of the 10 ms envelope above threshold * its peak."""
    envelope = np.convolve(np.abs(np.asarray(x)), np.ones(80) / 80, mode="same")
    return int(np.argmax(envelope > threshold * envelope.max()))


def speed_length(n, factor):
    """Samples of speed_perturb's output."""
    return (n - 1) * Fraction(factor).limit_denominator(1000).denominator // (
        Fraction(factor).limit_denominator(1000).numerator
    ) + 1


def burst(rate=RATE):
    """1 s of silence, 0.5 s of a 300 Hz tone, 0.5 s of silence."""
    x = np.zeros(2 * rate, np.float32)
    x[rate : rate + rate // 2] = tone(300, 0.5, rate=rate)
    return x


@pytest.mark.parametrize("factor", [0.9, 1.1, 1.25])
def test_speed_perturb_scales_length_and_pitch(factor):
    x = tone(440)
    y = A.speed_perturb(x, factor).numpy()
    assert len(y) == speed_length(len(x), factor)
    assert peak_hz(y) == pytest.approx(440 * factor, abs=2)
    assert rms(y[200:-200]) == pytest.approx(rms(x), rel=0.02)


def test_speed_perturb_by_one_is_the_identity():
    x = np.random.default_rng(0).uniform(-0.5, 0.5, 1000).astype(np.float32)
    np.testing.assert_allclose(A.speed_perturb(x, 1.0), x, atol=1e-5)


def test_speeding_up_filters_what_would_alias():
    # 3.8 kHz played 1.25x faster would land above Nyquist (4 kHz): removed.
    y = A.speed_perturb(tone(3800), 1.25).numpy()
    assert rms(y[200:-200]) < 0.05 * rms(tone(3800))


@pytest.mark.parametrize("rate", [0.8, 0.9, 1.1, 1.2])
def test_time_stretch_keeps_pitch_and_energy(rate):
    x = tone(440)
    y = A.time_stretch(x, rate, RATE).numpy()
    assert len(y) == round(len(x) / rate)
    assert peak_hz(y) == pytest.approx(440, abs=2)
    assert rms(y[300:-300]) == pytest.approx(rms(x), rel=0.05)


def test_time_stretch_moves_events_with_the_tempo():
    y = A.time_stretch(burst(), 1.25, RATE).numpy()
    assert abs(onset(y) - onset(burst()) / 1.25) < 0.02 * RATE


@pytest.mark.parametrize("semitones", [-2.0, 1.5, 3.0])
def test_pitch_shift_keeps_length_and_timing(semitones):
    x = tone(440)
    y = A.pitch_shift(x, semitones, RATE).numpy()
    assert len(y) == len(x)
    assert peak_hz(y) == pytest.approx(440 * 2 ** (semitones / 12), rel=0.01)
    shifted = A.pitch_shift(burst(), semitones, RATE).numpy()
    assert abs(onset(shifted) - onset(burst())) < 0.02 * RATE


@pytest.mark.parametrize("snr", [0.0, 10.0, 25.0])
def test_add_noise_at_the_asked_snr(snr):
    x = tone(440)
    noise = A.coloured_noise(len(x), 1.0, tf.constant([1, 2])).numpy()
    y = A.add_noise(x, noise, snr).numpy()
    measured = 20 * np.log10(rms(x) / rms(y - x))
    assert measured == pytest.approx(snr, abs=0.01)
    silent = np.zeros(100, np.float32)
    np.testing.assert_array_equal(A.add_noise(silent, noise[:100], snr), silent)


def test_coloured_noise_slopes_and_seeds():
    def band_power(x, low, high):
        p = np.abs(np.fft.rfft(x)) ** 2
        hz = np.fft.rfftfreq(len(x), 1 / RATE)
        return p[(hz >= low) & (hz < high)].mean()

    seed = tf.constant([3, 4])
    for exponent, low_over_high in ((0, (0.7, 1.4)), (1, (8, 30)), (2, (100, 1e4))):
        x = A.coloured_noise(32000, exponent, seed).numpy()
        assert rms(x) == pytest.approx(1.0, rel=1e-3)
        ratio = band_power(x, 100, 200) / band_power(x, 2000, 4000)
        assert low_over_high[0] < ratio < low_over_high[1], (exponent, ratio)
    np.testing.assert_array_equal(
        A.coloured_noise(500, 1, seed), A.coloured_noise(500, 1, seed)
    )
    assert not np.array_equal(
        A.coloured_noise(500, 1, seed), A.coloured_noise(500, 1, seed + 1)
    )


def test_babble_bank_and_noise():
    rng = np.random.default_rng(0)
    talkers = [rng.normal(size=n).astype(np.float32) for n in (3000, 5000, 800)]
    bank = A.make_babble_bank(talkers, count=4, seconds=1.0, sample_rate=RATE)
    assert bank.shape == (4, RATE) and bank.dtype == np.float32
    np.testing.assert_allclose(np.sqrt((bank**2).mean(axis=1)), 1.0, rtol=1e-4)
    np.testing.assert_array_equal(
        bank, A.make_babble_bank(talkers, count=4, seconds=1.0, sample_rate=RATE)
    )
    noise = A.babble_noise(bank, 20000, tf.constant([5, 6])).numpy()
    assert noise.shape == (20000,)
    row = next(r for r in bank if np.isin(noise[:50], r).all())
    assert np.isin(noise, row).all()  # one row, repeated
    with pytest.raises(ValueError, match="audios"):
        A.make_babble_bank([np.zeros(0)])
    with pytest.raises(ValueError, match="talkers"):
        A.make_babble_bank(talkers, talkers=(3, 2))


def test_gain_and_dc_offset():
    x = tone(440)
    assert rms(A.gain(x, -6.0)) == pytest.approx(rms(x) * 10 ** (-6 / 20), rel=1e-5)
    y = A.dc_offset(x, 0.01).numpy()
    assert y.mean() == pytest.approx(x.mean() + 0.01, abs=1e-6)


def test_synthetic_rir_decays_by_60_db_in_rt60():
    rir = A.synthetic_rir(0.4, RATE, tf.constant([1, 1])).numpy()
    assert len(rir) == round(0.4 * RATE) + 1 and rir[0] == 1.0
    assert (rir[1:16] == 0).all()  # 2 ms before the tail
    early = rms(rir[16 : 16 + 400])
    late = rms(rir[-400:])
    assert 20 * np.log10(early / late) == pytest.approx(60 * 0.9, abs=6)
    short = A.synthetic_rir(2.0, RATE, tf.constant([1, 1]), max_seconds=0.5)
    assert len(short) == 0.5 * RATE + 1


def test_reverberation_keeps_length_energy_and_alignment():
    x = burst()
    y = A.reverberate(x, A.synthetic_rir(0.5, RATE, tf.constant([2, 2]))).numpy()
    assert len(y) == len(x)
    assert rms(y) == pytest.approx(rms(x), rel=1e-3)
    assert abs(onset(y) - onset(x)) < 0.01 * RATE
    tail = slice(int(1.55 * RATE), int(1.7 * RATE))  # after the tone: echoes
    assert rms(y[tail]) > 100 * rms(x[tail]) + 1e-4


def test_telephone_band():
    for hz, kept in ((100, False), (1000, True), (3800, False)):
        y = A.telephone(tone(hz), RATE, mu_law=False).numpy()
        ratio = rms(y[800:-800]) / rms(tone(hz))
        assert (ratio > 0.99) if kept else (ratio < 0.03), (hz, ratio)
    x = tone(1000, amplitude=0.5)
    coded = A.telephone(x, RATE).numpy()
    clean = A.telephone(x, RATE, mu_law=False).numpy()
    assert 20 * np.log10(rms(clean) / rms(coded - clean)) > 30  # G.711: ~38 dB
    assert np.abs(A.telephone(4 * x, RATE)).max() <= 1.0


def test_wave_augment_is_seeded_and_varies():
    often = dict(pitch_prob=0.5, tempo_prob=0.5, reverb_prob=0.5, telephone_prob=0.5)
    augment = A.WaveAugment(RATE, noise_prob=0.5, dc_prob=0.5, **often)
    x = burst()
    outputs = [augment(x, tf.constant([9, i])).numpy() for i in range(6)]
    again = [augment(x, tf.constant([9, i])).numpy() for i in range(6)]
    for a, b in zip(outputs, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len({o.tobytes() for o in outputs}) == 6
    lengths = {len(o) for o in outputs}
    # speed 0.9 / 1.0 / 1.1, then perhaps tempo 0.9 .. 1.1
    assert all(len(x) / 1.1 / 1.1 - 2 <= n <= len(x) / 0.9 / 0.9 + 2 for n in lengths)
    for o in outputs:
        assert np.isfinite(o).all() and rms(o) > 0


def test_wave_augment_in_tf_data_with_unknown_lengths():
    augment = A.WaveAugment(RATE, babble=np.ones((2, 100), np.float32))
    ds = tf.data.Dataset.from_generator(
        lambda: (tone(300, s) for s in (0.2, 0.5, 0.01)),
        output_signature=tf.TensorSpec([None], tf.float32),
    ).enumerate()
    ds = ds.map(lambda i, a: augment(a, tf.stack([tf.constant(1, tf.int64), i])))
    first = [x.numpy() for x in ds]
    second = [x.numpy() for x in ds]
    assert [len(x) for x in first] == [len(x) for x in second]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    empty = augment(np.zeros(0, np.float32), tf.constant([1, 1]))
    assert empty.shape == (0,)


def test_wave_augment_config_round_trip():
    augment = A.WaveAugment(RATE, speeds=[1.0], snr_range=[0, 10])
    config = augment.get_config()
    assert config["speeds"] == [1.0] and config["snr_range"] == [0.0, 10.0]
    assert A.WaveAugment.from_config(config) == augment


@pytest.mark.parametrize(
    "arguments, name",
    [
        (dict(sample_rate=0), "sample_rate"),
        (dict(speeds=(0.9, -1.0)), "speeds"),
        (dict(speeds=()), "speeds"),
        (dict(noise_prob=1.5), "noise_prob"),
        (dict(reverb_prob="often"), "reverb_prob"),
        (dict(tempo_range=(1.1, 0.9)), "tempo_range"),
        (dict(rt60_range=(0.0, 0.5)), "rt60_range"),
        (dict(snr_range=(5.0,)), "snr_range"),
        (dict(gain_db=-1.0), "gain_db"),
        (dict(babble=np.ones(5)), "babble"),
    ],
)
def test_wave_augment_bad_arguments_are_named(arguments, name):
    arguments = {"sample_rate": RATE, **arguments}
    with pytest.raises(ValueError, match=name):
        A.WaveAugment(**arguments)


def test_bad_signals_and_factors_are_named():
    with pytest.raises(ValueError, match="audio"):
        A.speed_perturb(np.zeros((2, 10), np.float32), 1.1)
    with pytest.raises(ValueError, match="audio"):
        A.gain(np.zeros(10, np.int16), 1.0)
    with pytest.raises(ValueError, match="factor"):
        A.speed_perturb(tone(100), 0.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="rate"):
        A.time_stretch(tone(100), tf.constant(-1.0), RATE)
    with pytest.raises(ValueError, match="low_hz"):
        A.telephone(tone(100), RATE, low_hz=3000, high_hz=300)


def test_augment_batch_leaves_padding_alone():
    augment = A.WaveAugment(RATE, noise_prob=1.0, dc_prob=1.0)
    x = np.zeros((3, 4000), np.float32)
    lengths = [4000, 2500, 1]
    for row, n in zip(x, lengths, strict=True):
        row[:n] = tone(200, n / RATE)
    seed = tf.constant([4, 2])
    out, out_lengths = A.augment_batch(augment, x, lengths, seed)
    out, out_lengths = out.numpy(), out_lengths.numpy()
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
    for b, n in enumerate(lengths):
        one = augment(x[b, :n], seeds[b]).numpy()
        assert out_lengths[b] == len(one)
        np.testing.assert_array_equal(out[b, : len(one)], one)
        assert (out[b, len(one) :] == 0).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths"):
        A.augment_batch(augment, x, [4001, 1, 1], seed)


def test_speech_dataset_augments_reproducibly_in_its_buckets():
    alphabet = CharacterAlphabet.english()
    data = SpeechDataset(manifest("digits_dev"), alphabet, sample_rate=RATE)
    augment = A.WaveAugment(RATE, noise_prob=1.0, tempo_prob=0.0)

    def batches(seed, augment):
        ds = data.dataset(8, seed=seed, bucket_boundaries="auto", augment=augment)
        return list(ds.as_numpy_iterator())

    plain, first, again = batches(3, None), batches(3, augment), batches(3, augment)
    assert len(first) == len(plain) == data.num_batches(8, "auto")
    lengths = dict(zip(*[np.concatenate([b[k] for b in plain]) for k in
                         ("index", "audio_length")], strict=True))  # fmt: skip
    changed = 0
    for a, b, p in zip(first, again, plain, strict=True):
        np.testing.assert_array_equal(a["audio"], b["audio"])
        np.testing.assert_array_equal(a["index"], p["index"])  # same order
        np.testing.assert_array_equal(a["labels"], p["labels"])
        for index, n in zip(a["index"], a["audio_length"], strict=True):
            source = lengths[index]
            speeds = {speed_length(source, s) for s in (0.9, 1.1)}
            assert n in speeds | {source}
            changed += n != source
    assert changed > 0
    other = batches(4, augment)
    assert any(
        not np.array_equal(np.sort(a["index"]), np.sort(b["index"]))
        or not np.array_equal(a["audio"], b["audio"])
        for a, b in zip(other, first, strict=True)
    )
    with pytest.raises(ValueError, match="augment"):
        data.dataset(8, augment=augment, cache="/tmp/x")
    with pytest.raises(ValueError, match="augment"):
        data.dataset(8, augment="speed")


def test_speed_perturb_by_a_tensor_matches_the_rational_path():
    x = np.random.default_rng(1).uniform(-0.5, 0.5, 3000).astype(np.float32)
    exact = A.speed_perturb(x, 1.1).numpy()
    general = A.speed_perturb(x, tf.constant(1.1)).numpy()
    n = min(len(exact), len(general))
    assert abs(len(exact) - len(general)) <= 1
    np.testing.assert_allclose(general[:n], exact[:n], atol=2e-4)
