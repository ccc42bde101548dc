# SPDX-License-Identifier: Apache-2.0
"""How a run configuration is declared, checked, written, read and overridden.

A run configuration is a tree of frozen dataclasses: sections (`Section`
subclasses, e.g. `TrainingConfig`) whose fields are settings, under a root
(`RootConfig`, e.g. `RunConfig`). Each setting is declared once, with
`setting(...)`: its default, the check that validates it (run once, in
`__post_init__`, the error naming it as `training.batch_size`), and its
command-line flag (name, kind, help), from which the command lines define
their flags, so that the flags and the fields cannot drift apart.

The tree is written and read as plain JSON (`to_dict` / `from_dict`; run.json
holds it); `with_overrides` applies "training.batch_size=32" strings (the
command lines' `--set`).
"""

import dataclasses
import json
import math
import numbers
import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import TypeVar

Check = Callable[[str, Any], Any]
T = TypeVar("T", bound="RootConfig")


def setting(
    default: Any = dataclasses.MISSING, check: Check | None = None, *,
    flag: str | None = None, kind: str | None = None,
    help: str = "", choices: Iterable[str] | None = None,  # noqa: A002 (absl's)
    factory: Callable[[], Any] | None = None,
) -> Any:  # fmt: skip
    """A dataclass field declaring one setting.

    Args:
      default: its default (or `factory` for a mutable one).
      check: (qualified name, value) -> the value, normalised; raises
        ValueError naming the setting.
      flag: its command-line flag's name (default: the field's name).
      kind: the flag's kind: "integer", "float", "bool", "string", "enum",
        "list"; None: no flag of its own (set it with --set or --config).
      help: the flag's help.
      choices: an enum flag's values.
      factory: makes the default (a dict, a list), instead of `default`.
    """
    metadata = dict(
        check=check, flag=flag, kind=kind, help=help, choices=tuple(choices or ())
    )
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# -- settings both recipes have (a field cannot be shared, a factory can) -----


def files_setting(what: str) -> Any:
    """data.train_files / dev_files: paths, a comma-separated flag."""
    return setting((), paths, kind="list", help=f"Comma-separated {what}.")


def skip_bad_setting() -> Any:
    """data.skip_bad."""
    return setting(
        False, boolean, kind="bool",
        help="Drop (and count) unusable items instead of failing.",
    )  # fmt: skip


def epochs_setting(default: int) -> Any:
    """training.epochs."""
    return setting(default, positive_int, kind="integer", help="Training epochs.")


def batch_size_setting(default: int, help: str) -> Any:  # noqa: A002
    """training.batch_size, as DeepSpeech's --train_batch_size."""
    return setting(default, positive_int, flag="train_batch_size", kind="integer",
                   help=help)  # fmt: skip


def seed_setting(default: int, help: str) -> Any:  # noqa: A002
    """training.seed, as DeepSpeech's --random_seed."""
    return setting(default, any_int, flag="random_seed", kind="integer", help=help)


# -- checks: each takes the setting's qualified name and its value -----------


def positive_int(name: str, value: Any) -> int:
    """An int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def non_negative_int(name: str, value: Any) -> int:
    """An int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def any_int(name: str, value: Any) -> int:
    """An int (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    return value


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)


def positive_float(name: str, value: Any) -> float:
    """A finite number > 0, as a float."""
    value = _real(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def non_negative_float(name: str, value: Any) -> float:
    """A finite number >= 0, as a float."""
    value = _real(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def fraction(name: str, value: Any) -> float:
    """A number in [0, 1], as a float."""
    value = _real(name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return value


def a_float(name: str, value: Any) -> float:
    """A finite number, as a float."""
    return _real(name, value)


def boolean(name: str, value: Any) -> bool:
    """True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def one_of(*options: Any) -> Check:
    """A check that the value is one of options."""

    def check(name: str, value: Any) -> Any:
        if value not in options:
            raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
        return value

    return check


def paths(name: str, value: Any) -> tuple[str, ...]:
    """A tuple of paths: from a list or a comma-separated string."""
    if isinstance(value, str):
        value = [p for p in value.split(",") if p]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(p, str) and p for p in value
    ):
        raise ValueError(
            f"{name} must be a list of paths (or one comma-separated string), "
            f"got {value!r}"
        )
    return tuple(value)


