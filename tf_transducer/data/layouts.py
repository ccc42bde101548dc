# SPDX-License-Identifier: Apache-2.0
"""Corpora as users download them, read as `Utterance`s; manifests written.

Three layouts:

- LibriSpeech: `<root>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt`,
  lines `<utterance-id> <TRANSCRIPT>`, audio `<utterance-id>.flac` beside it
  (`librispeech_utterances`);
- a Common Voice release split: `<release>/<lang>/train.tsv` (or dev, test,
  validated, ...) with the clips in `clips/` beside it
  (`common_voice_utterances`);
- a folder of audio files with one transcript file, lines `<file> <text>`
  (`wav_folder_utterances`).

`corpus_utterances` picks the reader from the path; `write_manifest` writes
any utterances as a JSON-lines manifest that `read_manifest` reads back.
Every utterance gets an absolute path and a duration in seconds (from the
layout when it gives one, else from the audio file's header). Errors name
the file and line.
"""

import json
import math
import os
from collections.abc import Iterable

from tf_transducer.data.audio import BadAudioError
from tf_transducer.data.audio import probe
from tf_transducer.data.manifest import Utterance
from tf_transducer.data.manifest import _Lines
from tf_transducer.data.manifest import read_manifest

TRANSCRIPT_SUFFIX = ".trans.txt"
# Extensions tried, in order, for a WAV-folder file name given without one.
AUDIO_EXTENSIONS = (".wav", ".flac")
LAYOUTS = (
    "a LibriSpeech folder (with */*/*.trans.txt under it), a Common Voice "
    "split (.tsv) or a transcript file of a folder of audio files (.txt)"
)


def _utterance(
    path: str, text: str, where: str, duration: float | None = None
) -> Utterance:
    """The utterance of an audio file that line `where` names; checks the file.

    Without a duration, the file's header gives it (which also checks that
    the file is audio).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}: audio file {path!r} does not exist")
    if duration is None:
        try:
            duration = probe(path).duration
        except BadAudioError as error:
            raise ValueError(f"{where}: {error}") from None
    return Utterance(path, text, duration, source=where)


def _transcript_files(root: str) -> list[str]:
    """Every *.trans.txt under root, sorted by path (symlinks followed once)."""
    found, seen = [], set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders.sort()
        found += [
            os.path.join(folder, f) for f in files if f.endswith(TRANSCRIPT_SUFFIX)
        ]
    return sorted(found)


def librispeech_utterances(root: str) -> list[Utterance]:
    """The utterances of a LibriSpeech tree.

    root is any folder above the transcript files: `LibriSpeech/`,
    `LibriSpeech/train-clean-100/`, one speaker's folder. Every
    `<speaker>-<chapter>.trans.txt` under it is read (sorted by path; lines
    in file order); each line is `<utterance-id> <TRANSCRIPT>` and the audio
    is `<utterance-id>.flac` in the same folder.

    Transcripts are lower-cased: LibriSpeech's are upper-case letters,
    spaces and apostrophes, and `CharacterAlphabet.english()` is lower-case.
    Durations come from the FLAC headers.

    Raises:
      FileNotFoundError: no folder root, or an audio file a line names is
        missing.
      ValueError: no transcript files or no utterances under root, a line
        without a transcript, unreadable audio (naming file and line).
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"LibriSpeech folder {root!r} does not exist")
    files = _transcript_files(os.path.abspath(root))
    if not files:
        raise ValueError(
            f"LibriSpeech folder {root!r}: no *{TRANSCRIPT_SUFFIX} files under it"
        )
    utterances = []
    for path in files:
        folder = os.path.dirname(path)
        lines = _Lines(path)
        for line in lines:
            where = f"{path}:{lines.number}"
            if not line.strip():
                continue
            fields = line.split(maxsplit=1)
            if len(fields) < 2:
                raise ValueError(
                    f"{where}: expected '<utterance-id> <TRANSCRIPT>', got "
                    f"{line.strip()!r} (no transcript)"
                )
            audio = os.path.join(folder, fields[0] + ".flac")
            utterances.append(_utterance(audio, fields[1].strip().lower(), where))
    if not utterances:
        raise ValueError(f"LibriSpeech folder {root!r}: its transcript files are empty")
    return utterances


