#!/usr/bin/env bash
# CPU vs CUDA checkpoint hashes of 20 repro steps, then data-parallel across 2 CPU processes (gloo) and
# 1, 2, 4, ... GPUs (NCCL) against one CPU process (scripts/cross_device.py); exit 1 on a difference.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/cross_device.py "$@"