def optional(check: Check) -> Check:
    """check, or None."""

    def maybe(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    return maybe


def mapping(name: str, value: Any) -> dict[str, Any]:
    """A JSON object of settings (a plain dict, copied)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of settings, got {value!r}")
    return json.loads(json.dumps(dict(value)))


# -- sections and the root -----------------------------------------------------


class Section:
    """Base of the dataclass sections: checks each setting after construction.

    `SECTION` is the section's key in its root (the prefix of error names).
    """

    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            check = field.metadata.get("check")
            if check is not None:
                value = check(f"{self.SECTION}.{field.name}", getattr(self, field.name))
                object.__setattr__(self, field.name, value)

    def to_dict(self) -> dict[str, Any]:
        """The section as JSON values (tuples as lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Any:
        """The section of a JSON object; unknown keys are named in a ValueError."""
        if not isinstance(values, Mapping):
            raise ValueError(f"{cls.SECTION} must be a JSON object, got {values!r}")
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"{cls.SECTION}: unknown settings {unknown}; they are {sorted(known)}"
            )
        return cls(**values)


class RootConfig:
    """Base of a whole run's configuration: a dataclass of `Section`s."""

    KIND: ClassVar[str] = ""  # recorded in the JSON, checked when read

    def __post_init__(self) -> None:
        for key, section in self.sections().items():
            if not isinstance(getattr(self, key), section):
                raise ValueError(
                    f"{key} must be a {section.__name__}, got "
                    f"{type(getattr(self, key)).__name__}"
                )

    def check(self) -> None:
        """What only building the run's layers checks (after the strategy)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.KIND}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            out[field.name] = getattr(self, field.name).to_dict()
        return out

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """{section key: its Section class}."""
        return {f.name: f.type for f in dataclasses.fields(cls)}  # type: ignore[arg-type,misc]

    @classmethod
    def from_dict(cls: type[T], values: Mapping[str, Any]) -> T:
        """The configuration of a JSON object (missing sections: defaults)."""
        if not isinstance(values, Mapping):
            raise ValueError(
                f"a run configuration must be a JSON object, got {values!r}"
            )
        values = dict(values)
        kind = values.pop("kind", cls.KIND)
        if kind != cls.KIND:
            raise ValueError(
                f"this is the configuration of a {kind!r} run, not of a "
                f"{cls.KIND!r} one"
            )
        sections = cls.sections()
        unknown = sorted(set(values) - set(sections))
        if unknown:
            raise ValueError(
                f"unknown sections {unknown}; a {cls.KIND} run has {sorted(sections)}"
            )
        return cls(
            **{
                key: section.from_dict(values[key]) if key in values else section()
                for key, section in sections.items()
            }
        )

    def to_json(self, path: str | None = None) -> str:
        """The configuration as JSON text; written to path too when given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text + "\n")
            os.replace(path + ".tmp", path)
        return text

    @classmethod
    def from_json(cls: type[T], path: str) -> T:
        """The configuration in a JSON file: a run.json, or the configuration alone.

        A run.json ({"config": ..., "state": ...}) of an older release is read
        through `from_legacy` where the class has one.
        """
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except OSError as error:
            raise ValueError(
                f"{path}: cannot read the configuration ({error})"
            ) from None
        except ValueError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
        if isinstance(values, Mapping) and "config" in values and "state" in values:
            values = values["config"]
        try:
            if isinstance(values, Mapping) and "kind" not in values:
                return cls.from_legacy(values)
            return cls.from_dict(values)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    # The sections of an older release's run.json (no "kind"), read by
    # `_from_legacy` (none: such files are refused).
    LEGACY_SECTIONS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_legacy(cls: type[T], values: Mapping[str, Any]) -> T:
        """A configuration of 0.1's layout (no "kind"); ValueError naming what lacks."""
        if not isinstance(values, Mapping):
            raise ValueError(
                f"a run configuration must be a JSON object, got {values!r}"
            )
        missing = [k for k in cls.LEGACY_SECTIONS if k not in values]
        if missing or not cls.LEGACY_SECTIONS:
            raise ValueError(
                f"not a {cls.KIND} run configuration: it has no 'kind' and lacks "
                f"{missing or 'a layout this release reads'}"
            )
        try:
            return cls._from_legacy(values)
        except KeyError as error:
            raise ValueError(
                f"a 0.1 {cls.KIND} run configuration lacks {error.args[0]!r}"
            ) from None
        except (TypeError, AttributeError) as error:
            raise ValueError(f"a 0.1 {cls.KIND} run configuration: {error}") from None

    @classmethod
    def _from_legacy(cls: type[T], values: Mapping[str, Any]) -> T:
        raise NotImplementedError

    def with_overrides(self: T, assignments: Iterable[str]) -> T:
        """A copy with "section.setting=value" assignments applied (--set).

        The value is read as JSON where it parses (32, 0.5, true, null,
        [4, 8], {"units": 512}), else as a string. A setting inside a
        dict-valued setting takes a longer key: model.encoder.units=512.
        """
        values = self.to_dict()
        for assignment in assignments:
            key, sep, text = assignment.partition("=")
            parts = key.strip().split(".")
            if not sep or len(parts) < 2 or not all(parts):
                raise ValueError(
                    f"--set {assignment!r}: expected section.setting=value, e.g. "
                    "training.batch_size=32"
                )
            if parts[0] not in self.sections():
                raise ValueError(
                    f"--set {assignment!r}: unknown section {parts[0]!r}; they are "
                    f"{sorted(self.sections())}"
                )
            try:
                value = json.loads(text)
            except ValueError:
                value = text
            target = values
            for part in parts[:-1]:
                child = target.setdefault(part, {})
                if not isinstance(child, dict):
                    raise ValueError(
                        f"--set {assignment!r}: {'.'.join(parts[:-1])} is not a "
                        "section or dict of settings"
                    )
                target = child
            target[parts[-1]] = value
        return type(self).from_dict(values)


def flag_fields(root: type[RootConfig]) -> list[tuple[str, dataclasses.Field]]:
    """(qualified name, field) of every setting of a root with a flag of its own."""
    found = []
    for key, section in root.sections().items():
        for field in dataclasses.fields(section):  # type: ignore[arg-type]
            if field.metadata.get("kind"):
                found.append((f"{key}.{field.name}", field))
    return found


def flag_name(field: dataclasses.Field) -> str:
    """The command-line flag of a setting."""
    return field.metadata.get("flag") or field.name
