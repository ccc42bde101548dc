# SPDX-License-Identifier: Apache-2.0
"""Data as users have it: NeMo segments, odd WAVs, bad manifest fields, rates."""

import json
import struct

import numpy as np
import pytest
import soundfile as sf

from tf_transducer.data import BadAudioError
from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SpeechDataset
from tf_transducer.data import load_audio
from tf_transducer.data import read_manifest
from tf_transducer.layers import LogMelSpectrogram

ALPHABET = CharacterAlphabet.english()
RATE = 8000


def ramp(seconds=2.0):
    """A signal whose samples say where they are: sample i = i / 2^16."""
    n = int(seconds * RATE)
    return (np.arange(n) % 2**15 / 2**16).astype(np.float32)


def audio_batches(data):
    out = {}
    for batch in data.dataset(4, shuffle=False):
        for b, index in enumerate(batch["index"].numpy()):
            n = batch["audio_length"][b]
            out[int(index)] = batch["audio"][b, :n].numpy()
    return out


@pytest.mark.parametrize("subtype,ext", [("PCM_16", "wav"), ("PCM_24", "flac")])
def test_nemo_offset_and_duration_select_the_segment(tmp_path, subtype, ext):
    path = tmp_path / f"a.{ext}"
    sf.write(path, ramp(), RATE, subtype=subtype)
    lines = [
        {"audio_filepath": path.name, "text": "a b", "offset": 1.0, "duration": 0.5},
        {"audio_filepath": path.name, "text": "a b", "offset": 0.25},
        {"audio_filepath": path.name, "text": "a b", "duration": 0.125},
        {"audio_filepath": path.name, "text": "a b"},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    data = SpeechDataset(str(manifest), ALPHABET, sample_rate=RATE)
    np.testing.assert_allclose(data.durations, [0.5, 1.75, 0.125, 2.0])
    got = audio_batches(data)
    whole, _ = sf.read(path, dtype="float32")
    for index, (start, count) in enumerate(
        [(8000, 4000), (2000, 14000), (0, 1000), (0, 16000)]
    ):
        np.testing.assert_array_equal(got[index], whole[start : start + count])


@pytest.mark.parametrize(
    "line,message",
    [
        ({"offset": 3.0}, "offset 3.0 s is past the end of the audio"),
        ({"offset": 1.5, "duration": 1.0}, r"offset 1.5 s \+ duration 1.0 s runs past"),
    ],
)
def test_segments_outside_the_file_are_bad_items(tmp_path, line, message):
    sf.write(tmp_path / "a.wav", ramp(), RATE, subtype="PCM_16")
    manifest = tmp_path / "m.jsonl"
    entry = {"audio_filepath": "a.wav", "text": "a", **line}
    manifest.write_text(json.dumps(entry) + "\n")
    with pytest.raises(ValueError, match=f"m.jsonl:1: .*a.wav: {message}"):
        SpeechDataset(str(manifest), ALPHABET, sample_rate=RATE)


@pytest.mark.parametrize(
    "content,message",
    [
        (b'{"audio_filepath": "a.wav", "text": 123}\n', "m.jsonl:1: 'text' must be a"),
        (b'{"audio_filepath": null, "text": "a"}\n', "m.jsonl:1: needs an audio_f"),
        (b'{"audio_filepath": "a.wav", "duration": "abc"}\n', "m.jsonl:1: 'duration"),
        (b'{"audio_filepath": "a.wav", "offset": -1}\n', "m.jsonl:1: 'offset' must"),
        (b'["a.wav"]\n', "m.jsonl:1: each line must be a JSON object"),
        (b'{"audio_filepath": "a.wav"}\n{"text": "\xff"}\n', "m.jsonl:2: not UTF-8"),
    ],
)
def test_bad_jsonl_fields_name_file_and_line(tmp_path, content, message):
    (tmp_path / "m.jsonl").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_manifest(str(tmp_path / "m.jsonl"))


def test_bad_csv_rows_name_file_and_line(tmp_path):
    path = tmp_path / "m.csv"
    header = "wav_filename,wav_filesize,transcript\n"
    path.write_bytes((header + "a.wav,1,caf\xe9\n").encode("latin-1"))
    with pytest.raises(ValueError, match=r"m.csv:2: not UTF-8"):
        read_manifest(str(path))
    for row, fields in [("a.wav,1", 2), ("a.wav", 1), ("a.wav,1,a,b", 4)]:
        path.write_text(header + "b.wav,1,b\n" + row + "\n")
        message = (
            r"m.csv:3: 3 columns expected \(wav_filename,wav_filesize,transcript\), "
            f"the row has {fields}$"
        )
        with pytest.raises(ValueError, match=message):
            read_manifest(str(path))
    long_text = "a" * 200_000  # longer than csv's default field limit
    path.write_text(header + f"a.wav,1,{long_text}\n")
    (utterance,) = read_manifest(str(path))
    assert utterance.transcript == long_text


def test_manifests_with_a_byte_order_mark_empty_or_a_folder(tmp_path):
    bom = "\ufeff"
    (tmp_path / "m.csv").write_text(
        bom + "wav_filename,wav_filesize,transcript\na.wav,1,hi\n", "utf-8"
    )
    (tmp_path / "m.jsonl").write_text(
        bom + '{"audio_filepath": "a.wav", "text": "hi"}\n', "utf-8"
    )
    for name in ("m.csv", "m.jsonl"):
        (utterance,) = read_manifest(str(tmp_path / name))
        assert (utterance.path, utterance.transcript) == (str(tmp_path / "a.wav"), "hi")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty.csv: empty file"):
        read_manifest(str(tmp_path / "empty.csv"))
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ValueError, match="folder.csv' is a folder"):
        read_manifest(str(tmp_path / "folder.csv"))


