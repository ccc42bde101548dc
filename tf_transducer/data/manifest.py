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
import os


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One manifest entry.

    Attributes:
      path: absolute path of the audio file.
      transcript: its text.
      duration: seconds, when the manifest gives it.
      source: "manifest:line", for messages.
    """

    path: str
    transcript: str
    duration: float | None = None
    source: str = ""


def _resolve(folder, path):
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(folder, path))


def _read_csv(path, folder):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = {"wav_filename", "transcript"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(
                f"{path}: a DeepSpeech manifest needs the columns wav_filename and "
                f"transcript; missing {sorted(missing)} (header: {reader.fieldnames})"
            )
        return [
            Utterance(
                _resolve(folder, row["wav_filename"]),
                row["transcript"] or "",
                source=f"{path}:{reader.line_num}",
            )
            for row in reader
        ]


def _read_jsonl(path, folder):
    items = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error})") from None
            if not isinstance(entry, dict) or "audio_filepath" not in entry:
                raise ValueError(f"{path}:{number}: needs an audio_filepath field")
            duration = entry.get("duration")
            items.append(
                Utterance(
                    _resolve(folder, entry["audio_filepath"]),
                    entry.get("text") or "",
                    None if duration is None else float(duration),
                    source=f"{path}:{number}",
                )
            )
    return items


def read_manifest(path: str) -> list[Utterance]:
    """The utterances of a DeepSpeech CSV or JSON-lines manifest.

    Raises:
      FileNotFoundError: no such manifest.
      ValueError: an unknown extension, missing columns or fields, bad JSON
        (the message names the file and line).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"manifest {path!r} does not exist")
    folder = os.path.dirname(os.path.abspath(path))
    extension = os.path.splitext(path)[1].lower()
    if extension == ".csv":
        return _read_csv(path, folder)
    if extension in (".jsonl", ".json"):
        return _read_jsonl(path, folder)
    raise ValueError(
        f"manifest {path!r}: unknown format {extension!r} (use .csv for "
        "DeepSpeech's format or .jsonl for JSON lines)"
    )
