# SPDX-License-Identifier: Apache-2.0
"""SpeechDataset on the bundled corpora: shapes, lengths, features, order, bad items."""

import csv
import os
import shutil

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SpeechDataset
from tf_transducer.data.corpora import manifest
from tf_transducer.layers import LogMelSpectrogram

ALPHABET = CharacterAlphabet.english()


def transcripts_of(name):
    with open(manifest(name)) as f:
        return [row["transcript"] for row in csv.DictReader(f)]


@pytest.mark.parametrize("name", ["librivox", "librivox_jsonl"])
def test_real_clips_in_batches(name):
    features = LogMelSpectrogram(n_mels=80)
    data = SpeechDataset(manifest(name), ALPHABET, features=features)
    assert len(data) == 5
    np.testing.assert_allclose(sum(data.durations), 24.73, atol=0.01)
    seen = {}
    for batch in data.dataset(2, shuffle=False):
        B, T, F = batch["features"].shape
        assert F == 80 and B <= 2
        assert T == max(batch["feature_length"])
        assert np.all(np.isfinite(batch["features"].numpy()))
        for b in range(B):
            n = batch["feature_length"][b]
            # 25 ms frames every 10 ms of the clip's own samples.
            assert n == 1 + (batch["audio_length"][b] - 400) // 160
            assert np.all(batch["features"][b, n:].numpy() == 0)
            labels = batch["labels"][b].numpy()
            k = batch["label_length"][b]
            assert np.all(labels[k:] == -1)
            seen[int(batch["index"][b])] = ALPHABET.decode(labels[:k])
    assert [seen[i] for i in range(5)] == transcripts_of("librivox")


def test_features_do_not_depend_on_batch_padding():
    features = LogMelSpectrogram(n_mels=40)
    data = SpeechDataset(manifest("librivox"), ALPHABET, features=features)
    alone = {}
    for batch in data.dataset(1, shuffle=False):
        alone[int(batch["index"][0])] = batch["features"][0].numpy()
    for batch in data.dataset(5, shuffle=False):  # padded to the longest clip
        for b in range(5):
            n = batch["feature_length"][b]
            want = alone[int(batch["index"][b])]
            np.testing.assert_allclose(batch["features"][b, :n], want, atol=1e-5)


def test_audio_batches_flac_and_resampling():
    # The digits are 8 kHz FLAC: decoded with soundfile, resampled to 16 kHz.
    data = SpeechDataset(manifest("digits_dev"), ALPHABET, sample_rate=16000)
    batch = next(iter(data.dataset(4, shuffle=False)))
    info = sf.info(data._paths[0])
    assert info.samplerate == 8000
    assert batch["audio_length"][0] == int(np.ceil(info.frames * 2))
    assert batch["audio"].shape == (4, max(batch["audio_length"]))
    assert np.max(np.abs(batch["audio"].numpy())) <= 1.2


def test_stereo_wav_is_decoded_in_the_graph_and_downmixed(tmp_path):
    rng = np.random.default_rng(9)
    left, right = rng.uniform(-0.5, 0.5, size=(2, 8000))
    sf.write(tmp_path / "stereo.wav", np.stack([left, right], 1), 16000, "PCM_16")
    (tmp_path / "m.csv").write_text("wav_filename,transcript\nstereo.wav,ok\n")
    data = SpeechDataset(str(tmp_path / "m.csv"), ALPHABET)
    assert data._in_graph == [True]
    batch = next(iter(data.dataset(1)))
    pcm, _ = sf.read(tmp_path / "stereo.wav", dtype="float64")  # [N, 2]
    np.testing.assert_allclose(batch["audio"][0], pcm.mean(1), atol=1e-6)


def test_global_normalization_adapts_to_a_speech_dataset():
    from tf_transducer.layers import FeatureNormalization

    features = LogMelSpectrogram(n_mels=20)
    data = SpeechDataset(manifest("librivox"), ALPHABET, features=features)
    layer = FeatureNormalization("global")
    layer.adapt(data.dataset(2, shuffle=False))
    frames = np.concatenate(
        [b["features"][0, : b["feature_length"][0]] for b in data.dataset(1)]
    )
    np.testing.assert_allclose(layer.mean, frames.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.variance, frames.var(0), rtol=1e-3)


