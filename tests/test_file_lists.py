"""`source.files` as people have their data: directories, glob patterns, a single path
string; and one file named twice (a repeat, a symlink, a hard link, a pattern and a path)
refused before any output. Both pipelines; locally and on the GCS and S3 emulators.

The per-file lists (fields, templates, tokenizers, units, outputs) count ENTRIES: an
entry that expands to k files gives each of them its one setting."""
import json
import os
from pathlib import Path

import pytest
from test_remote import gcs, s3  # noqa: F401 - the emulator fixtures

from conftest import IN_MEMORY, read_tree, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core import errors
from mintdim_beam.core.config.pack_config import resolve_pack
from mintdim_beam.core.config.unit_config import resolve_datasets
from mintdim_beam.core.inputs import file_list
from mintdim_beam.unit_build.launch import run_build


def _rows(tag: str, n: int = 3) -> list[dict]:
    return [{"q": f"hello {tag} {i}", "a": f"the answer {i} world"} for i in range(n)]


@pytest.fixture
def work(tmp_path, tokenizers_dir, monkeypatch) -> Path:
    for name in ("b", "a", "c"):
        write_jsonl(tmp_path / f"in/dir/{name}.jsonl", _rows(name))
    (tmp_path / "in/dir/README.md").write_text("not an input\n")
    write_jsonl(tmp_path / "in/dir/.hidden.jsonl", _rows("hidden"))
    write_jsonl(tmp_path / "in/dir/sub/deep.jsonl", _rows("deep"))
    write_jsonl(tmp_path / "in/other/x.jsonl", _rows("x"))
    (tmp_path / "in/empty").mkdir()
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def raw(files, **blocks) -> dict:
    config = {
        "source": {"files": files, "fields": [["q", "a"]], "templates": ["{q}\n{a}"]},
        "tokenizer": {"type": "sentencepiece", "files": ["tok/sp.model"]},
        "units": {"sizes": [[8, 16, 32]], "build_batch": [4]},
        "output": {"dir": "out", "samples_per_shard": [2]},
    }
    for path, value in blocks.items():
        block, key = path.split("__")
        config[block][key] = value
    return config


def _given(datasets) -> list[list[str]]:
    return [[f.given for f in ds.files] for ds in datasets]


# --- expansion --------------------------------------------------------------------------

def test_a_directory_is_its_input_children_sorted(work):
    # not README.md, not the hidden file, not the subdirectory
    assert _given(resolve_datasets(raw(["in/dir"]))) == [
        ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]]
    assert _given(resolve_datasets(raw(["in/dir/"]))) == [
        ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]]


def test_every_input_suffix_of_a_directory_is_listed(work):
    names = ["d.json", "e.jsonl.gz", "f.jsonl.zst", "g.parquet", "h.JSONL", "i.txt", "j.jsonl.bz2"]
    for name in names:
        (work / "in/dir" / name).write_bytes(b"")
    got = [Path(f.given).name for f in file_list.expand(["in/dir"])]
    assert got == ["a.jsonl", "b.jsonl", "c.jsonl", "d.json", "e.jsonl.gz", "f.jsonl.zst",
                   "g.parquet", "h.JSONL"]


@pytest.mark.parametrize("pattern,want", [
    ("in/dir/*.jsonl", ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]),
    ("in/dir/[ab].jsonl", ["in/dir/a.jsonl", "in/dir/b.jsonl"]),
    ("in/d?r/c.jsonl", ["in/dir/c.jsonl"]),
    ("in/*/*.jsonl", ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl", "in/other/x.jsonl"]),
    ("in/**/*.jsonl", ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl",
                       "in/dir/sub/deep.jsonl", "in/other/x.jsonl"]),
    ("in/dir/.h*", ["in/dir/.hidden.jsonl"]),  # a hidden file when the pattern asks for one
])
def test_a_glob_is_its_matching_files_sorted_in_the_entrys_spelling(work, pattern, want):
    assert _given(resolve_datasets(raw([pattern]))) == [want]


def test_an_absolute_pattern_keeps_absolute_paths(work):
    got = [f.given for f in file_list.expand([f"{work}/in/dir/?.jsonl"])]
    assert got == [f"{work}/in/dir/{n}.jsonl" for n in "abc"]


