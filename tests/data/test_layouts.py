# SPDX-License-Identifier: Apache-2.0
"""Corpora in the layouts users download: LibriSpeech, Common Voice, audio folders.

Each test builds a small tree in the exact layout from the bundled digits
(synthetic speech, 8 kHz FLAC): LibriSpeech's FLAC + trans.txt, Common
Voice's clips/*.mp3 + train.tsv + clip_durations.tsv (soundfile writes MP3
here), a folder of 16 kHz WAVs with one transcript file.
"""

import json
import os

import numpy as np
import pytest
import soundfile as sf

from tf_transducer.data import Utterance
from tf_transducer.data import calibration_audio
from tf_transducer.data import common_voice_utterances
from tf_transducer.data import corpus_utterances
from tf_transducer.data import is_corpus
from tf_transducer.data import librispeech_utterances
from tf_transducer.data import read_manifest
from tf_transducer.data import resample
from tf_transducer.data import wav_folder_utterances
from tf_transducer.data import write_manifest
from tf_transducer.data.corpora import manifest

CV_HEADER = (
    "client_id path sentence_id sentence sentence_domain up_votes down_votes "
    "age gender accents variant locale segment"
).split()


@pytest.fixture(scope="module")
def digits():
    """(samples float64, rate, transcript) of the first 6 training digits."""
    out = []
    for u in read_manifest(manifest("digits_train"))[:6]:
        audio, rate = sf.read(u.path)
        out.append((audio, rate, u.transcript))
    return out


def make_librispeech(root, digits):
    """root/LibriSpeech/train-clean-100/{19,103}/<chapter>/...: 2 x 2 utterances.

    Returns [(path, transcript, seconds)] in the reader's order (by path).
    """
    split = root / "LibriSpeech" / "train-clean-100"
    expected = []
    for s, (speaker, chapter) in enumerate([("19", "198"), ("103", "1240")]):
        folder = split / speaker / chapter
        folder.mkdir(parents=True)
        lines = []
        for i in range(2):
            audio, rate, text = digits[2 * s + i]
            utterance_id = f"{speaker}-{chapter}-{i:04d}"
            path = folder / f"{utterance_id}.flac"
            sf.write(path, audio, rate, subtype="PCM_16")
            lines.append(f"{utterance_id} {text.upper()}\n")
            expected.append((str(path), text, len(audio) / rate))
        (folder / f"{speaker}-{chapter}.trans.txt").write_text("".join(lines))
    expected.sort(key=lambda e: e[0][: e[0].rindex("/")])  # "103/" < "19/"
    return split, expected


def as_tuples(utterances):
    return [(u.path, u.transcript, u.duration) for u in utterances]


def test_librispeech_tree_from_any_folder_above_the_transcripts(
    tmp_path, digits, monkeypatch
):
    split, expected = make_librispeech(tmp_path, digits)
    assert [e[0].split("/")[-3] for e in expected] == ["103", "103", "19", "19"]
    for root in (split.parent, split, tmp_path):
        utterances = librispeech_utterances(str(root))
        got = as_tuples(utterances)
        assert [g[:2] for g in got] == [e[:2] for e in expected]
        np.testing.assert_allclose([g[2] for g in got], [e[2] for e in expected])
        assert all(os.path.isabs(u.path) for u in utterances)
        assert utterances[0].source.endswith("103-1240.trans.txt:1")
    trans = split / "103" / "1240" / "103-1240.trans.txt"
    assert trans.read_text().startswith("103-1240-0000 FOUR TWO SIX FIVE\n")
    assert expected[0][1] == "four two six five"  # lower-cased
    one_speaker = librispeech_utterances(str(split / "19"))
    assert [u.transcript for u in one_speaker] == [e[1] for e in expected[2:]]
    # Relative roots give absolute paths too.
    monkeypatch.chdir(tmp_path)
    assert as_tuples(corpus_utterances("LibriSpeech"))[0][0] == expected[0][0]


