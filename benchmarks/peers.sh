#!/usr/bin/env bash
# The peers of the pack and chat benchmarks (issue 28), each in its own venv with pinned
# versions, installed from the package registry with pip:
#   benchmarks/.work/venvs/datatrove   datatrove 0.10.1 (+ orjson)      run_pack.py (c)
#   benchmarks/.work/venvs/dolma       dolma 1.2.1 (`dolma tokens`)      run_pack.py (d)
#   benchmarks/.work/venvs/datasets    datasets + transformers           run_chat.py (c)
#   benchmarks/.work/venvs/megatron    what Megatron-LM's tools/preprocess_data.py
#                                      imports (torch, triton, transformers, ...)
#                                                                        run_pack.py (e)
# datatrove's and datasets' venvs get the tokenizers version mintdim-beam's venv has (so
# the peers and our fallback engine encode with the same library); dolma 1.2.1 requires
# tokenizers<=0.19.1 and numpy<2, so its venv has those.
#
# megatron: Megatron-LM's code is not installed here (run_pack.py runs the checkout the
# user made, --megatron-lm PATH); this venv holds what preprocess_data.py imports at the
# pinned tag (core_v0.16.1): torch, and through megatron.training triton, pydantic, six,
# regex, pyyaml, packaging; transformers and tokenizers for its HuggingFaceTokenizer.
# torch: see install_torch. The venv `make test-interop` sets up holds all of it too
# (run_pack.py --megatron-python .venv/bin/python).
# With MINTDIM_MEGATRON_LM set to the checkout, the check runs its preprocess_data.py --help.
#
# usage: bash benchmarks/peers.sh [datatrove] [dolma] [datasets] [megatron]
#        (default: datatrove dolma datasets; megatron when asked)
#        PYTHON=python3.11 to choose the interpreter (default: python3.11, else python3).
# A venv whose marker (VENV/.peer-ok, holding the pins) matches is kept as it is.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENVS="${MINTDIM_PEER_VENVS:-$HERE/.work/venvs}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"

TOKENIZERS="tokenizers==0.23.3"  # = mintdim-beam's venv (the peers' encoder)
NUMPY="numpy==2.3.5"
declare -A PINS=(
  [datatrove]="datatrove==0.10.1 orjson==3.13.0 $TOKENIZERS $NUMPY"
  [dolma]="dolma==1.2.1 tokenizers==0.19.1 numpy==1.26.4"  # dolma 1.2.1 requires tokenizers<=0.19.1, numpy<2
  [datasets]="datasets==5.2.0 transformers==5.24.0 jinja2==3.1.6 $TOKENIZERS $NUMPY"
  [megatron]="torch==2.13.0 triton==3.7.1 transformers==5.24.0 $TOKENIZERS $NUMPY packaging==26.4 pydantic==2.14.4 six==1.17.0 regex==2026.11.19 pyyaml==6.0.4"
)
# What each venv must import afterwards.
declare -A CHECK=(
  [datatrove]="import datatrove, orjson, tokenizers"
  [dolma]="import dolma, tokenizers, numpy; from dolma.cli.__main__ import main"
  [datasets]="import datasets, transformers, tokenizers; from transformers import PreTrainedTokenizerFast"
  [megatron]="import torch, triton, transformers, tokenizers, numpy, pydantic, six, regex, yaml, packaging"
)
TORCH_PIN="torch==2.13.0"

# Installs torch 2.13.0 into venv $1: TORCH_WHEEL (a wheel file) if given, else a wheel
# among pip's find-links (a CPU build where a machine keeps one), else the package index's
# torch 2.13.0 with its dependencies: for Linux a CUDA build, whose CUDA libraries pip
# brings too (several GB; about 2 minutes here); it imports and runs on a machine without
# a GPU, and preprocess_data.py runs no tensor op.
install_torch() {
  local python="$1/bin/python"
  if [ -n "${TORCH_WHEEL:-}" ]; then
    "$python" -m pip install -q "$TORCH_WHEEL"
  elif ! "$python" -m pip install -q --no-index "$TORCH_PIN" 2>/dev/null; then
    echo "megatron: no torch 2.13.0 among pip's find-links: installing the package index's (a CUDA build and its libraries, several GB)" >&2
    "$python" -m pip install -q "$TORCH_PIN"
  fi
  "$python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')"
}

peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(datatrove dolma datasets)
mkdir -p "$VENVS"
for peer in "${peers[@]}"; do
  pins="${PINS[$peer]:?unknown peer $peer (datatrove, dolma, datasets or megatron)}"
  venv="$VENVS/$peer"
  if [ -f "$venv/.peer-ok" ] && [ "$(cat "$venv/.peer-ok")" = "$pins" ]; then
    echo "$peer: $venv is up to date ($pins)"
    continue
  fi
  echo "$peer: creating $venv with $pins"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  if [ "$peer" = megatron ] && ! install_torch "$venv"; then
    rm -rf "$venv"
    exit 1
  fi
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $pins
  "$venv/bin/python" -c "${CHECK[$peer]}"
  if [ "$peer" = megatron ] && [ -n "${MINTDIM_MEGATRON_LM:-}" ]; then
    "$venv/bin/python" "$MINTDIM_MEGATRON_LM/tools/preprocess_data.py" --help > /dev/null
  fi
  echo "$pins" > "$venv/.peer-ok"
  "$venv/bin/python" -m pip freeze > "$venv/.peer-freeze.txt"
  echo "$peer: ok ($("$venv/bin/python" -V))"
done
