"""Driver-side preparation of each dataset: tokenizer facts, compiled template, token
dtype and the tier-1 literal check. The result is small and picklable; workers get it
instead of a loaded tokenizer (which they load themselves in `DoFn.setup`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from mintdim_beam.core.chat import (BUILTIN_TEMPLATES, ChatTemplate, TemplateSourceError,
                                    builtin_template)
from mintdim_beam.core.chat.templates import TemplateBug
from mintdim_beam.core.config.bad_rows import BadRows
from mintdim_beam.core.config.sources import DialogueSource, dialogue_template
from mintdim_beam.core.config.unit_config import Dataset
from mintdim_beam.core.config.schema import suggest
from mintdim_beam.core.errors import (ConfigValueError, MintDimFileNotFoundError,
                                      PipelineValidationError, TokenDTypeCapacityError)
from mintdim_beam.core.files import storage
from mintdim_beam.core.render.template import (EDGE_NAMES, CompiledTemplate, Segment,
                                               compile_template)
from mintdim_beam.core.render.template_checks import chat_notices, encode_literal, literal_notices
from mintdim_beam.core.tokenizer.round_trip import Decoder
from mintdim_beam.core.tokenizer.special_tokens import TokenizerFacts, resolve_facts
from mintdim_beam.core.tokenizer.engine_choice import choose_engine
from mintdim_beam.core.tokenizer.tokenizer_card import build_card
from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer

DTYPES = (("uint16", 0xFFFF, 2), ("uint32", 0xFFFFFFFF, 4))


@dataclass(frozen=True)
class DatasetPlan:
    dataset: Dataset
    template: CompiledTemplate
    vocab_size: int
    unk_id: int | None  # None: the tokenizer has no UNK (byte-level) and never makes one
    pad_id: int
    token_dtype: str
    magic: int
    bytes_per_token: int
    literal_ids: tuple  # per segment: tuple of ids for literals, None for fields
    literal_unk_segments: tuple  # indices of literal segments whose ids contain UNK
    facts: TokenizerFacts | None = None  # special tokens, chat template (`special_tokens`)
    chat_template: ChatTemplate | None = None  # dialogue datasets with a template
    # {segment index: ids after the segment's text}: a preference completion's EOS
    appended_ids: dict = field(default_factory=dict)
    notices: tuple = ()  # the template's text against the tokenizer (`template_checks`)
    card: dict = field(default_factory=dict)  # the tokenizer card (`tokenizer_card`)
    id_bound: int = 0  # above every id the tokenizer can produce (the dtype's choice)
    on_lossy: str = "continue"  # a lossy sample: recorded, or the build fails ("abort")
    bad_rows: BadRows = BadRows()  # a row that cannot become a sample (`bad_rows`)
    # What encodes the dataset's text (`engine_choice`): decided here, used by workers.
    engine: str = "tokenizers"

    @property
    def n_segments(self) -> int:
        return len(self.template.segments)


def select_dtype(vocab_size: int) -> tuple[str, int, int]:
    for name, magic, width in DTYPES:
        if vocab_size <= magic:
            return name, magic, width
    raise TokenDTypeCapacityError(vocab_size=vocab_size)


def check_unit_sizes(sizes, dtype: str, max_value: int, vocab_size: int) -> None:
    """Every declared size must fit the record header: a segment length can be as large
    as the unit, and numpy would silently wrap a larger one."""
    too_large = [size for size in sizes if size > max_value]
    if too_large:
        raise TokenDTypeCapacityError(dtype=dtype, max_value=max_value, unit_size=too_large[0],
                                      vocab_size=vocab_size)


RECORDS = "records"


def prepare(dataset: Dataset) -> DatasetPlan:
    tokenizer = cached_tokenizer(dataset.tokenizer_kind, dataset.tokenizer_path,
                                 dataset.tokenizer_options, dataset.tokenizer_given)
    engine, engine_why = choose_engine(
        tokenizer, dataset.tokenizer_options.engine,
        [f.path for f in dataset.files], dataset.tokenizer_given)
    facts = resolve_facts(tokenizer, dataset.tokenizer_options, dataset.tokenizer_given)
    literal_specials = dataset.tokenizer_options.literal_specials
    decoder = Decoder(tokenizer)
    # where the template's errors point: its first file, or the records of a user's
    # pipeline (`mintdim_beam.transforms`), which have no files
    first = dataset.files[0].given if dataset.files else RECORDS
    if dataset.dialogue is None:
        template = compile_template(dataset.template, list(dataset.fields), first)
        chat = None
        notices = literal_notices(tokenizer, decoder, template.segments,
                                  f"template of {first}", literal_specials)
    else:
        template = dialogue_template(dataset.dialogue)
        chat = load_chat_template(dataset.dialogue, facts)
        try:
            notices = ([] if chat is None else
                       chat_notices(tokenizer, decoder, chat, f"chat template {chat.name!r}"))
        except TemplateBug as exc:  # met by the probe render: before any output
            raise PipelineValidationError(missing=[f"source.chat_template: {exc}"]) from None
    compiled, appended = with_edges(template, facts, dataset.dialogue)
    # The dtype holds every id the tokenizer can produce (`id_bound`, the vocabulary size
    # unless the vocabulary has gaps), so mintdim's rule for every gapless vocabulary.
    dtype, magic, width = select_dtype(tokenizer.id_bound)
    check_unit_sizes(dataset.sizes, dtype, magic, tokenizer.vocab_size)
    literal_ids = []
    unk_segments = []
    for index, segment in enumerate(compiled.segments):
        if segment.kind != "literal":
            literal_ids.append(None)
            continue
        if segment.name in EDGE_NAMES:  # the model's own id, never its text encoded
            literal_ids.append((getattr(facts, segment.name).id,))
            continue
        ids = tuple(encode_literal(tokenizer, segment.content, literal_specials)[0])
        literal_ids.append(ids)
        if tokenizer.unk_id is not None and tokenizer.unk_id in ids:
            unk_segments.append(index)
    return DatasetPlan(
        dataset=dataset, template=compiled, vocab_size=tokenizer.vocab_size,
        unk_id=tokenizer.unk_id, pad_id=facts.pad.id, token_dtype=dtype, magic=magic,
        bytes_per_token=width, literal_ids=tuple(literal_ids),
        literal_unk_segments=tuple(unk_segments), facts=facts, chat_template=chat,
        appended_ids=appended, notices=tuple(notices),
        card={**build_card(tokenizer, facts), "engine": {"name": engine, "why": engine_why}},
        engine=engine, id_bound=tokenizer.id_bound)


def load_chat_template(dialogue: DialogueSource, facts: TokenizerFacts) -> ChatTemplate | None:
    """The dialogue source's template, compiled on the driver (a config error before any
    output): the tokenizer's own (`tokenizer_config.json`), a built-in name, or a file."""
    spec = dialogue.chat_template
    if spec is None:
        return None
    if spec == "tokenizer":
        if not facts.chat_template:
            raise PipelineValidationError(missing=[
                "a chat_template in the tokenizer config (tokenizer.config: tokenizer_config.json), "
                "or source.chat_template naming a built-in template or a .jinja file"])
        text, name = facts.chat_template, "tokenizer"
    elif spec in BUILTIN_TEMPLATES:
        text, name = builtin_template(spec), spec
    else:
        path = storage.resolve(spec)
        if not storage.is_file(path):
            if looks_like_a_name(spec):  # `qwen`: a name we do not have, not a lost file
                names = ["tokenizer", *sorted(BUILTIN_TEMPLATES)]
                raise ConfigValueError(
                    key="source.chat_template", value=spec, allowed=names,
                    expected='"tokenizer" (the tokenizer config\'s template), a built-in '
                             'template name, or a .jinja file',
                    suggestion=suggest(spec, names))
            raise MintDimFileNotFoundError(context="chat template", missing_file=spec)
        text, name = storage.read_bytes(path).decode("utf-8"), spec
    try:
        return ChatTemplate(text, bos_token=facts.bos_token or "", eos_token=facts.eos_token or "",
                            template_vars=dialogue.variables, name=name)
    except TemplateSourceError as exc:
        raise PipelineValidationError(missing=[f"source.chat_template: {exc}"]) from None


