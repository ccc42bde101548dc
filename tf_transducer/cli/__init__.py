"""Command lines (absl apps): `python -m tf_transducer.cli.deepspeech --helpfull`."""
