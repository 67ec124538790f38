"""A template's own special-token text (issue 24). SentencePiece chat templates encode
their control and user-defined symbols as ids while message content stays plain text;
a JSONL template keeps mintdim 0.2.1's bytes (SentencePiece encodes `<s>` as text) with
a warning before any output and an opt-in (`literal_specials: ids`); a marker the
tokenizer does not have (ChatML on a tokenizer without its tokens) is a warning, an
error under on_lossy="abort". Real tokenizers trained here."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import IN_MEMORY, byte_level_bpe, sentence, shard_records, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.config.unit_config import resolve_datasets
from mintdim_beam.core.config.prepare import prepare

TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
            "[INST] {{ m['content'] }} [/INST]{% else %} {{ m['content'] }}{{ eos_token }}"
            "{% endif %}{% endfor %}")


@pytest.fixture(scope="module")
def sp(tmp_path_factory) -> Path:
    """Llama-like SentencePiece: identity normalizer, byte fallback, [INST] / [/INST]
    control symbols and a user-defined <|tool|>."""
    import sentencepiece as spm

    root = tmp_path_factory.mktemp("symbols_sp")
    rng = random.Random(8)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(sentence(rng, 3, 20) for _ in range(2000)) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(root / "sp"), vocab_size=300, model_type="bpe",
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        control_symbols=["[INST]", "[/INST]"], user_defined_symbols=["<|tool|>"],
        pad_id=3, character_coverage=1.0, num_threads=1, minloglevel=2)
    (root / "chat.jinja").write_text(TEMPLATE)
    return root


def _sp(path: Path):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path))


def _chat_build(sp: Path, tmp_path: Path, rows) -> Path:
    data = write_jsonl(tmp_path / "chat.jsonl", rows)
    out = tmp_path / "out"
    (pipeline("unit-build")
     .source.chat(files=[str(data)], chat_template=str(sp / "chat.jinja"), max_turns=2)
     .tokenizer.sentencepiece(files=[str(sp / "sp.model")])
     .units(sizes=[[128, 256]], build_batch=[4])
     .output.dir(str(out), samples_per_shard=[8])
     .run(on_overflow="abort", on_template_unk="abort", pipeline_options=IN_MEMORY))
    return out


def test_sentencepiece_chat_templates_keep_their_symbols_and_content_stays_text(tmp_path, sp):
    proc = _sp(sp / "sp.model")
    inst, end_inst, tool = (proc.piece_to_id(p) for p in ("[INST]", "[/INST]", "<|tool|>"))
    bos, eos = proc.bos_id(), proc.eos_id()
    rows = [{"messages": [{"role": "user", "content": "hello world"},
                          {"role": "assistant", "content": "the model reads"}]},
            {"messages": [{"role": "user", "content": "type [INST] and </s> and <|tool|> here"},
                          {"role": "assistant", "content": "quoting </s> is text"},
                          {"role": "user", "content": "thanks"},
                          {"role": "assistant", "content": "bye"}]}]
    layout, records = shard_records(_chat_build(sp, tmp_path, rows))
    (_, first), (_, second) = records
    # record 0: <s> [INST] "▁hello▁world▁" [/INST] | "▁the▁model▁reads" </s>: the text
    # between symbols is one text's continuation (its spaces, no dummy prefix of its own)
    def text(ids):
        return "".join(proc.id_to_piece(i) for i in ids).replace("\u2581", " ")

    assert first[0][:2] == [bos, inst] and first[0][-1] == end_inst
    assert text(first[0][2:-1]) == " hello world "
    assert first[1][-1] == eos and text(first[1][:-1]) == " the model reads"
    # record 1: the user's [INST], </s> and <|tool|> are text; the template's are ids
    context = second[0]
    assert context[:2] == [bos, inst] and context.count(inst) == 1 and tool not in context
    assert eos not in context and context[-1] == end_inst
    assert second[1][-1] == eos and second[1].count(eos) == 1  # "</s>" in the reply is text
    assert proc.decode(second[1][:-1]) == "quoting </s> is text"


def test_a_jsonl_literal_with_control_text_keeps_mintdims_bytes_and_says_so(tmp_path, sp, capfd):
    proc = _sp(sp / "sp.model")
    data = write_jsonl(tmp_path / "qa.jsonl", [{"q": "hello world"}])

    def plan(**options):
        raw = {"source": {"files": [str(data)], "fields": [["q"]], "templates": ["[INST] {q}"]},
               "tokenizer": {"type": "sentencepiece", "files": [str(sp / "sp.model")], **options},
               "units": {"sizes": [[64]], "build_batch": [4]},
               "output": {"dir": str(tmp_path / "out"), "samples_per_shard": [4]}}
        return prepare(resolve_datasets(raw)[0])

    default = plan()
    assert list(default.literal_ids[0]) == proc.encode("[INST] ")  # text, as mintdim 0.2.1
    kinds = [n["kind"] for n in default.notices]
    assert "special_text_literal" in kinds
    notice = default.notices[kinds.index("special_text_literal")]
    assert notice["tokens"] == ["[INST]"] and notice["pieces"] == len(default.literal_ids[0])
    ids = plan(literal_specials="ids")
    inst = proc.piece_to_id("[INST]")
    assert ids.literal_ids[0][0] == inst and inst not in default.literal_ids[0]
    assert "special_text_literal" not in [n["kind"] for n in ids.notices]
    with pytest.raises(errors.TokenizerValidationError):
        plan(literal_specials="yes")


def test_chatml_on_a_tokenizer_without_its_tokens_is_a_warning_or_an_error(tmp_path):
    rng = random.Random(9)
    work = tmp_path / "tok"
    work.mkdir()
    byte_level_bpe(work, [sentence(rng, 3, 20) for _ in range(800)], ["<|endoftext|>"], 400,
                   {"pad_token": "<|endoftext|>"})
    data = write_jsonl(tmp_path / "chat.jsonl", [{"messages": [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "world"}]}])

    def build(on_lossy):
        return (pipeline("unit-build")
                .source.chat(files=[str(data)], chat_template="chatml")
                .tokenizer.hf_json(files=[str(work / "tokenizer.json")],
                                   config=str(work / "tokenizer_config.json"))
                .units(sizes=[[64]], build_batch=[4])
                .output.dir(str(tmp_path / on_lossy), samples_per_shard=[4])
                .run(on_overflow="abort", on_template_unk="abort", on_lossy=on_lossy,
                     pipeline_options=IN_MEMORY))

    with pytest.raises(errors.TemplateRoundTripError) as info:
        build("abort")
    assert '"<|im_start|>" is not a token' in info.value.english
    assert not (tmp_path / "abort").exists()
    build("continue")
    manifest = json.loads((tmp_path / "continue" / "manifest.json").read_text())
    split = {n["marker"]: n["pieces"] for n in manifest["round_trip"]["template"]
             if n["kind"] == "split_marker"}
    assert set(split) == {"<|im_start|>", "<|im_end|>"}
    assert all(len(pieces) > 1 for pieces in split.values())