def indices(ds):
    return [i for batch in ds for i in batch["index"].numpy().tolist()]


def test_seeded_order_is_deterministic_and_reshuffles():
    data = SpeechDataset(manifest("digits_dev"), ALPHABET, sample_rate=8000)
    ds = data.dataset(8, seed=7, bucket_boundaries="auto")
    first, second = indices(ds), indices(ds)
    assert sorted(first) == list(range(len(data)))
    assert first != second  # a new order each epoch
    again = data.dataset(8, seed=7, bucket_boundaries="auto")
    assert [indices(again), indices(again)] == [first, second]
    assert indices(data.dataset(8, seed=8)) != first


def test_epochs_pipeline_is_each_epoch_alone_and_resumable():
    data = SpeechDataset(manifest("digits_dev"), ALPHABET, sample_rate=8000)
    per_epoch = data.num_batches(8, "auto")
    three = data.epochs(8, 7, 2, 5, per_epoch, bucket_boundaries="auto")
    got = [batch["index"].numpy().tolist() for batch in three]
    assert len(got) == 3 * per_epoch
    epochs = [sum(got[k * per_epoch : (k + 1) * per_epoch], []) for k in range(3)]
    for k, epoch in enumerate(epochs):
        assert sorted(epoch) == list(range(len(data)))  # each item once
        # What a run resumed at this epoch sees.
        alone = data.epochs(8, 7, 2 + k, 3 + k, per_epoch, bucket_boundaries="auto")
        assert indices(alone) == epoch
    assert epochs[0] != epochs[1] != epochs[2]
    assert indices(data.epochs(8, 8, 2, 3, per_epoch)) != epochs[0]
    # A fixed number of batches per epoch: the first ones again, or fewer.
    assert len(list(data.epochs(8, 7, 0, 2, per_epoch + 2))) == 2 * (per_epoch + 2)
    assert len(list(data.epochs(8, 7, 0, 2, 1))) == 2


def test_epochs_pipeline_augments_each_epoch_differently():
    data = SpeechDataset(manifest("digits_dev"), ALPHABET, sample_rate=8000)

    def seed_as_audio(audio, seed):  # seed [s, i] -> audio of s
        return tf.fill(tf.shape(audio), tf.cast(seed[0], tf.float32))

    def offsets(first, end):
        batches = data.epochs(4, 3, first, end, 1, augment=seed_as_audio)
        return [float(b["audio"][0, 0]) for b in batches]

    both = offsets(5, 7)
    assert both == offsets(5, 6) + offsets(6, 7)
    assert both[0] != both[1]


def test_buckets_group_similar_durations():
    data = SpeechDataset(manifest("digits_train"), ALPHABET, sample_rate=8000)
    padded = {}
    for boundaries in (None, [1.5, 1.8, 2.1, 2.4, 2.8, 3.2]):
        total = real = 0
        for batch in data.dataset(8, seed=0, bucket_boundaries=boundaries):
            total += batch["audio"].shape[0] * batch["audio"].shape[1]
            real += int(tf.reduce_sum(batch["audio_length"]))
        padded[boundaries is None] = total / real
    assert padded[False] < padded[True]  # less padding with buckets
    assert padded[False] < 1.15


def test_cache_gives_the_same_features(tmp_path):
    features = LogMelSpectrogram(sample_rate=8000, n_mels=20)
    data = SpeechDataset(manifest("digits_test"), ALPHABET, 8000, features=features)
    plain = data.dataset(6, shuffle=False)
    cached = data.dataset(6, shuffle=False, cache=str(tmp_path / "cache"))
    for _ in range(2):  # the second epoch reads the cache
        for a, b in zip(plain, cached, strict=True):
            np.testing.assert_array_equal(a["features"], b["features"])
    assert any(p.name.startswith("cache") for p in tmp_path.iterdir())


def test_length_limits_filter_and_count():
    # Durations 7.10, 2.99, 5.30, 6.05, 3.29 s with 115, 36, 73, 96, 44 labels.
    data = SpeechDataset(manifest("librivox"), ALPHABET, max_duration=5.0)
    assert (len(data), data.filtered) == (2, 3)
    data = SpeechDataset(
        manifest("librivox"), ALPHABET, max_duration=5.0, max_label_length=40
    )
    assert (len(data), data.filtered) == (1, 4)