def make_common_voice(root, digits, durations=True):
    """root/cv-corpus/en/{train.tsv, clip_durations.tsv, clips/*.mp3}."""
    folder = root / "cv-corpus" / "en"
    (folder / "clips").mkdir(parents=True)
    rows, clip_rows, expected = ["\t".join(CV_HEADER)], ["clip\tduration[ms]"], []
    for i, (audio, rate, text) in enumerate(digits[:3]):
        clip = f"common_voice_en_{100 + i}.mp3"
        sf.write(folder / "clips" / clip, audio, rate, format="MP3")
        sentence = text.capitalize() + "."
        values = dict(
            client_id=f"c{i}", path=clip, sentence_id=f"s{i}", sentence=sentence,
            sentence_domain="", up_votes="2", down_votes="0", age="", gender="",
            accents="", variant="", locale="en", segment="",
        )  # fmt: skip
        rows.append("\t".join(values[c] for c in CV_HEADER))
        milliseconds = round(len(audio) / rate * 1000) + 7  # not what is measured
        if i < 2:  # the third clip is not listed: measured from its header
            clip_rows.append(f"{clip}\t{milliseconds}")
        seconds = milliseconds / 1000 if durations and i < 2 else len(audio) / rate
        expected.append((str(folder / "clips" / clip), sentence, seconds))
    (folder / "train.tsv").write_text("\n".join(rows) + "\n")
    if durations:
        (folder / "clip_durations.tsv").write_text("\n".join(clip_rows) + "\n")
    return folder / "train.tsv", expected


@pytest.mark.parametrize("durations", [True, False])
def test_common_voice_split_with_and_without_clip_durations(
    tmp_path, digits, durations
):
    assert "MP3" in sf.available_formats()
    tsv, expected = make_common_voice(tmp_path, digits, durations)
    got = as_tuples(common_voice_utterances(str(tsv)))
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    assert got[0][1] == "Five one three three eight."  # as written
    np.testing.assert_allclose([g[2] for g in got], [e[2] for e in expected])
    assert as_tuples(corpus_utterances(str(tsv))) == got


def make_wav_folder(root, digits):
    """root/audio/{a.wav, b.wav, sub/c.flac} at 16 kHz, and transcripts.txt there."""
    folder = root / "audio"
    (folder / "sub").mkdir(parents=True)
    names = ["a.wav", "b.wav", "sub/c.flac"]
    expected = []
    for name, (audio, rate, text) in zip(names, digits[3:6], strict=True):
        audio16 = resample(audio, rate, 16000)
        sf.write(folder / name, audio16, 16000)
        expected.append((str(folder / name), text, len(audio16) / 16000))
    (folder / "transcripts.txt").write_text(
        f"a.wav\t{digits[3][2]}\n"
        "\n"
        f"b  {digits[4][2]}\n"  # no extension, spaces
        f"sub/c\t {digits[5][2]} \n"  # no extension, FLAC
    )
    return folder / "transcripts.txt", expected


def test_wav_folder_with_one_transcript_file(tmp_path, digits):
    transcripts, expected = make_wav_folder(tmp_path, digits)
    utterances = wav_folder_utterances(str(transcripts))
    got = as_tuples(utterances)
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    np.testing.assert_allclose([g[2] for g in got], [e[2] for e in expected])
    assert sf.info(utterances[0].path).samplerate == 16000
    assert [u.source.rsplit(":", 1)[1] for u in utterances] == ["1", "3", "4"]
    assert as_tuples(corpus_utterances(str(transcripts))) == got


def test_corpus_utterances_names_the_layouts_it_reads(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "m.csv").write_text("wav_filename,transcript\n")
    assert is_corpus(str(tmp_path / "empty")) and is_corpus("x.tsv")
    assert is_corpus("x.TXT") and not is_corpus(str(tmp_path / "m.csv"))
    with pytest.raises(ValueError, match="'.*empty' is none of the layouts read: a "):
        corpus_utterances(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"a \.csv or \.jsonl file is a manifest"):
        corpus_utterances(str(tmp_path / "m.csv"))
    with pytest.raises(FileNotFoundError, match="corpus '.*nope' does not exist"):
        corpus_utterances(str(tmp_path / "nope"))
    with pytest.raises(TypeError, match="corpus must be a path, got 3"):
        corpus_utterances(3)  # type: ignore[arg-type]


