"""Command lines (absl apps): `python -m tf_transducer.cli.deepspeech --helpfull`,
`python -m tf_transducer.cli.transducer train --helpfull`."""

from absl import flags


def define(kind, name, *args, **kwargs):
    """Defines an absl flag unless a sibling command line already did.

    The DeepSpeech and transducer command lines share flag names
    (--train_files, --checkpoint_dir, ...); both modules can then be imported
    in one process (the first definition's default wins there).
    """
    if name not in flags.FLAGS:
        getattr(flags, f"DEFINE_{kind}")(name, *args, **kwargs)