@pytest.fixture
def bad_corpus(tmp_path):
    """Two good clips and one of each kind of bad item, in a CSV manifest."""
    source = os.path.dirname(manifest("librivox"))
    good = sorted(f for f in os.listdir(source) if f.endswith(".wav"))[:2]
    rows = []
    for name in good:
        shutil.copy(os.path.join(source, name), tmp_path / name)
        rows.append((name, "he was not an ill disposed young man"))
    (tmp_path / "empty.wav").write_bytes(b"")
    whole = (tmp_path / good[0]).read_bytes()
    (tmp_path / "truncated.wav").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "text.wav").write_text("not audio at all")
    rows += [
        ("empty.wav", "a"),
        ("truncated.wav", "a"),
        ("text.wav", "a"),
        ("missing.wav", "a"),
        (good[0], ""),
        (good[1], "caf\u00e9"),
    ]
    path = tmp_path / "manifest.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["wav_filename", "wav_filesize", "transcript"])
        writer.writerows((name, 0, text) for name, text in rows)
    return str(path)


@pytest.mark.parametrize(
    "line,message",
    [
        (4, "empty.wav: empty file"),
        (5, "truncated.wav: truncated WAV: the data chunk declares"),
        (6, "text.wav: not a readable audio file"),
        (7, "missing.wav: cannot be read"),
        (8, "empty transcript"),
        (9, "character 'é' at position 3 of 'café' is not in the alphabet"),
    ],
)
def test_each_bad_item_is_an_error_naming_it(bad_corpus, line, message):
    # Only the lines up to the bad one: the first error is that line's.
    with open(bad_corpus) as f:
        rows = f.read().splitlines()
    with open(bad_corpus, "w") as f:
        f.write("\n".join(rows[:3] + [rows[line - 1]]) + "\n")
    with pytest.raises(ValueError, match=f"manifest.csv:4: .*{message}"):
        SpeechDataset(bad_corpus, ALPHABET)


def test_skip_bad_drops_counts_and_reports(bad_corpus, tmp_path):
    data = SpeechDataset(bad_corpus, ALPHABET, skip_bad=True)
    assert len(data) == 2
    reasons = sorted(reason.split(" (")[0] for _, reason in data.skipped)
    assert len(reasons) == 6 and "empty file" in reasons
    # A FLAC copy that disappears after the check fails at decode time.
    flac = tmp_path / "late.flac"
    audio, rate = sf.read(data._paths[0])
    sf.write(flac, audio, rate)
    late = SpeechDataset(
        [*_utterances(data), _utterance(str(flac))], ALPHABET, skip_bad=True
    )
    flac.unlink()
    batches = list(late.dataset(8, shuffle=False))
    assert sum(int(b["index"].shape[0]) for b in batches) == 2
    (report,) = late.epoch_reports
    assert report["skipped"] == 1
    assert report["failed_to_decode"][0][0] == str(flac)
    list(late.dataset(8, shuffle=False))
    assert len(late.epoch_reports) == 2  # one per epoch


def _utterance(path):
    from tf_transducer.data import Utterance

    return Utterance(path, "he was not an ill disposed young man")


def _utterances(data):
    return [_utterance(p) for p in data._paths]


def test_bad_arguments():
    with pytest.raises(FileNotFoundError, match="manifest 'nope.csv' does not exist"):
        SpeechDataset("nope.csv", ALPHABET)
    data = SpeechDataset(manifest("librivox"), ALPHABET)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        data.dataset(0)
    with pytest.raises(ValueError, match="bucket_boundaries must be increasing"):
        data.dataset(2, bucket_boundaries=[2.0, 1.0])
    for args, message in [
        ((0, 1, 0, 1, 1), "batch_size must be a positive int"),
        ((2, 1.5, 0, 1, 1), "seed must be an int"),
        ((2, 1, -1, 1, 1), "first_epoch must be an int >= 0"),
        ((2, 1, 3, 3, 1), "end_epoch must be above first_epoch 3"),
        ((2, 1, 0, 1, 0), "batches_per_epoch must be a positive int"),
    ]:
        with pytest.raises(ValueError, match=message):
            data.epochs(*args)
    with pytest.raises(ValueError, match="augment must be a callable"):
        data.epochs(2, 1, 0, 1, 1, augment="loud")
    with pytest.raises(ValueError, match="sample_rate must be a positive int"):
        SpeechDataset(manifest("librivox"), ALPHABET, sample_rate=16000.0)


