# SPDX-License-Identifier: Apache-2.0
"""Test-wide settings: quiet TensorFlow logs before TensorFlow is imported."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