def test_write_manifest_round_trip_and_whole_or_nothing(tmp_path, digits):
    transcripts, _ = make_wav_folder(tmp_path, digits)
    utterances = wav_folder_utterances(str(transcripts))
    utterances.append(Utterance(utterances[0].path, "dé jà", 0.5, offset=0.25))
    out = tmp_path / "new" / "all.jsonl"
    assert write_manifest(utterances, str(out)) == 4
    back = read_manifest(str(out))
    assert [(u.path, u.transcript, u.duration, u.offset) for u in back] == [
        (u.path, u.transcript, u.duration, u.offset) for u in utterances
    ]
    assert json.loads(out.read_text().splitlines()[3])["text"] == "dé jà"
    before = out.read_bytes()
    with pytest.raises(TypeError, match=r"utterances\[1\] must be an Utterance"):
        write_manifest([utterances[0], "x.wav"], str(out))  # type: ignore[list-item]
    assert out.read_bytes() == before
    assert sorted(os.listdir(out.parent)) == ["all.jsonl"]  # no temporary left
    with pytest.raises(ValueError, match=r"'.*all.csv' must end in \.jsonl"):
        write_manifest(utterances, str(tmp_path / "all.csv"))
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(ValueError, match="'.*d.jsonl' is a folder"):
        write_manifest(utterances, str(tmp_path / "d.jsonl"))


def test_recipe_reads_corpora_where_it_reads_manifests(tmp_path, digits):
    from tf_transducer.training import transducer_recipe as recipe

    split, expected = make_librispeech(tmp_path, digits)
    tsv, cv_expected = make_common_voice(tmp_path, digits)
    paths = recipe.manifest_list(f"{split},{tsv},{manifest('digits_dev')}", "x")
    utterances = recipe.read_utterances(paths, "train_files")
    dev = read_manifest(manifest("digits_dev"))
    assert [u.transcript for u in utterances] == (
        [e[1] for e in expected] + [e[1] for e in cv_expected]
        + [u.transcript for u in dev]
    )  # fmt: skip
    with pytest.raises(FileNotFoundError, match="x: manifest or corpus '.*nope'"):
        recipe.manifest_list([str(tmp_path / "nope")], "x")
    # int8 exports calibrate on the training audio, corpora included.
    signals = calibration_audio([split, tsv], 8000, count=3)
    assert len(signals) == 3 and all(s.dtype == np.float32 and s.size for s in signals)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


# (what to break, the tree's reader, the error, its message: a regex)
def break_librispeech(tree, case):
    split, _ = tree
    trans = split / "19" / "198" / "19-198.trans.txt"
    lines = trans.read_text().splitlines()
    if case == "no_transcript":
        trans.write_text(f"{lines[0]}\n19-198-0001\n")
        return str(split), ValueError, f"{trans}:2: .*'19-198-0001' \\(no transcript"
    if case == "missing_audio":
        os.remove(split / "19" / "198" / "19-198-0000.flac")
        return (
            str(split), FileNotFoundError,
            f"{trans}:1: audio file '.*19-198-0000.flac' does not exist",
        )  # fmt: skip
    if case == "unreadable_audio":
        (split / "19" / "198" / "19-198-0001.flac").write_bytes(b"not audio" * 20)
        return str(split), ValueError, f"{trans}:2: .*19-198-0001.flac: not a readable"
    if case == "not_utf8":
        trans.write_bytes(lines[0].encode() + b"\n19-198-0001 \xff\n")
        return str(split), ValueError, f"{trans}:2: not UTF-8"
    if case == "no_transcript_files":
        empty = split.parent / "dev-clean"
        empty.mkdir()
        return str(empty), ValueError, "'.*dev-clean': no \\*.trans.txt files under it"
    assert case == "empty_transcripts"
    for path in split.rglob("*.trans.txt"):
        path.write_text("\n")
    return str(split), ValueError, "its transcript files are empty"