def test_the_order_is_bytewise_not_locale_or_listing_order(work):
    for name in ("B.jsonl", "_z.jsonl", "é.jsonl", "a10.jsonl", "a2.jsonl"):
        write_jsonl(work / "in/dir" / name, _rows(name))
    got = [Path(f.given).name for f in file_list.expand(["in/dir"])]
    assert got == sorted(got, key=lambda n: n.encode("utf-8"))
    assert got == ["B.jsonl", "_z.jsonl", "a.jsonl", "a10.jsonl", "a2.jsonl", "b.jsonl",
                   "c.jsonl", "é.jsonl"]


def test_a_file_whose_name_looks_like_a_pattern_is_that_file(work):
    write_jsonl(work / "in/odd[1].jsonl", _rows("odd"))
    assert _given(resolve_datasets(raw(["in/odd[1].jsonl"]))) == [["in/odd[1].jsonl"]]


@pytest.mark.parametrize("entry,rule", [("in/empty", "empty_directory"),
                                        ("in/dir/sub/none", None),
                                        ("in/*.parquet", "no_match"),
                                        ("in/nothing/**/*.jsonl", "no_match")])
def test_an_entry_that_matches_nothing_is_a_config_error_naming_it(work, entry, rule):
    (work / "in/dir/sub/none").mkdir()  # a directory with only a directory in it
    with pytest.raises(errors.SourceFilesError) as info:
        _unit_build(raw(["in/dir", entry]))
    assert info.value.kwargs["entry"] == entry
    assert (rule or "empty_directory") == info.value.kwargs["rule"]
    assert f"Entry: {entry}" in info.value.english
    assert info.value.vietnamese.startswith("[vietnam] SourceFilesError: ")
    assert not (work / "out").exists()


def test_a_missing_plain_path_is_still_the_seeds_missing_file(work):
    with pytest.raises(errors.MintDimFileNotFoundError) as info:
        resolve_datasets(raw(["in/dir/nope.jsonl"]))
    assert "Missing file: in/dir/nope.jsonl" in info.value.english


# --- a string for a list ----------------------------------------------------------------

def test_a_single_path_string_is_a_list_of_one(work):
    config = raw("in/dir/a.jsonl")
    config["tokenizer"]["files"] = "tok/sp.model"
    (dataset,) = resolve_datasets(config)
    assert [f.given for f in dataset.files] == ["in/dir/a.jsonl"]
    assert dataset.tokenizer_given == "tok/sp.model"
    assert _given(resolve_datasets(raw("in/dir"))) == [
        ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]]


# --- arity: per entry -------------------------------------------------------------------

def test_per_file_lists_count_entries_not_files(work):
    config = raw(["in/dir", "in/other/x.jsonl"], source__fields=[["q", "a"], ["q"]],
                 source__templates=["{q}\n{a}", "{q}"], output__dir=["out1", "out2"])
    first, second = resolve_datasets(config)
    assert [f.given for f in first.files] == ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]
    assert first.fields == ("q", "a") and first.output_given == "out1"
    assert [f.given for f in second.files] == ["in/other/x.jsonl"]
    assert second.fields == ("q",) and second.template == "{q}"
    # one setting per expanded FILE is not the rule: 3 + 1 files, 4 fields are refused
    with pytest.raises(errors.FieldMappingError) as info:
        resolve_datasets(raw(["in/dir", "in/other/x.jsonl"], source__fields=[["q", "a"]] * 4))
    assert "Received 2 input files but 4 field configs." in info.value.english


def test_pack_per_file_lists_count_entries_too(work):
    config = {"source": {"files": ["in/dir", "in/other/x.jsonl"], "fields": [["q", "a"], ["q"]],
                         "templates": ["{q} {a}", "{q}"]},
              "tokenizer": {"type": "sentencepiece", "files": "tok/sp.model"},
              "pack": {"eod": "</s>"}, "output": {"dir": "out"}}
    pack = resolve_pack(config)
    assert [f.given for f in pack.files] == ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl",
                                             "in/other/x.jsonl"]
    assert pack.fields == (("q", "a"),) * 3 + (("q",),)
    assert [t.raw for t in pack.templates] == ["{q} {a}"] * 3 + ["{q}"]


# --- duplicates -------------------------------------------------------------------------

def _links(work: Path) -> None:
    os.symlink(work / "in/dir/a.jsonl", work / "in/sym.jsonl")
    os.link(work / "in/dir/a.jsonl", work / "in/hard.jsonl")


