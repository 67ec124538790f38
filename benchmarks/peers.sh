#!/usr/bin/env bash
# The peers of the pack and chat benchmarks (issue 28), each in its own venv with pinned
# versions, installed from the package registry with pip:
#   benchmarks/.work/venvs/datatrove   datatrove 0.10.1 (+ orjson)      run_pack.py (c)
#   benchmarks/.work/venvs/dolma       dolma 1.2.1 (`dolma tokens`)      run_pack.py (d)
#   benchmarks/.work/venvs/datasets    datasets + transformers           run_chat.py (c)
#   benchmarks/.work/venvs/megatron    what Megatron-LM's tools/preprocess_data.py
#                                      imports (torch CPU, triton, transformers, ...)
#                                                                        run_pack.py (e)
# datatrove's and datasets' venvs get the tokenizers version mintdim-beam's venv has (so
# the peers and our fallback engine encode with the same library); dolma 1.2.1 requires
# tokenizers<=0.19.1 and numpy<2, so its venv has those.
#
# megatron: Megatron-LM's code is not installed here (run_pack.py runs the checkout the
# user made, --megatron-lm PATH); this venv holds what preprocess_data.py imports at the
# pinned tag (core_v0.16.1): torch, and through megatron.training triton, pydantic, six,
# regex, pyyaml, packaging; transformers and tokenizers for its HuggingFaceTokenizer. It
# runs no tensor op, so torch is a CPU build: PyPI's torch for Linux is a CUDA build
# whose CUDA libraries (several GB) pip would pull in, so torch 2.13.0 is taken only
# from TORCH_WHEEL (a torch-2.13.0+cpu wheel file) or, without it, from pip's
# find-links (`--no-index`: nothing is downloaded); none: the script stops and says so.
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

# Installs torch 2.13.0 into venv $1 from TORCH_WHEEL or pip's find-links only, without
# its dependencies (pip adds those of a CPU build, none of them CUDA, with the rest).
install_cpu_torch() {
  local python="$1/bin/python"
  if [ -n "${TORCH_WHEEL:-}" ]; then
    "$python" -m pip install -q --no-deps "$TORCH_WHEEL"
  elif ! "$python" -m pip install -q --no-index --no-deps "$TORCH_PIN" 2>/dev/null; then
    echo "megatron: no torch 2.13.0 wheel among pip's find-links ($("$python" -m pip config list 2>/dev/null | grep -i find-links || echo none))." >&2
    echo "  PyPI's torch for Linux is a CUDA build that pulls several GB of CUDA libraries;" >&2
    echo "  give a CPU build: TORCH_WHEEL=/path/to/torch-2.13.0+cpu-...whl bash benchmarks/peers.sh megatron" >&2
    return 1
  fi
  if ! "$python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
    echo "megatron: the torch installed does not import as torch 2.13.0 (a CUDA build without its CUDA libraries?)" >&2
    return 1
  fi
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
  if [ "$peer" = megatron ] && ! install_cpu_torch "$venv"; then
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