@pytest.mark.parametrize(
    "case",
    [
        "no_transcript", "missing_audio", "unreadable_audio", "not_utf8",
        "no_transcript_files", "empty_transcripts",
    ],
)  # fmt: skip
def test_malformed_librispeech_trees_name_file_and_line(tmp_path, digits, case):
    spec, error, message = break_librispeech(make_librispeech(tmp_path, digits), case)
    with pytest.raises(error, match=message):
        librispeech_utterances(spec)
    if case != "no_transcript_files":  # corpus_utterances: not LibriSpeech then
        with pytest.raises(error, match=message):
            corpus_utterances(spec)


@pytest.mark.parametrize(
    "case,error,message",
    [
        ("no_sentence_column", ValueError,
         r"train.tsv:1: .*columns path and sentence; missing \['sentence'\]"),
        ("short_row", ValueError, r"train.tsv:3: 13 tab-separated columns expected"),
        ("empty_sentence", ValueError, r"train.tsv:2: empty sentence for 'common_"),
        ("missing_clip", FileNotFoundError,
         r"train.tsv:4: audio file '.*clips/common_voice_en_102.mp3' does not"),
        ("bad_duration", ValueError,
         r"clip_durations.tsv:2: the duration of 'common_voice_en_100.mp3' must "
         r"be a number of milliseconds >= 0, got 'nan'"),
        ("no_rows", ValueError, r"train.tsv': no rows after its header"),
        ("empty_file", ValueError, r"train.tsv: empty file"),
    ],
)  # fmt: skip
def test_malformed_common_voice_splits_name_file_and_line(
    tmp_path, digits, case, error, message
):
    tsv, _ = make_common_voice(tmp_path, digits)
    rows = tsv.read_text().splitlines()
    if case == "no_sentence_column":
        rows[0] = rows[0].replace("\tsentence\t", "\ttext\t")
    elif case == "short_row":
        rows[2] = "\t".join(rows[2].split("\t")[:5])
    elif case == "empty_sentence":
        fields = rows[1].split("\t")
        fields[CV_HEADER.index("sentence")] = " "
        rows[1] = "\t".join(fields)
    elif case == "missing_clip":
        os.remove(tsv.parent / "clips" / "common_voice_en_102.mp3")
    elif case == "bad_duration":
        write(
            tsv.parent / "clip_durations.tsv",
            "clip\tduration[ms]\ncommon_voice_en_100.mp3\tnan\n",
        )
    elif case == "no_rows":
        rows = rows[:1]
    else:
        rows = []
    tsv.write_text("".join(row + "\n" for row in rows))
    with pytest.raises(error, match=message):
        common_voice_utterances(str(tsv))


@pytest.mark.parametrize(
    "line,error,message",
    [
        ("a.wav", ValueError, r"transcripts.txt:2: .*'a.wav' \(no transcript\)"),
        ("\tone two", ValueError, r"transcripts.txt:2: .*\(no file name\)"),
        ("zz\tone", FileNotFoundError,
         r"transcripts.txt:2: audio file '.*audio/zz' does not exist \(nor with "
         r"\.wav or \.flac\)"),
        ("zz.flac one", FileNotFoundError,
         r"transcripts.txt:2: audio file '.*audio/zz.flac' does not exist$"),
        ("bad.wav\tone", ValueError,
         r"transcripts.txt:2: .*bad.wav: WAV file without a data chunk"),
    ],
)  # fmt: skip
def test_malformed_wav_folders_name_file_and_line(
    tmp_path, digits, line, error, message
):
    transcripts, _ = make_wav_folder(tmp_path, digits)
    (transcripts.parent / "bad.wav").write_bytes(b"RIFF\x04\x00\x00\x00WAVE")
    first = transcripts.read_text().splitlines()[0]
    transcripts.write_text(f"{first}\n{line}\n")
    with pytest.raises(error, match=message):
        wav_folder_utterances(str(transcripts))
    empty = write(tmp_path / "audio" / "none.txt", "\n \n")
    with pytest.raises(ValueError, match="'.*none.txt': no utterances in it"):
        wav_folder_utterances(empty)
    with pytest.raises(FileNotFoundError, match="transcript file '.*nope.txt' does"):
        wav_folder_utterances(str(tmp_path / "nope.txt"))
