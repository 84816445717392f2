#!/usr/bin/env bash
# Input of bench/trace_vs_rg.py: one folder with torch 2.13.0 (the wheel on this machine's disk,
# else the package index), vllm, sglang, flashinfer-python, transformers and triton, all installed
# --no-deps (read, never imported): over ten thousand .py files. Also installs ripgrep.
# Idempotent: a finished folder is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=bench/.data/site-packages
PIP=(.venv/bin/python -m pip -q --disable-pip-version-check)

if ! command -v rg >/dev/null; then
  apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null
fi

if [ ! -f "$DIR/.complete" ]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  torch_spec=torch==2.13.0
  local_wheel=$(ls /opt/wheels/torch-2.13.0*-cp311-*.whl 2>/dev/null | head -1 || true)
  [ -n "$local_wheel" ] && torch_spec=$local_wheel
  "${PIP[@]}" install --no-deps --no-compile --target "$DIR" "$torch_spec" \
    vllm sglang flashinfer-python transformers triton
  touch "$DIR/.complete"
fi
echo "$DIR: $(find "$DIR" -name '*.py' | wc -l) .py files"
