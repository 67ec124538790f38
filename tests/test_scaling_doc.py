"""docs/scaling.md lists every step of the three pipelines with its group-bys and side
inputs: this test builds the bundled examples' real graphs and checks the page's
tables against them (names, GroupByKey count, side-input count), so the map of where
a corpus-sized job could run on one worker cannot drift from the code."""
from __future__ import annotations

import re
import shutil

import apache_beam as beam
import pytest
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from conftest import REPO

GBK = common_urns.primitives.GROUP_BY_KEY.urn
PAR_DO = common_urns.primitives.PAR_DO.urn


def _counts(comps, step) -> tuple[int, int]:
    """(group-bys, side inputs) of a step and everything inside it."""
    stack, gbks, sides = [step], 0, 0
    while stack:
        t = comps[stack.pop()]
        stack += list(t.subtransforms)
        gbks += t.spec.urn == GBK
        if t.spec.urn == PAR_DO:
            sides += len(beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
                         .side_inputs)
    return gbks, sides


def _steps(proto) -> list[tuple[str, int, int]]:
    """(name, group-bys, side inputs) of each top-level step of a pipeline proto."""
    comps = proto.components.transforms
    (root,) = proto.root_transform_ids
    return [(comps[top].unique_name, *_counts(comps, top)) for top in comps[root].subtransforms]


def _doc_tables() -> dict:
    """{pipeline: [(step, group-bys, side inputs)]} from the page's tables."""
    text = (REPO / "docs/scaling.md").read_text()
    tables = {}
    for name in ("unit-build", "pack-build", "train-tokenizer", "WriteUnitBuild",
                 "WritePackBuild"):
        section = text.split(f"## The {name} graph", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        tables[name] = [(re.match(r"\| `([^`]+)`", r).group(1),
                         int(r.split("|")[3].strip()), int(r.split("|")[4].strip()))
                        for r in rows]
    return tables


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    from mintdim_beam.cli import main

    work = tmp_path_factory.mktemp("scaling")
    shutil.copytree(REPO / "examples", work / "examples")
    seen, real = [], beam.Pipeline.run

    def run(self, *args, **kwargs):
        seen.append(self.to_runner_api())
        return real(self, *args, **kwargs)

    import os

    previous = os.getcwd()
    os.chdir(work)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(beam.Pipeline, "run", run)
            assert main(["build", "examples/unit_build.yaml"]) == 0
            assert main(["pack", "examples/pack/pack_build.yaml"]) == 0
            assert main(["train", "examples/train_tokenizer.yaml"]) == 0
    finally:
        os.chdir(previous)
    return {"unit-build": seen[0], "pack-build": seen[1], "train-tokenizer": seen[2]}


@pytest.mark.parametrize("name", ["unit-build", "pack-build", "train-tokenizer"])
def test_the_scaling_page_lists_every_step_of_the_graph(graphs, name):
    got = _steps(graphs[name])
    print(name, got)
    assert _doc_tables()[name] == got


def _steps_under(proto, unique_name: str) -> list[tuple[str, int, int]]:
    """(name within it, group-bys, side inputs) of each step inside a composite."""
    comps = proto.components.transforms
    (top,) = [t for t in comps if comps[t].unique_name == unique_name]
    return [(comps[sub].unique_name[len(unique_name) + 1:], *_counts(comps, sub))
            for sub in comps[top].subtransforms]


@pytest.fixture(scope="module")
def sink_graphs(tmp_path_factory):
    """The sinks of `mintdim_beam.transforms` as a user's pipeline applies them."""
    from records_corpus import build_from_rows, pack_from_rows, write_corpus

    work = tmp_path_factory.mktemp("sinks")
    write_corpus(work)
    seen, real = [], beam.Pipeline.run

    def run(self, *args, **kwargs):
        seen.append(self.to_runner_api())
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(beam.Pipeline, "run", run)
        build_from_rows(work, "units", ["--runner=FnApiRunner"])
        pack_from_rows(work, "pack", ["--runner=FnApiRunner"])
    return {"WriteUnitBuild": _steps_under(seen[0], "Write/WriteUnitBuild"),
            "WritePackBuild": _steps_under(seen[1], "Pack/WritePackBuild")}


@pytest.mark.parametrize("name", ["WriteUnitBuild", "WritePackBuild"])
def test_the_scaling_page_lists_every_step_of_the_sinks(sink_graphs, name):
    assert _doc_tables()[name] == sink_graphs[name]
