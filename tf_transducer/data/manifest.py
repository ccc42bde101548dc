# SPDX-License-Identifier: Apache-2.0
"""Manifests: which audio files go with which transcripts.

Two formats, picked by the file's extension:

- `.csv`, DeepSpeech's: a header with `wav_filename` and `transcript` (and
  usually `wav_filesize`), one utterance per row;
- `.jsonl` / `.json`, NeMo's JSON lines: `{"audio_filepath": ..., "text":
  ..., "duration": ...}` per line.

Relative audio paths are resolved against the manifest's own folder.
"""

import csv
import dataclasses
import json
import math
import os
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One manifest entry.

    Attributes:
      path: absolute path of the audio file.
      transcript: its text.
      duration: seconds, when the manifest gives it (with an offset: the
        length of the segment to read).
      offset: seconds into the file where the utterance starts (NeMo's
        "offset"; 0 = the start).
      source: "manifest:line", for messages.
    """

    path: str
    transcript: str
    duration: float | None = None
    source: str = ""
    offset: float = 0.0


def _resolve(folder, path):
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(folder, path))


class _Lines:
    """The lines of a UTF-8 text file, with errors that name file and line.

    A byte order mark at the start (as spreadsheet programs write) is dropped.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.number = 0

    def __iter__(self):
        with open(self.path, "rb") as f:
            for raw in f:
                self.number += 1
                try:
                    yield raw.decode("utf-8-sig" if self.number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(
                        f"{self.path}:{self.number}: not UTF-8 text ({error.reason} "
                        f"at byte {error.start} of the line)"
                    ) from None


def _read_csv(path, folder, on_bad_row=None):
    lines = _Lines(path)
    # A transcript may be long (a whole chapter), but not without bound.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 24))
    reader = csv.DictReader(iter(lines))
    try:
        if reader.fieldnames is None:
            raise ValueError(
                f"{path}: empty file (a DeepSpeech manifest starts with a header "
                "wav_filename,wav_filesize,transcript)"
            )
        missing = {"wav_filename", "transcript"} - set(reader.fieldnames)
        if missing:
            raise ValueError(
                f"{path}: a DeepSpeech manifest needs the columns wav_filename and "
                f"transcript; missing {sorted(missing)} (header: {reader.fieldnames})"
            )
        items = []
        for row in reader:
            where = f"{path}:{lines.number}"
            problem = None
            if None in row or None in row.values():
                # DictReader fills missing fields with None and puts extra
                # ones in a list under the key None.
                fields = sum(
                    value is not None for key, value in row.items() if key is not None
                ) + len(row.get(None) or [])
                problem = (
                    f"{len(reader.fieldnames)} columns expected "
                    f"({','.join(reader.fieldnames)}), the row has {fields}"
                )
            elif not row["wav_filename"]:
                problem = "empty wav_filename"
            if problem is not None:
                if on_bad_row is None:
                    raise ValueError(f"{where}: {problem}")
                on_bad_row(where, problem)
                continue
            items.append(
                Utterance(
                    _resolve(folder, row["wav_filename"]),
                    row["transcript"],
                    source=where,
                )
            )
        return items
    except csv.Error as error:
        raise ValueError(f"{path}:{lines.number}: bad CSV ({error})") from None


def _seconds(entry, key, where, default):
    value = entry.get(key, default)
    if value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key!r} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: {key!r} must be >= 0 seconds, got {value!r}")
    return float(value)


def _read_jsonl(path, folder):
    items = []
    lines = _Lines(path)
    for line in lines:
        where = f"{path}:{lines.number}"
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not JSON ({error})") from None
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: each line must be a JSON object")
        audio = entry.get("audio_filepath")
        if not isinstance(audio, str) or not audio:
            raise ValueError(
                f"{where}: needs an audio_filepath (a path string), got {audio!r}"
            )
        text = entry.get("text", "")
        if not isinstance(text, str):
            raise ValueError(f"{where}: 'text' must be a string, got {text!r}")
        items.append(
            Utterance(
                _resolve(folder, audio),
                text,
                _seconds(entry, "duration", where, None),
                source=where,
                offset=_seconds(entry, "offset", where, None) or 0.0,
            )
        )
    return items


def read_manifest(
    path: str, on_bad_row: Callable[[str, str], object] | None = None
) -> list[Utterance]:
    """The utterances of a DeepSpeech CSV or JSON-lines manifest.

    JSON lines may give "offset" and "duration" (seconds): the utterance is
    then that segment of the file.

    Args:
      path: the manifest (.csv or .jsonl).
      on_bad_row: None (a bad row is an error), or (where, problem) -> ...
        called for a CSV row with too few or too many fields or no
        wav_filename, which is then left out (`where` is "file:line").

    Raises:
      FileNotFoundError: no such manifest.
      ValueError: a folder, an unknown extension, missing columns or fields, fields of
        the wrong type, bad JSON, CSV or UTF-8 (the message names the file
        and line).
    """
    if os.path.isdir(path):
        raise ValueError(f"manifest {path!r} is a folder, not a manifest file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"manifest {path!r} does not exist")
    folder = os.path.dirname(os.path.abspath(path))
    extension = os.path.splitext(path)[1].lower()
    if extension == ".csv":
        return _read_csv(path, folder, on_bad_row)
    if extension in (".jsonl", ".json"):
        return _read_jsonl(path, folder)
    raise ValueError(
        f"manifest {path!r}: unknown format {extension!r} (use .csv for "
        "DeepSpeech's format or .jsonl for JSON lines)"
    )
