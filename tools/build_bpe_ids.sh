#!/bin/sh
# Builds mintdim_beam/core/tokenizer/bpe_ids (native/bpe_ids, Rust) for the `tokenizers`
# of the venv: the crates that must agree with it bit for bit (Oniguruma, the Unicode
# normalizer, the added-token automaton) pinned to the versions of the Cargo.lock in
# its sdist (pip download, the same version), compiled with cargo. Any failure leaves no
# module and exits 0 with a notice: byte-level BPE builds then use tiktoken where it is
# proven equal, else `tokenizers`; the same ids, slower.
# usage: tools/build_bpe_ids.sh PYTHON WORKDIR
set -u
PY=$(command -v "$1") || { echo "notice: no Python $1" >&2; exit 0; }
case "$PY" in /*) ;; *) PY="$(pwd)/$PY" ;; esac
mkdir -p "$2" && WORK=$(cd "$2" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "notice: the native BPE engine was not built ($1); byte-level BPE builds use tiktoken or tokenizers" >&2; exit 0; }
command -v cargo >/dev/null 2>&1 || fail "no cargo"
VERSION=$("$PY" -c "from importlib.metadata import version; print(version('tokenizers'))") || fail "no tokenizers in $PY"
EXT=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))") || fail "no EXT_SUFFIX"
SRC="$WORK/tokenizers-$VERSION"
if [ ! -f "$SRC/bindings/python/Cargo.lock" ]; then
    rm -rf "$SRC"
    "$PY" -m pip download --quiet --no-deps --no-binary tokenizers "tokenizers==$VERSION" -d "$WORK" \
        || fail "pip download"
    tar xzf "$WORK/tokenizers-$VERSION.tar.gz" -C "$WORK" || fail "unpacking the sdist"
fi
LOCK="$SRC/bindings/python/Cargo.lock"
[ -f "$LOCK" ] || fail "no Cargo.lock in the sdist"
# The version `tokenizers` locks for a crate.
locked() { awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' "$LOCK"; }
PKG="$WORK/build"
mkdir -p "$PKG"
sed -e "s|^onig = .*|onig = { version = \"=$(locked onig)\", default-features = false }|" \
    -e "s|^onig_sys = .*|onig_sys = { version = \"=$(locked onig_sys)\", default-features = false }|" \
    -e "s|^unicode-normalization-alignments = .*|unicode-normalization-alignments = \"=$(locked unicode-normalization-alignments)\"|" \
    -e "s|^daachorse = .*|daachorse = \"=$(locked daachorse)\"|" \
    -e "s|^path = .*|path = \"$ROOT/native/bpe_ids/src/lib.rs\"|" \
    "$ROOT/native/bpe_ids/Cargo.toml" > "$PKG/Cargo.toml"
# The other crates at the versions `tokenizers` locks (cargo keeps what this package uses).
[ -f "$PKG/Cargo.lock" ] || cp "$LOCK" "$PKG/Cargo.lock"
PYO3_PYTHON="$PY" BPE_IDS_TOKENIZERS_VERSION="$VERSION" \
    cargo build --quiet --release --manifest-path "$PKG/Cargo.toml" >"$WORK/build.log" 2>&1 \
    || fail "cargo build: $WORK/build.log"
OUT="$ROOT/mintdim_beam/core/tokenizer/bpe_ids$EXT"
cp "$PKG/target/release/libbpe_ids.so" "$OUT.tmp" && mv "$OUT.tmp" "$OUT" || fail "copying the module"
echo "built $OUT for tokenizers $VERSION (Oniguruma crate $(locked onig_sys))"