@pytest.mark.parametrize("files,again,other", [
    (["in/dir/a.jsonl", "in/dir/a.jsonl"], "in/dir/a.jsonl", "in/dir/a.jsonl"),
    (["in/dir/a.jsonl", "in/dir/../dir/a.jsonl"], "in/dir/../dir/a.jsonl", "in/dir/a.jsonl"),
    (["in/dir/a.jsonl", "in/sym.jsonl"], "in/sym.jsonl", "in/dir/a.jsonl"),
    (["in/hard.jsonl", "in/dir/b.jsonl", "in/dir/a.jsonl"], "in/dir/a.jsonl", "in/hard.jsonl"),
    (["in/dir", "in/dir/b.jsonl"], "in/dir/b.jsonl", "in/dir/b.jsonl"),
    (["in/dir/*.jsonl", "in/dir"], "in/dir/a.jsonl", "in/dir/a.jsonl"),
    (["in/sym.jsonl", "in/*/a.jsonl"], "in/dir/a.jsonl", "in/sym.jsonl"),
])
def test_one_file_named_twice_for_one_output_is_refused(work, files, again, other):
    _links(work)
    with pytest.raises(errors.SourceFilesError) as info:
        _unit_build(raw(files))
    assert info.value.kwargs == {"entry": again, "rule": "duplicate", "other": other,
                                 "output": "out"}
    assert f"{again} is the same file as {other}" in info.value.english
    assert f"{again} là cùng một file với {other}" in info.value.vietnamese
    assert not (work / "out").exists()


def test_a_directory_holding_a_symlink_to_its_own_file_is_refused(work):
    os.symlink("a.jsonl", work / "in/dir/z_link.jsonl")
    with pytest.raises(errors.SourceFilesError) as info:
        resolve_datasets(raw(["in/dir"]))
    assert info.value.kwargs["entry"] == "in/dir/z_link.jsonl"


def test_the_same_file_for_two_outputs_is_two_builds_not_a_repeat(work):
    config = raw(["in/dir/a.jsonl", "in/dir/a.jsonl"], output__dir=["out1", "out2"])
    assert _given(resolve_datasets(config)) == [["in/dir/a.jsonl"], ["in/dir/a.jsonl"]]


@pytest.mark.parametrize("files", [["in/dir/a.jsonl", "in/sym.jsonl"],
                                   ["in/hard.jsonl", "in/dir"],
                                   ["in/dir/a.jsonl", "in/dir/a.jsonl"]])
def test_pack_refuses_a_file_named_twice_as_it_refuses_a_repeat(work, files):
    _links(work)
    job = (pipeline("pack-build").source.jsonl(files=files, fields=[["q"]], templates=["{q}"])
           .tokenizer.sentencepiece(files=["tok/sp.model"]).pack(eod="</s>").output.dir("out"))
    with pytest.raises(errors.PackValidationError) as info:
        job.run(pipeline_options=IN_MEMORY)
    assert info.value.kwargs["rule"] == "duplicate_file"
    assert not (work / "out").exists()


# --- builds -----------------------------------------------------------------------------

def _unit_build(config: dict):
    return run_build(config, on_template_unk="abort", on_overflow="truncate",
                     pipeline_options=IN_MEMORY)


def _same_tree(one: Path, other: Path) -> None:
    """Every file alike but the manifest's own part (ours: inputs, build_config, ...)."""
    left, right = read_tree(one), read_tree(other)
    assert left == right and "manifest.json" in left


def test_a_directory_builds_the_bytes_of_its_files_listed_one_by_one(work):
    _unit_build(raw(["in/dir"], output__dir="out_dir"))
    _unit_build(raw(["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"],
                    output__dir="out_files"))
    _unit_build(raw(["in/d*/[a-c].jsonl"], output__dir="out_glob"))
    _same_tree(work / "out_dir", work / "out_files")
    _same_tree(work / "out_glob", work / "out_files")
    manifest = json.loads((work / "out_dir/manifest.json").read_text())
    files = ["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"]
    assert manifest["source"]["files"] == files
    assert [i["file"] for i in manifest["inputs"]] == files
    assert all(i["size"] > 0 and "mtime_ns" in i for i in manifest["inputs"])
    assert manifest["source_entries"] == [{"entry": "in/dir", "files": 3}]
    assert manifest["build_config"]["source"]["files"] == files
    listed = json.loads((work / "out_files/manifest.json").read_text())
    assert "source_entries" not in listed  # a build of plain paths: the manifest as before
    rows = [json.loads(line) for line in (work / "out_dir/sample_index.jsonl").open()]
    assert sorted({r["source_file"] for r in rows}) == files
    # verify --deep rebuilds the same file set from the manifest, even after the
    # directory gained a file
    write_jsonl(work / "in/dir/d.jsonl", _rows("later"))
    result = verify_output(str(work / "out_dir"), deep=50)
    assert result.ok, [str(p) for p in result.problems]


