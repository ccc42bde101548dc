# SPDX-License-Identifier: Apache-2.0
"""Speed and memory benchmarks; results in BENCHMARKS.md.

Run each from the repository root as a module, e.g.
`python -m benchmarks.bench_rnnt_loss`; `make bench` runs them all.
"""
