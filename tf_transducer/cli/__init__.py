# SPDX-License-Identifier: Apache-2.0
"""Command lines (absl apps) over the library.

`python -m tf_transducer.cli.deepspeech --help`,
`python -m tf_transducer.cli.transducer --help`.

`--help` lists each command line's own flags, grouped; `--helpfull` adds
absl's and TensorFlow's.
"""

import sys
import textwrap

from absl import app
from absl import flags
from absl import logging

# module name -> [(group, flag name)], in definition order.
_OWN_FLAGS = {}
_GROUP = {}  # module name -> the group of the flags it defines next
HELP_ARGS = ("-h", "-help", "--help", "--helpshort", "-?")


def flag_group(name, module=None):
    """The --help group of the flags the calling module (or `module`) defines next."""
    _GROUP[module or sys._getframe(1).f_globals["__name__"]] = name


def define(kind, name, *args, module=None, **kwargs):
    """Defines an absl flag and lists it in the calling command line's --help.

    The flag is defined unless a sibling command line already did; it is
    listed under the caller's (or `module`'s) current `flag_group`.

    The DeepSpeech and transducer command lines share flag names
    (--train_files, --checkpoint_dir, ...); both modules can then be imported
    in one process (the first definition's default wins there).
    """
    if name not in flags.FLAGS:
        getattr(flags, f"DEFINE_{kind}")(name, *args, **kwargs)
    module = module or sys._getframe(1).f_globals["__name__"]
    _OWN_FLAGS.setdefault(module, []).append((_GROUP.get(module, "other"), name))


def define_distribution():
    """--distribution, in the calling command line's current flag group."""
    module = sys._getframe(1).f_globals["__name__"]
    if "distribution" not in flags.FLAGS:
        flags.DEFINE_enum(
            "distribution",
            "auto",
            ["auto", "none", "mirrored", "multi_worker"],
            "auto: several workers when TF_CONFIG names them, else every GPU "
            "here; none: one device; mirrored: this machine's GPUs; "
            "multi_worker: the cluster of TF_CONFIG.",
        )
    _OWN_FLAGS.setdefault(module, []).append(
        (_GROUP.get(module, "other"), "distribution")
    )


def help_text(module, doc):
    """The --help of a command line: its docstring, then its flags by group."""
    lines = [textwrap.dedent(doc or "").strip(), ""]
    groups = {}
    for group, name in _OWN_FLAGS.get(module, []):
        groups.setdefault(group, []).append(name)
    for group, names in groups.items():
        lines.append(f"{group} flags:")
        for name in names:
            flag = flags.FLAGS[name]
            default = (
                "" if flag.default in ("", None) else f" (default: {flag.default})"
            )
            lines.append(f"  --{name}: {flag.help}{default}")
        lines.append("")
    lines.append("--helpfull also lists absl's and TensorFlow's flags.")
    return "\n".join(lines)


def run(main):
    """app.run(main), with a --help that lists the caller's own flags.

    TensorFlow's informational log lines are off unless --verbosity is given.
    Bad input (a CliError, ValueError or FileNotFoundError: their messages
    name the file or flag) ends with "error: <message>" and exit code 1.
    """
    caller = sys._getframe(1).f_globals
    if any(arg in HELP_ARGS for arg in sys.argv[1:]):
        print(help_text(caller["__name__"], caller.get("__doc__")))
        sys.exit(0)

    def quiet_main(argv):
        from tf_transducer.cli._common import CliError

        if not flags.FLAGS["verbosity"].present:
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except (CliError, ValueError, FileNotFoundError) as error:
            logging.error("%s", error)
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)

    app.run(quiet_main)