def _tsv_rows(path: str):
    """(file:line, row, header) of a TSV file's header (row None) and rows.

    A row is {column: value}; empty lines are skipped.
    """
    lines = _Lines(path)
    header = None
    for line in lines:
        fields = line.rstrip("\r\n").split("\t")
        where = f"{path}:{lines.number}"
        if header is None:
            header = fields
            yield where, None, header
        elif line.strip():
            if len(fields) != len(header):
                raise ValueError(
                    f"{where}: {len(header)} tab-separated columns expected "
                    f"({' '.join(header)}), the row has {len(fields)}"
                )
            yield where, dict(zip(header, fields, strict=True)), header
    if header is None:
        raise ValueError(f"{path}: empty file (a TSV file starts with a header)")


def _clip_durations(path: str) -> dict[str, float]:
    """Common Voice's clip_durations.tsv: clip name -> seconds."""
    seconds = {}
    for where, row, header in _tsv_rows(path):
        if row is None:
            if len(header) != 2:
                raise ValueError(
                    f"{where}: expected the header 'clip<TAB>duration[ms]', got "
                    f"{header}"
                )
            continue
        clip, milliseconds = row.values()
        try:
            value = float(milliseconds)
        except ValueError:
            value = -1.0
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(
                f"{where}: the duration of {clip!r} must be a number of "
                f"milliseconds >= 0, got {milliseconds!r}"
            )
        seconds[clip] = value / 1000
    return seconds


def common_voice_utterances(tsv_path: str) -> list[Utterance]:
    """The utterances of a Common Voice release split (train.tsv, dev.tsv, ...).

    The file is tab-separated with a header holding at least `path` and
    `sentence` (releases add client_id, up_votes, age, locale, ...); the
    audio is `clips/<path>` beside it (MP3 in the releases). Sentences are
    kept as written (mixed case, punctuation): normalise them, or use a
    subword or word text encoder, before training with characters.

    Durations come from `clip_durations.tsv` beside the file when it exists
    (`clip<TAB>duration[ms]`, in newer releases) and lists the clip, else
    from the audio file's header.

    Raises:
      FileNotFoundError: no such file, or a clip it names is missing.
      ValueError: no `path` or `sentence` column, a row with the wrong
        number of columns, an empty path or sentence, bad durations,
        unreadable audio, no rows (naming file and line).
    """
    if not os.path.isfile(tsv_path):
        raise FileNotFoundError(f"Common Voice file {tsv_path!r} does not exist")
    tsv_path = os.path.abspath(tsv_path)
    folder = os.path.dirname(tsv_path)
    durations_file = os.path.join(folder, "clip_durations.tsv")
    durations = (
        _clip_durations(durations_file) if os.path.isfile(durations_file) else {}
    )
    utterances = []
    for where, row, header in _tsv_rows(tsv_path):
        if row is None:
            missing = [c for c in ("path", "sentence") if c not in header]
            if missing:
                raise ValueError(
                    f"{where}: a Common Voice file needs the columns path and "
                    f"sentence; missing {missing} (header: {' '.join(header)})"
                )
            continue
        clip, sentence = row["path"].strip(), row["sentence"].strip()
        if not clip:
            raise ValueError(f"{where}: empty path")
        if not sentence:
            raise ValueError(f"{where}: empty sentence for {clip!r}")
        audio = os.path.normpath(os.path.join(folder, "clips", clip))
        utterances.append(_utterance(audio, sentence, where, durations.get(clip)))
    if not utterances:
        raise ValueError(f"Common Voice file {tsv_path!r}: no rows after its header")
    return utterances


def _audio_file(folder: str, name: str, where: str) -> str:
    """The audio file a WAV-folder line names (extension optional)."""
    path = os.path.normpath(os.path.join(folder, name))
    if os.path.isfile(path) or os.path.splitext(name)[1]:
        return path
    for extension in AUDIO_EXTENSIONS:
        if os.path.isfile(path + extension):
            return path + extension
    raise FileNotFoundError(
        f"{where}: audio file {path!r} does not exist (nor with "
        f"{' or '.join(AUDIO_EXTENSIONS)})"
    )


