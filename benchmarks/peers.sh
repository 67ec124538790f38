#!/usr/bin/env bash
# The peers of the pack and chat benchmarks (issue 28), each in its own venv with pinned
# versions, installed from the package registry with pip:
#   benchmarks/.work/venvs/datatrove   datatrove 0.10.1 (+ orjson)      run_pack.py (c)
#   benchmarks/.work/venvs/dolma       dolma 1.2.1 (`dolma tokens`)      run_pack.py (d)
#   benchmarks/.work/venvs/datasets    datasets + transformers           run_chat.py (c)
# datatrove's and datasets' venvs get the tokenizers version mintdim-beam's venv has (so
# the peers and our fallback engine encode with the same library); dolma 1.2.1 requires
# tokenizers<=0.19.1 and numpy<2, so its venv has those.
#
# usage: bash benchmarks/peers.sh [datatrove] [dolma] [datasets]   (default: all three)
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
)
# What each venv must import afterwards.
declare -A CHECK=(
  [datatrove]="import datatrove, orjson, tokenizers"
  [dolma]="import dolma, tokenizers, numpy; from dolma.cli.__main__ import main"
  [datasets]="import datasets, transformers, tokenizers; from transformers import PreTrainedTokenizerFast"
)

peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(datatrove dolma datasets)
mkdir -p "$VENVS"
for peer in "${peers[@]}"; do
  pins="${PINS[$peer]:?unknown peer $peer (datatrove, dolma or datasets)}"
  venv="$VENVS/$peer"
  if [ -f "$venv/.peer-ok" ] && [ "$(cat "$venv/.peer-ok")" = "$pins" ]; then
    echo "$peer: $venv is up to date ($pins)"
    continue
  fi
  echo "$peer: creating $venv with $pins"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $pins
  "$venv/bin/python" -c "${CHECK[$peer]}"
  echo "$pins" > "$venv/.peer-ok"
  "$venv/bin/python" -m pip freeze > "$venv/.peer-freeze.txt"
  echo "$peer: ok ($("$venv/bin/python" -V))"
done