def test_features_at_another_rate_are_refused(tmp_path):
    sf.write(tmp_path / "a.wav", ramp(), RATE, subtype="PCM_16")
    (tmp_path / "m.jsonl").write_text('{"audio_filepath": "a.wav", "text": "a"}\n')
    with pytest.raises(
        ValueError, match="features expect audio at 8000 Hz but sample_rate is 16000"
    ):
        SpeechDataset(
            str(tmp_path / "m.jsonl"),
            ALPHABET,
            sample_rate=16000,
            features=LogMelSpectrogram(sample_rate=8000),
        )


def wav_bytes(samples, block_align=2, data_size=None):
    """A mono 16-bit PCM WAV whose header may lie about its block alignment
    or data size."""
    data = np.asarray(samples, "<i2").tobytes()
    size = len(data) if data_size is None else data_size
    data = data[:size] + b"\0" * max(0, size - len(data))
    fmt = struct.pack("<HHIIHH", 1, 1, RATE, RATE * block_align, block_align, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", size)
        + data
        + (b"\0" if size % 2 else b"")
    )


def test_files_the_graph_decoder_refuses_are_decoded_or_counted(tmp_path):
    samples = (np.sin(np.arange(4000) / 5) * 3000).astype(np.int16)
    files = {
        "good.wav": wav_bytes(samples),
        "odd.wav": wav_bytes(samples, data_size=7999),
        "align.wav": wav_bytes(samples, block_align=4),
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    sf.write(tmp_path / "nan.wav", np.full(4000, np.nan), RATE, subtype="FLOAT")
    names = [*files, "nan.wav"]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(json.dumps({"audio_filepath": n, "text": "a"}) + "\n" for n in names)
    )
    data = SpeechDataset(str(manifest), ALPHABET, sample_rate=RATE, skip_bad=True)
    # Float samples are read when the dataset is made: NaN ones are bad items.
    assert data.skipped == [
        (str(tmp_path / "nan.wav"), "samples that are NaN or infinite")
    ]
    got = audio_batches(data)  # iterates to the end
    (report,) = data.epoch_reports
    failed = {path.rsplit("/", 1)[-1]: why for path, why in report["failed_to_decode"]}
    assert set(got) | {names.index(n) for n in failed} == set(range(len(files)))
    np.testing.assert_allclose(got[0], samples / 32768, atol=1e-6)
    if 1 in got:  # libsndfile read the odd-sized chunk: its whole samples
        np.testing.assert_allclose(got[1], samples[:3999] / 32768, atol=1e-6)
    with pytest.raises(
        ValueError, match="m.jsonl:4: .*nan.wav: samples that are NaN or infinite"
    ):
        SpeechDataset(str(manifest), ALPHABET, sample_rate=RATE)


def test_load_audio_applies_the_pipeline_rule(tmp_path):
    sf.write(tmp_path / "empty.wav", np.zeros(0), RATE, subtype="PCM_16")
    with pytest.raises(BadAudioError, match="empty.wav: no audio samples"):
        load_audio(str(tmp_path / "empty.wav"), RATE)
    sf.write(tmp_path / "a.wav", ramp(0.5), 16000, subtype="PCM_16")
    assert load_audio(str(tmp_path / "a.wav"), RATE).shape == (2000,)


def test_audio_readers_name_bad_arguments(tmp_path):
    from tf_transducer.data import read_audio

    path = str(tmp_path / "a.wav")
    sf.write(path, ramp(0.5), RATE, subtype="PCM_16")
    for rate in (0, -8000, 8000.5, "8000", True):
        for reader in (load_audio, read_audio):
            with pytest.raises(ValueError, match="sample_rate must be a positive int"):
                reader(path, rate)
    for offset in (-1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="offset must be a number of seconds"):
            read_audio(path, RATE, offset=offset)
    for duration in (-1.0, float("inf")):
        with pytest.raises(ValueError, match="duration must be None or seconds >= 0"):
            read_audio(path, RATE, duration=duration)
    with pytest.raises(BadAudioError, match="a.wav: no audio samples"):
        read_audio(path, RATE, duration=0.0)
    assert read_audio(path, RATE, np.float64(0.25), np.float32(0.1)).shape == (800,)


@pytest.mark.parametrize("sample_rate", [8000, 16000])
@pytest.mark.parametrize("buckets", [None, "auto", [1.0, 2.0]])
def test_epoch_length_is_known_ahead(sample_rate, buckets):
    from tf_transducer.data.corpora import manifest

    data = SpeechDataset(manifest("digits_dev"), ALPHABET, sample_rate=sample_rate)
    ds = data.dataset(4, seed=1, bucket_boundaries=buckets)
    expected = data.num_batches(4, buckets)
    assert int(ds.cardinality()) == expected
    assert sum(1 for _ in ds) == expected  # assert_cardinality checks it too
