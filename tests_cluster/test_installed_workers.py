"""Workers that install the package as Dataflow's do (issue 43): from its sdist, into a
fresh venv, the way a Flex Template image or `--setup_file` staging installs it. An
sdist made from this tree carries the native modules `make setup` built (package data);
one made from a clean checkout carries none. Either way a build gives the same bytes,
and its manifest says which engine encoded (`engine.name`) and what each worker used
(`engine.used`): the launcher may plan the native engine for workers that lack it.

The fresh venvs get the package by `pip install` of the sdist and reach its
dependencies (apache-beam and the rest, as pip would install them) through a path file
to this venv's site-packages, which holds no mintdim_beam of its own (an editable
install's finder is not read through a path file)."""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import free_port, read_tree, wait_port  # noqa: E402

BIN = Path(sys.executable).parent


def _sdist(source: Path, into: Path) -> Path:
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(into)], cwd=source,
                   check=True, capture_output=True, timeout=300)
    shutil.rmtree(source / "build", ignore_errors=True)
    shutil.rmtree(source / "mintdim_beam.egg-info", ignore_errors=True)
    found, = into.glob("mintdim_beam-*.tar.gz")
    return found


def _fresh_venv(sdist: Path, where: Path) -> Path:
    """A venv with the sdist pip-installed: its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(sdist)],
                   check=True, capture_output=True, timeout=600)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    """{"with": python of a venv from this tree's sdist, "without": from a clean
    checkout's}."""
    root = tmp_path_factory.mktemp("installed")
    clean = root / "checkout"
    clean.mkdir()
    # The tree's files as a clone has them (tracked and new ones, no build products).
    subprocess.run(f"git -C {REPO} ls-files -z --cached --others --exclude-standard | "
                   f"tar -C {REPO} --null -T - -c | tar x -C {clean}", shell=True, check=True,
                   executable="/bin/bash")
    with_natives = _sdist(REPO, root / "sdist_with")
    without = _sdist(clean, root / "sdist_without")
    return {"with": _fresh_venv(with_natives, root / "venv_with"),
            "without": _fresh_venv(without, root / "venv_without")}


def _where_and_engines(python: Path) -> dict:
    probe = ("import json, mintdim_beam; from mintdim_beam.core.tokenizer import native_bpe, "
             "sp_native; print(json.dumps({'file': mintdim_beam.__file__, "
             "'native': native_bpe.module()[1], 'sp_ids': sp_native.module()[1]}))")
    return json.loads(subprocess.run([str(python), "-c", probe], check=True, capture_output=True,
                                     text=True, cwd="/").stdout)


def test_an_sdist_carries_the_native_modules_where_they_were_built(venvs):
    with_natives, without = (_where_and_engines(venvs[k]) for k in ("with", "without"))
    for probe, python in ((with_natives, venvs["with"]), (without, venvs["without"])):
        assert probe["file"].startswith(str(python.parent.parent))  # the installed copy
    assert with_natives["native"] is None and with_natives["sp_ids"] is None
    assert "not built" in without["native"] and "not built" in without["sp_ids"]


def _configs(work: Path) -> dict:
    examples = REPO / "examples"
    source = {"files": [str(examples / "data/instructions.jsonl")],
              "fields": [["instruction", "input", "output"]],
              "templates": ["{instruction}\n\n{input}\n\n{output}"]}
    bpe = {"type": "hf_json", "files": [str(examples / "chat/tokenizer.json")],
           "config": str(examples / "chat/tokenizer_config.json")}
    unit = {"source": source, "units": {"sizes": [[128, 256, 512, 1024]], "build_batch": [64]},
            "on_overflow": "truncate", "on_template_unk": "continue"}
    return {"pack": {"source": source, "tokenizer": bpe, "pack": {"eod": "<|im_end|>", "seed": 3},
                     "output": {"dir": str(work / "out")}},
            "build": {**unit, "tokenizer": bpe,
                      "output": {"dir": str(work / "out"), "samples_per_shard": [200]}},
            "build_sp": {**unit, "tokenizer": {"type": "sentencepiece",
                                               "files": [str(examples / "tokenizer/demo.model")]},
                         "output": {"dir": str(work / "out"), "samples_per_shard": [200]}}}


def _build(python: Path, work: Path, command: str, flags=()) -> tuple[dict, dict]:
    """Runs the build `command` names with `python`: (its manifest's engine block, the
    output's other files)."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / f"{command}.json"
    config.write_text(json.dumps(_configs(work)[command]))
    env = dict(os.environ, PATH=f"{python.parent}:{os.environ['PATH']}")
    proc = subprocess.run([str(python), "-m", "mintdim_beam.cli", command.split("_")[0],
                           str(config), *flags], capture_output=True, text=True, timeout=900,
                          cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tree = read_tree(work / "out", drop_manifest_extras=False)
    doc = json.loads(tree.pop("manifest.json"))
    tree.pop("per_dataset_sequences.json", None)  # names the output's own path
    return (doc.get("tokenizer_card") or doc["tokenizer"])["engine"], tree


@contextlib.contextmanager
def _workers_of(python: Path, state: Path):
    """Beam's job service and an EXTERNAL worker pool run by `python` (a fresh venv),
    from a folder holding no source tree: the launcher's flags."""
    env = dict(os.environ, PATH=f"{python.parent}:{os.environ['PATH']}")
    job_port, pool_port = free_port(), free_port()
    state.mkdir(parents=True, exist_ok=True)
    pool = subprocess.Popen([str(python), "-m", "apache_beam.runners.worker.worker_pool_main",
                             "--service_port", str(pool_port)], env=env, cwd=state,
                            stdout=open(state / "pool.log", "w"), stderr=subprocess.STDOUT)
    jobs = subprocess.Popen([str(python), "-m",
                             "apache_beam.runners.portability.local_job_service_main",
                             "--port", str(job_port)], env=env, cwd=state,
                            stdout=open(state / "jobs.log", "w"), stderr=subprocess.STDOUT)
    try:
        wait_port(pool_port, pool)
        wait_port(job_port, jobs)
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}",
               "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}"]
    finally:
        for proc in (pool, jobs):
            proc.terminate()
            proc.wait(timeout=60)