def looks_like_a_name(spec: str) -> bool:
    """A chat_template value meant as a template's name: no directory, no .jinja."""
    return "/" not in spec and "\\" not in spec and not spec.endswith((".jinja", ".j2"))


def with_edges(compiled: CompiledTemplate, facts: TokenizerFacts,
               dialogue: DialogueSource | None = None) -> tuple[CompiledTemplate, dict]:
    """The template with a `bos` literal segment first and an `eos` one last when the
    tokenizer block asks for them; their content is the token's text, their id comes
    from the tokenizer (SentencePiece would encode `<s>` as characters). A preference
    pair's EOS ends each completion instead (`chosen` and `rejected` are two sequences
    that share the prompt): returned as {segment index: ids appended to its text}."""
    segments = compiled.segments
    appended = {}
    if facts.add_bos:
        segments = (Segment("literal", "bos", facts.bos.token or ""),) + segments
    if facts.add_eos and dialogue is not None and dialogue.kind == "preference":
        appended = {i: (facts.eos.id,) for i, s in enumerate(segments) if s.kind == "trained"}
    elif facts.add_eos:
        segments = segments + (Segment("literal", "eos", facts.eos.token or ""),)
    if segments != compiled.segments:
        compiled = replace(compiled, segments=segments)
    return compiled, appended