@pytest.mark.parametrize("container", ["WAV", "WAVEX"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_float_wav_with_nan_or_inf_samples_is_a_bad_item(tmp_path, container, bad):
    rng = np.random.default_rng(0)
    audio = rng.uniform(-0.5, 0.5, 8000)
    sf.write(tmp_path / "good.wav", audio, 16000, subtype="FLOAT", format=container)
    audio[1234] = bad
    sf.write(tmp_path / "bad.wav", audio, 16000, subtype="FLOAT", format=container)
    with open(tmp_path / "m.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["wav_filename", "wav_filesize", "transcript"])
        writer.writerows([("good.wav", 0, "a"), ("bad.wav", 0, "b")])
    manifest_path = str(tmp_path / "m.csv")
    with pytest.raises(
        ValueError, match=r"m.csv:3: .*bad.wav: samples that are NaN or infinite"
    ):
        SpeechDataset(manifest_path, ALPHABET)
    data = SpeechDataset(manifest_path, ALPHABET, skip_bad=True)
    assert data.paths == [str(tmp_path / "good.wav")]
    assert data.skipped == [
        (str(tmp_path / "bad.wav"), "samples that are NaN or infinite")
    ]
    (batch,) = data.dataset(4, shuffle=False)
    assert batch["index"].numpy().tolist() == [0]
    assert np.isfinite(batch["audio"].numpy()).all()


def test_bad_arguments_are_named_before_any_work():
    path = manifest("librivox")
    for kwargs, message in [
        (dict(sample_rate=True), "sample_rate must be a positive int, got True"),
        (dict(max_duration="5"), "max_duration must be a positive number or None"),
        (dict(max_duration=float("nan")), "max_duration must be a positive number"),
        (dict(max_duration=-1.0), "max_duration must be a positive number"),
        (dict(max_label_length=2.5), "max_label_length must be a positive int"),
        (dict(features=3), "features must be a callable or None, got 3"),
        (dict(item_check="short"), "item_check must be a callable or None"),
        (dict(item_check=lambda labels, seconds: 3),
         "item_check must return None or a reason .* got 3 for .*wav"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            SpeechDataset(path, ALPHABET, **kwargs)
    with pytest.raises(ValueError, match="manifest must be a manifest path or a list"):
        SpeechDataset(3, ALPHABET)
    with pytest.raises(ValueError, match="item 0 is 'a.wav'"):
        SpeechDataset(["a.wav"], ALPHABET)
    data = SpeechDataset(path, ALPHABET)
    for kwargs, message in [
        (dict(seed="1"), "seed must be an int or None, got '1'"),
        (dict(bucket_boundaries=2.0), "bucket_boundaries must be a list of seconds"),
        (dict(bucket_boundaries=[float("nan")]), "bucket_boundaries must be incr"),
        (dict(bucket_boundaries=[1.0, float("inf")]), "bucket_boundaries must be"),
        (dict(bucket_boundaries=["1"]), "bucket_boundaries must be increasing"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            data.dataset(2, **kwargs)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        data.num_batches(0)
    assert data.num_batches(2, np.array([3.0, 6.0])) == data.num_batches(2, [3.0, 6.0])


def test_skip_bad_skips_a_malformed_csv_row_with_a_warning(tmp_path, caplog):
    rng = np.random.default_rng(4)
    sf.write(tmp_path / "a.wav", rng.uniform(-0.5, 0.5, 8000), 16000, "PCM_16")
    text = "wav_filename,wav_filesize,transcript\na.wav,1,ok\nshort,1\n,1,empty\n"
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(ValueError, match=r"m.csv:3: 3 columns expected .* has 2"):
        SpeechDataset(str(tmp_path / "m.csv"), ALPHABET)
    with caplog.at_level("WARNING"):
        data = SpeechDataset(str(tmp_path / "m.csv"), ALPHABET, skip_bad=True)
    assert data.transcripts == ["ok"]
    assert [where.rsplit("/", 1)[-1] for where, _ in data.skipped] == [
        "m.csv:3",
        "m.csv:4",
    ]
    assert "m.csv:3: 3 columns expected" in caplog.text
    assert "m.csv:4: empty wav_filename; skipped" in caplog.text