@pytest.mark.parametrize("command", ["pack", "build"])
def test_installed_workers_build_the_same_bytes_and_say_which_engine_encoded(venvs, tmp_path,
                                                                            command):
    """The reference: this venv, native modules at hand. Then each fresh venv runs the
    whole build, and last the launcher here plans the native engine for workers from
    the venv without the modules: they encode with `tokenizers`, and the manifest says
    so. Every run's shards and indices are the reference's."""
    reference = _build(Path(sys.executable), tmp_path / "here", command)
    runs = {"with": _build(venvs["with"], tmp_path / "with", command),
            "without": _build(venvs["without"], tmp_path / "without", command)}
    with _workers_of(venvs["without"], tmp_path / "pool") as flags:
        runs["workers_without"] = _build(Path(sys.executable), tmp_path / "mixed", command, flags)
    engine = reference[0]
    samples = sum(engine["used"].values())
    assert engine["name"] == "native" and engine["used"] == {"native": samples} and samples > 0
    assert runs["with"][0]["used"] == {"native": samples}
    without = runs["without"][0]
    assert without["name"] in ("tiktoken", "tokenizers") and without["used"] == {without["name"]: samples}
    assert "native: the native module is not built" in without["why"]
    assert runs["workers_without"][0]["name"] == "native"
    assert runs["workers_without"][0]["used"] == {"tokenizers": samples}
    for name, (_, tree) in runs.items():
        assert tree == reference[1], name


def test_sentencepiece_workers_without_sp_ids_say_so(venvs, tmp_path):
    """A SentencePiece build planned where `sp_ids` is at hand, encoded by workers
    without it: sentencepiece's Python API, the same bytes, named in `engine.used`."""
    reference = _build(Path(sys.executable), tmp_path / "here", "build_sp")
    with _workers_of(venvs["without"], tmp_path / "pool") as flags:
        mixed = _build(Path(sys.executable), tmp_path / "mixed", "build_sp", flags)
    samples = sum(reference[0]["used"].values())
    assert reference[0]["used"] == {"sp_ids": samples} and samples > 0
    assert mixed[0]["name"] == "sentencepiece" and mixed[0]["used"] == {"sentencepiece": samples}
    assert mixed[1] == reference[1]
