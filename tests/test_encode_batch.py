"""BatchEncoder encodes each distinct text of a batch once: the same ids as encoding
every text, and every copy encoded where the tokenizer samples (BPE dropout)."""
import json
import random

from conftest import byte_level_bpe, sentence
from mintdim_beam.core.config.prepare import prepare
from mintdim_beam.core.config.unit_config import Dataset, InputFile
from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder
from mintdim_beam.core.tokenizer.tokenizers import load_tokenizer

# Sample rows (question, answer) with repeats inside and across rows.
ROWS = [["Translate the text.", "hello world"], ["", "code python"],
        ["Translate the text.", ""], ["", ""], ["hello world", "hello world"],
        ["unit ☃ padding", "unit ☃ padding"]]


def _plan(kind: str, path: str):
    dataset = Dataset(index=0, files=(InputFile(0, "in.jsonl", "in.jsonl"),), fields=("q", "a"),
                      template="Q: {q}\nA: {a}", template_file_index=0, tokenizer_kind=kind,
                      tokenizer_given=path, tokenizer_path=path, sizes=(8, 64), build_batch=8,
                      output_given="o", output_path="o", samples_per_shard=2)
    return prepare(dataset)


def _recording(tokenizer):
    seen = []
    encode = tokenizer.encode_many

    def encode_many(texts):
        seen.append(list(texts))
        return encode(texts)

    tokenizer.encode_many = encode_many
    return seen


def test_each_distinct_text_is_encoded_once_and_every_copy_gets_its_ids(tokenizers_dir):
    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    tokenizer = load_tokenizer("sentencepiece", plan.dataset.tokenizer_path)
    alone = [[tokenizer.encode_many([text])[0] for text in row] for row in ROWS]
    seen = _recording(tokenizer)
    encoder = BatchEncoder(plan, tokenizer)
    seen.clear()  # what setting up encoded (the round trip's probes)
    lengths, tokens, unks, lossy, _ = encoder.encode(ROWS)
    assert seen == [list(dict.fromkeys(t for row in ROWS for t in row))]  # one call, no repeat
    fields = [k for k, s in enumerate(plan.template.segments) if s.kind != "literal"]
    at = 0
    for i, row in enumerate(ROWS):  # each sample's field segments are its texts' own ids
        for segment in range(lengths.shape[1]):
            n = int(lengths[i, segment])
            if segment in fields:
                assert tokens[at:at + n].tolist() == alone[i][fields.index(segment)]
            at += n
    assert at == len(tokens) and unks  # ☃ is unknown to this model, in both copies
    assert len(unks[5][0]) >= 2  # one UNK per copy


def test_a_tokenizer_that_samples_encodes_every_copy(tmp_path):
    """BPE dropout draws ids per call: repeated texts are not shared."""
    from tokenizers import Tokenizer

    rng = random.Random(5)
    path = byte_level_bpe(tmp_path, [sentence(rng, 5, 20) for _ in range(300)], ["<pad>"], 300,
                          {}) / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id("<pad>"), pad_token="<pad>")
    tokenizer.save(str(path))
    spec = json.loads(path.read_text())
    spec["model"]["dropout"] = 0.5
    path.write_text(json.dumps(spec))
    plan = _plan("hf_json", str(path))
    loaded = load_tokenizer("hf_json", str(path))
    seen = _recording(loaded)
    encoder = BatchEncoder(plan, loaded)
    seen.clear()
    lengths = encoder.encode(ROWS).lengths
    assert seen == [[t for row in ROWS for t in row]]
    assert lengths.shape == (len(ROWS), plan.n_segments)