def wav_folder_utterances(transcript_file: str) -> list[Utterance]:
    """The utterances of a folder of audio files with one transcript file.

    Each line of the UTF-8 transcript file is `<file><TAB><transcript>` (or
    the first run of spaces instead of the tab, when the line has no tab);
    the file name is relative to the transcript file's folder and may leave
    out the extension (then .wav, else .flac). Empty lines are skipped.
    Transcripts are kept as written. Durations come from the audio headers;
    any format and rate libsndfile reads will do.

    Raises:
      FileNotFoundError: no such transcript file, or an audio file a line
        names is missing.
      ValueError: a line without a transcript, unreadable audio, no
        utterances (naming file and line).
    """
    if not os.path.isfile(transcript_file):
        raise FileNotFoundError(f"transcript file {transcript_file!r} does not exist")
    transcript_file = os.path.abspath(transcript_file)
    folder = os.path.dirname(transcript_file)
    utterances = []
    lines = _Lines(transcript_file)
    for line in lines:
        where = f"{transcript_file}:{lines.number}"
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        fields = line.split("\t", 1) if "\t" in line else line.split(maxsplit=1)
        name, text = fields[0].strip(), fields[1].strip() if len(fields) > 1 else ""
        if not name or not text:
            raise ValueError(
                f"{where}: expected '<file><TAB><transcript>', got {line.strip()!r} "
                f"({'no file name' if not name else 'no transcript'})"
            )
        audio = _audio_file(folder, name, where)
        utterances.append(_utterance(audio, text, where))
    if not utterances:
        raise ValueError(f"transcript file {transcript_file!r}: no utterances in it")
    return utterances


def is_corpus(spec: str) -> bool:
    """Whether `corpus_utterances` reads spec (a folder, a .tsv or a .txt)."""
    return os.path.isdir(spec) or os.path.splitext(spec)[1].lower() in (".tsv", ".txt")


def load_utterances(path: str) -> list[Utterance]:
    """The utterances of a manifest (read_manifest) or a corpus (corpus_utterances)."""
    return corpus_utterances(path) if is_corpus(path) else read_manifest(path)


def corpus_utterances(spec: str | os.PathLike) -> list[Utterance]:
    """The utterances of a corpus in one of the three layouts, by its path.

    A `.tsv` file is a Common Voice split (`common_voice_utterances`), a
    `.txt` file the transcripts of a folder of audio files
    (`wav_folder_utterances`), a folder with `*.trans.txt` files under it
    LibriSpeech (`librispeech_utterances`).

    Raises:
      FileNotFoundError: spec does not exist (or as the readers).
      ValueError: spec is none of the three layouts (or as the readers).
    """
    if not isinstance(spec, str | os.PathLike):
        raise TypeError(f"corpus must be a path, got {spec!r}")
    spec = os.fspath(spec)
    if not os.path.exists(spec):
        raise FileNotFoundError(f"corpus {spec!r} does not exist")
    extension = os.path.splitext(spec)[1].lower()
    if os.path.isfile(spec) and extension == ".tsv":
        return common_voice_utterances(spec)
    if os.path.isfile(spec) and extension == ".txt":
        return wav_folder_utterances(spec)
    if os.path.isdir(spec) and _transcript_files(spec):
        return librispeech_utterances(spec)
    manifest = extension in (".csv", ".jsonl", ".json")
    raise ValueError(
        f"corpus {spec!r} is none of the layouts read: {LAYOUTS}"
        + (" (a .csv or .jsonl file is a manifest: read_manifest)" if manifest else "")
    )


def write_manifest(utterances: Iterable[Utterance], path: str) -> int:
    """Writes utterances as a JSON-lines manifest; returns how many.

    One line per utterance: `audio_filepath` (absolute), `text`, and
    `duration` / `offset` (seconds) when known / not 0, UTF-8. The file is
    written whole or not at all (a temporary file beside it, then renamed);
    its folder is created if needed.

    Raises:
      ValueError: path is not a .jsonl or .json file name, or is a folder.
      TypeError: an item that is not an `Utterance`.
    """
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() not in (".jsonl", ".json"):
        raise ValueError(
            f"manifest path {path!r} must end in .jsonl (or .json) to be read back"
        )
    if os.path.isdir(path):
        raise ValueError(f"manifest path {path!r} is a folder")
    lines = []
    for i, u in enumerate(utterances):
        if not isinstance(u, Utterance):
            raise TypeError(f"utterances[{i}] must be an Utterance, got {u!r}")
        entry: dict = {"audio_filepath": os.path.abspath(u.path), "text": u.transcript}
        if u.duration is not None:
            entry["duration"] = u.duration
        if u.offset:
            entry["offset"] = u.offset
        lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return len(lines)
