# SPDX-License-Identifier: Apache-2.0
"""Command-line flags made from a run configuration's fields, and read back.

Each setting of a `RootConfig` that declares a flag kind
(`tf_transducer.training.config_base.setting`) becomes an absl flag of
that name, kind, default and help (`define_config_flags`): the flags and
the configuration cannot drift apart. `config_from_flags` builds the
configuration: its defaults, or the file of `--config` (a run.json or a
configuration written by `RunConfig.to_json`), then every such flag given
on the command line, then `--set section.setting=value` assignments. A bad
value is an error naming its flag.
"""

import dataclasses
import functools
import re
import sys
from collections.abc import Mapping
from typing import Any

from absl import flags

from tf_transducer.cli import define as define_flag
from tf_transducer.cli import flag_group
from tf_transducer.cli._common import CliError
from tf_transducer.training.config_base import flag_fields
from tf_transducer.training.config_base import flag_name

FLAGS = flags.FLAGS


def define_config_flags(root: type, groups: Mapping[str, str]) -> None:
    """Defines the flags of a configuration's settings, and --config and --set.

    They are listed in the calling command line's --help.

    Args:
      root: the `RootConfig` class.
      groups: {section key: its --help group}.
    """
    caller = sys._getframe(1).f_globals["__name__"]
    define = functools.partial(define_flag, module=caller)
    current = None
    for qualified, field in flag_fields(root):
        section = qualified.split(".")[0]
        if groups[section] != current:
            current = groups[section]
            flag_group(current, module=caller)
        kind = field.metadata["kind"]
        default = _flag_default(field)
        help_text = field.metadata["help"]
        if kind == "enum":
            choices = list(field.metadata["choices"])
            define(kind, flag_name(field), default, choices, help_text)
            continue
        if kind == "list":
            kind, default = "string", ",".join(default)
        define(kind, flag_name(field), default, help_text)
    flag_group("configuration", module=caller)
    define(
        "string",
        "config",
        "",
        "train: a run configuration to start from (a run.json, or a file "
        "written by RunConfig.to_json); flags given on the command line and "
        "--set override it.",
    )
    define(
        "multi_string",
        "set",
        [],
        "train: section.setting=value, overriding a setting (repeatable), e.g. "
        "--set training.batch_size=32 --set model.encoder.units=512.",
    )


def _flag_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def _flag_value(field: dataclasses.Field, value: Any) -> Any:
    """A flag's value as the setting takes it (lists split at commas)."""
    if field.metadata["kind"] == "list" and isinstance(value, str):
        return [p for p in value.split(",") if p]
    return value


def config_from_flags(root: type, given: Mapping[str, Any] | None = None) -> Any:
    """The configuration the command line describes.

    Args:
      root: the `RootConfig` class.
      given: extra {"section.setting": value} to apply after the flags and
        before --set (settings a command line reads from flags of its own).

    Raises:
      CliError: a bad --config file, flag value or --set assignment (named).
    """
    if FLAGS.config:
        try:
            config = root.from_json(FLAGS.config)
        except ValueError as error:
            raise CliError(f"--config: {error}") from None
    else:
        config = root()
    values = config.to_dict()
    for qualified, field in flag_fields(root):
        name = flag_name(field)
        if not FLAGS[name].present:
            continue
        section, key = qualified.split(".")
        value = _flag_value(field, FLAGS[name].value)
        check = field.metadata["check"]
        if check is not None:
            try:
                value = check(f"--{name}", value)
            except ValueError as error:
                raise CliError(str(error)) from None
        values[section][key] = value
    for qualified, value in (given or {}).items():
        section, key = qualified.split(".", 1)
        values[section][key] = value
    try:
        config = root.from_dict(_json_ready(values))
    except ValueError as error:
        raise CliError(_flag_names(root, str(error))) from None
    try:
        return config.with_overrides(FLAGS.set)
    except ValueError as error:
        message = str(error)
        raise CliError(
            message if message.startswith("--set") else f"--set: {message}"
        ) from None


def _flag_names(root: type, message: str) -> str:
    """A configuration's error with each setting named by its flag."""
    for qualified, field in flag_fields(root):
        message = re.sub(
            rf"(?<![\w.-]){re.escape(qualified)}(?![\w])",
            f"--{flag_name(field)}",
            message,
        )
    return message


def _json_ready(values: Any) -> Any:
    """Tuples as lists, as the configuration reads them from JSON."""
    if isinstance(values, Mapping):
        return {k: _json_ready(v) for k, v in values.items()}
    if isinstance(values, (list, tuple)):
        return [_json_ready(v) for v in values]
    return values


def settings_given(root: type) -> list[str]:
    """The flags of a configuration's settings that the command line gives."""
    return [
        flag_name(field)
        for _, field in flag_fields(root)
        if FLAGS[flag_name(field)].present
    ]
