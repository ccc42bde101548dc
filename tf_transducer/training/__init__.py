"""Training runs: run folders that resume, refuse or start over."""

from tf_transducer.training.run_dir import RunDirectory, RunStateCallback

__all__ = ["RunDirectory", "RunStateCallback"]
