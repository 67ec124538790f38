#!/bin/sh
# Builds mintdim_beam/train_tokenizer/bpe_train (native/bpe_train/src/main.rs) over the
# `tokenizers` crate that the venv's Python `tokenizers` was built from: the crate inside
# its sdist (pip download, the same version), compiled with cargo. Any failure leaves no
# program and exits 0 with a notice: BPE training then feeds the summed counts to the
# Python package's own trainer, the same vocabulary, slower.
# usage: tools/build_bpe_train.sh PYTHON WORKDIR
set -u
PY="$1"
mkdir -p "$2" && WORK=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "notice: the native BPE trainer was not built ($1); tokenizer training uses the Python package's trainer" >&2; exit 0; }
command -v cargo >/dev/null 2>&1 || fail "no cargo"
VERSION=$("$PY" -c "from importlib.metadata import version; print(version('tokenizers'))") || fail "no tokenizers in $PY"
SRC="$WORK/tokenizers-$VERSION"
mkdir -p "$WORK"
if [ ! -f "$SRC/tokenizers/Cargo.toml" ]; then
    rm -rf "$SRC"
    "$PY" -m pip download --quiet --no-deps --no-binary tokenizers "tokenizers==$VERSION" -d "$WORK" \
        || fail "pip download"
    tar xzf "$WORK/tokenizers-$VERSION.tar.gz" -C "$WORK" || fail "unpacking the sdist"
fi
CRATE="$SRC/tokenizers"
[ -f "$CRATE/Cargo.toml" ] || fail "no crate in the sdist"
# A package of its own beside the sdist: our main.rs, the sdist's crate by path, the
# versions of the other crates pinned by native/bpe_train/Cargo.lock.
PKG="$WORK/build"
mkdir -p "$PKG"
sed "s|^tokenizers = .*|tokenizers = { path = \"$CRATE\", default-features = false, features = [\"fancy-regex\"] }|; s|^\[\[bin\]\]||" \
    "$ROOT/native/bpe_train/Cargo.toml" > "$PKG/Cargo.toml"
printf '\n[[bin]]\nname = "bpe_train"\npath = "%s"\n' "$ROOT/native/bpe_train/src/main.rs" >> "$PKG/Cargo.toml"
[ -f "$PKG/Cargo.lock" ] || cp "$ROOT/native/bpe_train/Cargo.lock" "$PKG/Cargo.lock" 2>/dev/null
BPE_TRAIN_TOKENIZERS_VERSION="$VERSION" cargo build --quiet --release --manifest-path "$PKG/Cargo.toml" \
    >"$WORK/build.log" 2>&1 || fail "cargo build: $WORK/build.log"
OUT="$ROOT/mintdim_beam/train_tokenizer/bpe_train"
mkdir -p "$(dirname "$OUT")"
cp "$PKG/target/release/bpe_train" "$OUT.tmp" && mv "$OUT.tmp" "$OUT" || fail "copying the program"
echo "built $OUT over the tokenizers crate of tokenizers $VERSION"