def test_a_pack_from_a_glob_is_the_pack_of_its_files(work):
    def pack(files, out):
        return (pipeline("pack-build").source.jsonl(files=files, fields=[["q", "a"]],
                                                    templates=["{q} {a}"])
                .tokenizer.sentencepiece(files="tok/sp.model").pack(eod="</s>", shard_tokens=40)
                .output.dir(out).run(pipeline_options=IN_MEMORY))

    pack(["in/dir/*.jsonl", "in/other"], "pack_glob")
    pack(["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl", "in/other/x.jsonl"], "pack_files")
    glob, files = (json.loads((work / d / "manifest.json").read_text())
                   for d in ("pack_glob", "pack_files"))
    assert glob["source"] == files["source"] and glob["sources"] == files["sources"]
    assert glob["source_entries"] == [{"entry": "in/dir/*.jsonl", "files": 3},
                                      {"entry": "in/other", "files": 1}]
    bins = sorted(p.name for p in (work / "pack_glob").iterdir() if p.suffix in (".bin", ".idx"))
    assert bins
    for name in bins:
        assert (work / "pack_glob" / name).read_bytes() == (work / "pack_files" / name).read_bytes()
    assert verify_output(str(work / "pack_glob"), deep=20).ok


# --- object stores ----------------------------------------------------------------------

@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_a_glob_and_a_directory_on_an_object_store(store, request, work):
    root, fs = request.getfixturevalue(store)
    base = f"{root}/file-lists"
    for name in ("c", "a", "b"):
        fs.put_file(str(work / f"in/dir/{name}.jsonl"), f"{base}/dir/{name}.jsonl")
    fs.pipe_file(f"{base}/dir/notes.txt", b"not an input\n")
    fs.put_file(str(work / "in/dir/sub/deep.jsonl"), f"{base}/dir/sub/deep.jsonl")
    want = [f"{base}/dir/{n}.jsonl" for n in "abc"]
    assert [f.given for f in file_list.expand([f"{base}/dir"])] == want
    assert [f.given for f in file_list.expand([f"{base}/dir/"])] == want
    assert [f.given for f in file_list.expand([f"{base}/dir/[ab].jsonl"])] == want[:2]
    assert [f.given for f in file_list.expand([f"{base}/**/*.jsonl"])] == \
        want + [f"{base}/dir/sub/deep.jsonl"]
    with pytest.raises(errors.SourceFilesError):
        file_list.expand([f"{base}/dir/*.parquet"])
    with pytest.raises(errors.SourceFilesError) as info:
        resolve_datasets(raw([f"{base}/dir/*.jsonl", f"{base}/dir/b.jsonl"]))
    assert info.value.kwargs["rule"] == "duplicate"

    out = f"{base}/out"
    _unit_build(raw([f"{base}/dir/*.jsonl"], output__dir=out))
    _unit_build(raw(["in/dir/a.jsonl", "in/dir/b.jsonl", "in/dir/c.jsonl"],
                    output__dir="out_local"))
    fs.invalidate_cache()
    for name in ("sample_index.jsonl", "stats.json", "histogram.json"):
        text = fs.cat_file(f"{out}/{name}").decode()
        assert text.replace(f"{base}/dir/", "in/dir/") == (work / "out_local" / name).read_text()
    shards = sorted(p.relative_to(work / "out_local") for p in (work / "out_local").rglob("*.bin"))
    assert shards
    for rel in shards:
        assert fs.cat_file(f"{out}/{rel}") == (work / "out_local" / rel).read_bytes()
    manifest = json.loads(fs.cat_file(f"{out}/manifest.json"))
    assert manifest["source"]["files"] == want
    assert manifest["source_entries"] == [{"entry": f"{base}/dir/*.jsonl", "files": 3}]
    assert len(manifest["inputs"]) == 3


def test_a_chat_source_takes_a_directory_too(work):
    for name in ("2", "1"):
        write_jsonl(work / f"chat/{name}.jsonl", [{"messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": name}]}])
    config = raw("chat")
    config["source"] = {"type": "chat", "files": "chat", "chat_template": "chatml"}
    (dataset,) = resolve_datasets(config)
    assert [f.given for f in dataset.files] == ["chat/1.jsonl", "chat/2.jsonl"]
    assert [f.entry for f in dataset.files] == ["chat", "chat"]
