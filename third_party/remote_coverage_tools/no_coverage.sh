#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
echo "bazel coverage is not available: this workspace uses a local stand-in" \
  "for @remote_coverage_tools (third_party/remote_coverage_tools) so that" \
  "it builds offline. Measure C++ coverage with gcov/lcov instead." >&2
exit 1
