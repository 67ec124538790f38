#!/bin/sh
# Builds mintdim_beam/core/tokenizer/sp_ids (native/sp_ids/sp_ids.cc) against the
# sentencepiece of the venv: its sdist (pip download, the same version) built as a static
# library with cmake. Any failure leaves no module and exits 0 with a notice: builds then
# encode through sentencepiece's Python API, the same ids, slower.
# usage: tools/build_sp_ids.sh PYTHON WORKDIR
set -u
PY="$1"
WORK="$2"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "notice: the native SentencePiece ids module was not built ($1); builds use sentencepiece's Python API" >&2; exit 0; }
command -v cmake >/dev/null 2>&1 || fail "no cmake"
command -v g++ >/dev/null 2>&1 || fail "no g++"
VERSION=$("$PY" -c "from importlib.metadata import version; print(version('sentencepiece'))") || fail "no sentencepiece in $PY"
EXT=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
INCLUDE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
SRC="$WORK/sentencepiece-$VERSION"
LIB="$SRC/build/src/libsentencepiece.a"
mkdir -p "$WORK"
if [ ! -f "$LIB" ]; then
    rm -rf "$SRC"
    "$PY" -m pip download --quiet --no-deps --no-binary :all: "sentencepiece==$VERSION" -d "$WORK" || fail "pip download"
    tar xzf "$WORK/sentencepiece-$VERSION.tar.gz" -C "$WORK" || fail "unpacking the sdist"
    # The encoder's static library only: no trainer, no command-line tools.
    cmake "$SRC/sentencepiece" -B "$SRC/build" -DSPM_ENABLE_SHARED=OFF -DSPM_DISABLE_EMBEDDED_DATA=ON \
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_BUILD_TYPE=Release >"$WORK/build.log" 2>&1 \
        || fail "cmake: $WORK/build.log"
    cmake --build "$SRC/build" --target sentencepiece-static --parallel "$(nproc)" >>"$WORK/build.log" 2>&1 \
        || fail "building sentencepiece: $WORK/build.log"
fi
[ -f "$LIB" ] || fail "no libsentencepiece.a"
S="$SRC/sentencepiece"
OUT="$ROOT/mintdim_beam/core/tokenizer/sp_ids$EXT"
g++ -O2 -std=c++17 -fPIC -shared -w \
    -DSP_IDS_SENTENCEPIECE_VERSION="\"$VERSION\"" \
    -I"$INCLUDE" -I"$S/src" -I"$S/src/builtin_pb" -I"$S/third_party/protobuf-lite" \
    -I"$S/third_party" -I"$S" -I"$SRC/build" \
    "$ROOT/native/sp_ids/sp_ids.cc" "$LIB" -o "$OUT.tmp" || fail "compiling native/sp_ids/sp_ids.cc"
mv "$OUT.tmp" "$OUT"
echo "built $OUT against sentencepiece $VERSION"
