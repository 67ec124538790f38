"""A faster exact engine for byte-level BPE `tokenizer.json` files: tiktoken's BPE.

tiktoken merges by the rank of the merged token; `tokenizers` by the index of the merge.
They give the same ids when the tokenizer is built the way tiktoken's are: a BPE over
the 256 bytes with no byte fallback or dropout, every multi-byte token made by a merge,
merges in the order of the ids they make, and a pre-tokenizer tiktoken reproduces (split
regexes before byte-level mapping: the last one tiktoken's, those before it applied by
`tokenizers`' own `Split`), after a normalizer of none, NFC or NFKC (applied by `tokenizers`' own
normalizer: Python's `unicodedata` follows a newer Unicode and normalizes characters
`tokenizers` leaves alone, such as U+32FF under NFKC). `fast_engine` checks that structure, then encodes probe texts both ways;
`FastBPE.encode_many` cuts text at added tokens as `tokenizers` does, checks every text's
bytes are all in its ids, and gives back the texts it cannot vouch for (added tokens
matched other than as written, lost bytes) for `tokenizers` to encode.
"""
from __future__ import annotations

import json
import re

import numpy as np

ENGINE_TIKTOKEN = "tiktoken"
ENGINE_TOKENIZERS = "tokenizers"
ENGINES = ("auto", "native", ENGINE_TIKTOKEN, ENGINE_TOKENIZERS)

# GPT-2's pre-tokenizer: `ByteLevel(use_regex=true)` in tokenizers.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

PROBES = (
    "Hello world! It's a test, isn't it? They'll've done 12345 things in 2024.",
    "  leading spaces\tand\ttabs\n\nnew lines \r\n windows\r\n  ",
    "code: def f(x):\n    return x**2  # comment\n\n\nprint(f(3))",
    "Unicode: café naïve Ünïcödé 字 漢字かなカナ 한국어 русский العربية हिन्दी 😀👍🏽",
    "numbers 3.14159 1,000,000 0x1F 007 ١٢٣ ½",
    "MIXED case WORDS And 'QUOTES' \"double\" I'M YOU'RE WE'VE",
    "punctuation!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "   ", "\n", "a", "",
    "https://example.com/path?query=1&b=2 user@example.org <div class=\"x\">y</div>",
    "e\u0301 combining, \u200b zero width, \u00a0 no-break, \u3000 ideographic space",
)


def bytes_to_unicode() -> dict[int, str]:
    """The byte -> printable character table byte-level BPE vocabularies are written in."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


# Byte-level text <-> bytes through latin-1: one character per byte both ways
# (`str.translate` tables: latin-1 text -> byte-level text, and back).
TO_BYTE_LEVEL = bytes_to_unicode()
_FROM_BYTE_LEVEL = {ord(c): b for b, c in bytes_to_unicode().items()}
_NOT_BYTE_LEVEL = re.compile("[^" + re.escape("".join(bytes_to_unicode().values())) + "]")


def token_bytes(token: str) -> bytes | None:
    """The bytes a byte-level token stands for, or None for other text."""
    if _NOT_BYTE_LEVEL.search(token):
        return None
    return token.translate(_FROM_BYTE_LEVEL).encode("latin-1")


def _normalizer_form(spec) -> tuple[str | None, str | None]:
    """(Unicode form or None, reason it cannot be applied exactly or None)."""
    if spec is None:
        return None, None
    kind = spec.get("type")
    if kind in ("NFC", "NFKC"):
        return kind, None
    if kind == "Sequence":
        inner = spec.get("normalizers") or []
        if not inner:
            return None, None
        if len(inner) == 1:
            return _normalizer_form(inner[0])
    return None, f"normalizer {kind}"


def _normalizer(form: str | None):
    """`tokenizers`' normalizer for `form` as a str -> str function, or None."""
    if form is None:
        return None
    from tokenizers import normalizers

    return {"NFC": normalizers.NFC, "NFKC": normalizers.NFKC}[form]().normalize_str


def _pattern(spec) -> tuple[str | None, tuple, str | None]:
    """(last split regex, the split regexes before it, reason it is not reproduced)."""
    def byte_level(node, use_regex):
        return (isinstance(node, dict) and node.get("type") == "ByteLevel"
                and node.get("add_prefix_space") is False
                and bool(node.get("use_regex", True)) is use_regex)

    def isolated(node):
        regex = (node.get("pattern") or {}).get("Regex") if isinstance(node, dict) else None
        if (isinstance(node, dict) and node.get("type") == "Split" and isinstance(regex, str)
                and node.get("behavior") == "Isolated" and not node.get("invert")):
            return regex
        return None

    if spec is None:
        return None, (), "no pre-tokenizer"
    if byte_level(spec, True):
        return GPT2_PATTERN, (), None
    if spec.get("type") == "Sequence":
        steps = spec.get("pretokenizers") or []
        regexes = [isolated(step) for step in steps[:-1]]
        if len(steps) >= 2 and byte_level(steps[-1], False) and None not in regexes:
            return regexes[-1], tuple(regexes[:-1]), None
    return None, (), f"pre-tokenizer {spec.get('type')} is not one the engine reproduces"


# A split regex that is one character class repeated at least once (DeepSeek V3's
# `\p{N}{1,3}` and `[一-龥぀-ゟ゠-ヿ]+`): the class, and its quantifier.
_ONE_CLASS = re.compile(r"(\[(?:[^\]\\]|\\.)*\]|\\[pP]\{\w+\})(\+|\{[1-9]\d*,\d*\}|\{[1-9]\d*\})")


def ascii_class_split(pattern: str):
    """For a split regex that is one character class repeated at least once, the same
    isolated split of ASCII text in Python (`text -> pieces`); else None. The class's
    ASCII members are asked of `tokenizers`' own regex engine, one character at a time;
    on ASCII text a run of them is then all a match can be, and Python's `re` finds the
    same runs of the same characters. Calling `tokenizers` for every piece cost twice
    tiktoken's own encoding of DeepSeek V3 text (a helper's profile)."""
    from tokenizers import Regex, pre_tokenizers

    found = _ONE_CLASS.fullmatch(pattern)
    if found is None:
        return None
    members_of, quantifier = found.groups()
    try:
        removed = pre_tokenizers.Split(Regex(members_of), "removed").pre_tokenize_str
    except Exception:  # noqa: BLE001 - a class the engine reads otherwise alone: no fast path
        return None
    members = [chr(c) for c in range(128) if removed(chr(c)) == []]
    if not members:
        return lambda text: [text] if text else []
    # Captured, so `split` keeps the runs among the text between them; the empty
    # strings it puts at the ends and between adjacent runs go (no run is empty).
    runs = re.compile("([" + "".join(map(re.escape, members)) + "]" + quantifier + ")")
    return lambda text: [part for part in runs.split(text) if part]


class _Isolating:
    """`pieces -> pieces`, each cut into the matches of `pattern` and the text between
    them: `tokenizers`' own `Split` (behavior Isolated), so its regex engine and Unicode
    tables decide, not Python's `regex` (whose newer tables classify characters that
    `tokenizers` holds unassigned: 2,184 of them under DeepSeek V3's split regexes).
    Pickles as its pattern."""

    def __init__(self, pattern: str):
        from tokenizers import Regex, pre_tokenizers

        self.pattern = pattern
        self._split = pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str
        self._ascii = ascii_class_split(pattern)

    def __call__(self, pieces: list[str]) -> list[str]:
        split, ascii_split = self._split, self._ascii
        out: list[str] = []
        for piece in pieces:
            if ascii_split is not None and piece.isascii():
                out += ascii_split(piece)
            else:
                out += [part for part, _ in split(piece)]
        return out

    def __reduce__(self):
        return _Isolating, (self.pattern,)


def _ranks(model: dict, added: set) -> tuple[dict | None, str | None]:
    """tiktoken's {token bytes: id}, or the reason the merges do not allow it. `added`:
    the added tokens' text, which a trained vocabulary holds too; `tokenizers` reads
    them out of text before its model, so the engine never makes them."""
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        return None, "the BPE has no vocab or merges"
    ranks, by_text, multi = {}, {}, []
    for token, token_id in vocab.items():
        if token in added:
            continue
        data = token_bytes(token)
        if data is None:
            return None, f"token {token!r} is not written in byte-level characters"
        ranks[data] = int(token_id)
        by_text[token] = int(token_id)
        if len(data) > 1:
            multi.append(token)
    if len(ranks) != len(by_text) or len(set(ranks.values())) != len(ranks):
        return None, "two tokens share bytes or an id"
    if any(bytes([b]) not in ranks for b in range(256)):
        return None, "not every byte has a token"
    made, last = set(), -1
    for merge in merges:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        result = by_text.get(left + right)
        if result is None or left not in by_text or right not in by_text:
            return None, f"merge {left!r} {right!r} makes no token of the vocabulary"
        if result < last:
            return None, "merges are not in the order of the ids they make"
        last = result
        made.add(result)
    unmade = [t for t in multi if by_text[t] not in made]
    if unmade:
        return None, f"{len(unmade)} multi-byte tokens are made by no merge (e.g. {unmade[0]!r})"
    return ranks, None


_FEW_TOKENS = 16  # added tokens passed to tiktoken whole on every call (`FastBPE._whole_encoder`)


class _AddedTokens:
    """The added tokens `tokenizers` reads out of text before its model, in one mode
    (template text: all of them; content: the non-special ones only). Where each is
    matched exactly as written (no lstrip, rstrip, single_word, nor matching after a
    normalizer), a text is cut at them and the text between is encoded on its own, as
    `tokenizers` does; else a text holding one is left to `tokenizers`."""

    def __init__(self, tokens: list[dict], form: str | None, id_of=None):
        tokens = [t for t in tokens if isinstance(t.get("content"), str) and t["content"]]
        # The id `tokenizers` gives a token (it may not be the file's: an id past a gap
        # in the vocabulary is moved), else the file's.
        self.ids = {t["content"]: int(t["id"]) if id_of is None else id_of(t["content"])
                    for t in tokens}
        contents = sorted(self.ids, key=len, reverse=True)  # leftmost, then longest
        self.pattern = re.compile("(" + "|".join(map(re.escape, contents)) + ")") \
            if contents else None
        self.exact = all(not t.get("lstrip") and not t.get("rstrip") and not t.get("single_word")
                         and (form is None or not t.get("normalized")) for t in tokens)
        # With a normalizer, a token matched after normalization could appear only then.
        normalized = [t["content"] for t in tokens if form is not None and t.get("normalized")]
        self.after_normalizing = _finder(normalized)
        # Whether tiktoken may cut at these tokens itself (`FastBPE._whole_encoder`): its special
        # regex takes the first token listed that matches, in an order of its own, where
        # `tokenizers` takes the longest; they agree when no token begins another.
        self.natively = self.exact and not any(
            a != b and b.startswith(a) for a in self.ids for b in self.ids)
        self.native = None  # (tiktoken encoding, its tokens as a set, byte count by id)


class FastBPE:
    """tiktoken's encoder for one tokenizer, and what it must leave to `tokenizers`."""

    def __init__(self, encoding, form: str | None, added: list[dict], byte_lengths: np.ndarray,
                 splits: tuple = (), whole=None, last=None, id_of=None):
        self._encoding = encoding
        # Split regexes before the last (DeepSeek V3: digits, then CJK runs), applied
        # here by `tokenizers`' own Split; the last one is tiktoken's, with the text between its matches (which
        # `tokenizers` keeps as pieces of their own) encoded whole.
        self._splits = splits
        self._whole = whole
        self._last = last
        # The loaded tokenizer's own normalizer, not `unicodedata`: the two follow
        # different Unicode versions (tokenizers 0.23 leaves U+32FF and 71 other
        # characters alone under NFKC, Python 3.11 does not). ASCII never changes.
        self._normalize = _normalizer(form)
        # Each id's byte count, looked up by id: a list's `__getitem__` mapped over a
        # text's ids costs a quarter of indexing an array with them.
        self._byte_lengths = byte_lengths.tolist()
        self._lengths = self._byte_lengths.__getitem__
        self._modes = {False: _AddedTokens(added, form, id_of),
                       True: _AddedTokens([t for t in added if not t.get("special")], form,
                                          id_of)}

    def encode_many(self, texts: list[str], plain: bool) -> tuple[list, list[int]]:
        """(ids per text, indices of texts left to `tokenizers`: None at those places)."""
        mode = self._modes[plain]
        out, left = [], []
        whole = self._whole_encoder(mode)
        for i, text in enumerate(texts):
            if whole is not None:
                ids = whole(text)
            elif mode.pattern is not None and mode.pattern.search(text):
                ids = self._encode_cut(text, mode) if mode.exact else None
            else:
                ids = self._encode_text(text, mode)
            if ids is None:
                left.append(i)
            out.append(ids)
        return out, left

    def _whole_encoder(self, mode: _AddedTokens):
        """`text -> ids or None` cutting a text at the mode's added tokens inside tiktoken
        (one call per text instead of one per piece between tokens, the same ids), or None
        where that does not apply: a normalizer or split regexes (applied per piece
        here), tokens tiktoken would match differently (`_AddedTokens.natively`), or an
        added token whose id is also a vocabulary token of another byte count (the
        byte check below could not tell them apart)."""
        if not mode.natively or self._normalize is not None or self._splits:
            return None
        if mode.native is None:
            lengths = list(self._byte_lengths)
            sizes = {token_id: len(token.encode("utf-8")) for token, token_id in mode.ids.items()}
            if any(token_id < len(lengths) and lengths[token_id] not in (0, size)
                   for token_id, size in sizes.items()):
                mode.native = False
            else:
                lengths += [0] * (max(sizes, default=-1) + 1 - len(lengths))
                for token_id, size in sizes.items():
                    lengths[token_id] = size
                import tiktoken

                encoding = tiktoken.Encoding("mintdim-fast-bpe-cut", pat_str=self._encoding._pat_str,
                                             mergeable_ranks=self._encoding._mergeable_ranks,
                                             special_tokens=dict(mode.ids))
                mode.native = (encoding, frozenset(mode.ids), lengths)
        if mode.native is False:
            return None
        encode, allowed, byte_count = (mode.native[0]._core_bpe.encode, mode.native[1],
                                       mode.native[2].__getitem__)
        # tiktoken takes the allowed tokens as a set on every call, at about 0.1 us a
        # token (Llama 3 has 256): with many, only those the text holds (the matches
        # tiktoken will find, as no token begins another).
        find = mode.pattern.findall if len(allowed) > _FEW_TOKENS else None

        def whole(text: str) -> list[int] | None:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate: tiktoken would replace it
                return None
            ids = encode(text, allowed if find is None else frozenset(find(text)))
            # Every piece between tokens gives at most its own bytes: the sum is the
            # text's only when no piece lost any (bytes the split regex dropped).
            return ids if sum(map(byte_count, ids)) == size else None

        return whole

    def _encode_cut(self, text: str, mode: _AddedTokens) -> list[int] | None:
        """The ids of a text cut at added tokens: each token's id, the text between
        encoded on its own."""
        ids: list[int] = []
        for k, piece in enumerate(mode.pattern.split(text)):
            if k % 2:
                ids.append(mode.ids[piece])
            elif piece:
                got = self._encode_text(piece, mode)
                if got is None:
                    return None
                ids += got
        return ids

    def _encode_text(self, text: str, mode: _AddedTokens) -> list[int] | None:
        """The ids of a text holding no added token, or None where the engine cannot
        vouch for them."""
        if self._normalize is not None and not text.isascii():
            text = self._normalize(text)
            if mode.after_normalizing is not None and mode.after_normalizing(text):
                return None
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: tiktoken would replace it
            return None
        ids = self._split_encode(text) if self._splits else self._encoding.encode_ordinary(text)
        if sum(map(self._lengths, ids)) != size:  # bytes the split regex dropped
            return None
        return ids

    def _split_encode(self, text: str) -> list[int]:
        pieces = [text]
        for pattern in self._splits:
            pieces = pattern(pieces)
        ids, encode, lengths = [], self._encoding.encode_ordinary, self._lengths
        for piece in pieces:
            got = encode(piece)
            if sum(map(lengths, got)) != len(piece.encode("utf-8")):  # text between matches
                got = [i for part in self._last([piece])
                       for i in self._whole.encode_ordinary(part)]
            ids += got
        return ids


def _finder(contents: list[str]):
    """A test for whether a text holds any of `contents`, or None when there are none."""
    contents = sorted({c for c in contents if c}, key=len, reverse=True)
    if not contents:
        return None
    return re.compile("|".join(map(re.escape, contents))).search


def fast_engine(spec: dict, id_of=None, bpe=None) -> tuple[FastBPE | None, str]:
    """The engine for a parsed tokenizer.json, or None and the reason it is not exact;
    `id_of(token text)`: the loaded tokenizer's id of an added token; `bpe`: the
    loaded tokenizer's own BPE model (`Tokenizer.model`; loaded from `spec` when not
    given), which merges each token's bytes for the check (`_unlike_tiktoken`)."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        return None, f"model {model.get('type')} is not BPE"
    for key, fine in (("dropout", (None, 0, 0.0)), ("byte_fallback", (False, None)),
                      ("continuing_subword_prefix", (None, "")),
                      ("end_of_word_suffix", (None, ""))):
        if model.get(key) not in fine:
            return None, f"the BPE has {key} {model.get(key)!r}"
    form, reason = _normalizer_form(spec.get("normalizer"))
    if reason:
        return None, reason
    pattern, splits, reason = _pattern(spec.get("pre_tokenizer"))
    if reason:
        return None, reason
    added = [t.get("content") for t in spec.get("added_tokens") or [] if isinstance(t, dict)]
    added = [a for a in added if isinstance(a, str)]
    ranks, reason = _ranks(model, set(added))
    if reason:
        return None, reason
    if bpe is None:
        from tokenizers import Tokenizer

        bpe = Tokenizer.from_str(json.dumps(spec)).model
    reason = _unlike_tiktoken(ranks, model["merges"], bool(model.get("ignore_merges")),
                              bpe.tokenize)
    if reason:
        return None, reason
    return engine_from_ranks(ranks, pattern, form, spec, splits, id_of)


def _unlike_tiktoken(ranks: dict, merges: list, ignore_merges: bool, tokenize) -> str | None:
    """Where `tokenizers` and tiktoken part: tiktoken merges any two tokens that make a
    token and takes a piece that is a token whole; `tokenizers` merges listed pairs only,
    and with ignore_merges takes whole pieces too. With ignore_merges every such pair
    must be listed; without it, every token must be made from its own bytes by the
    listed merges (x+y, y+z, x+yz never make "xyz"; tiktoken takes it whole), which
    `tokenize`, the loaded BPE model's own (byte-level text -> tokens), decides: it is
    what `tokenizers` does, in Rust (0.28 s for DeepSeek V3's 128k tokens, a third of
    emulating the merge order in Python)."""
    if not ignore_merges:
        for data in ranks:
            if len(data) < 2:
                continue
            text = data.decode("latin-1").translate(TO_BYTE_LEVEL)
            made = tokenize(text)
            if len(made) != 1 or made[0].value != text:
                return f"the merges do not make the token {data!r} from its bytes"
        return None
    listed = set()
    for merge in merges:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        listed.add((token_bytes(left), token_bytes(right)))
    for data in ranks:
        for cut in range(1, len(data)):
            pair = (data[:cut], data[cut:])
            if pair[0] in ranks and pair[1] in ranks and pair not in listed:
                return f"the merges do not list {pair!r}, which tiktoken would merge"
    return None


def engine_from_ranks(ranks: dict, pattern: str, form: str | None, spec: dict,
                      splits: tuple = (), id_of=None) -> tuple[FastBPE | None, str]:
    """The engine for checked `ranks` ({token bytes: id}); `spec` names the added tokens;
    `splits` the split regexes applied before `pattern`."""
    added = [t for t in spec.get("added_tokens") or [] if isinstance(t, dict)]
    try:
        import tiktoken

        encoding = tiktoken.Encoding("mintdim-fast-bpe", pat_str=pattern,
                                     mergeable_ranks=ranks, special_tokens={})
        whole = last = None
        if splits:
            whole = tiktoken.Encoding("mintdim-fast-bpe-whole", pat_str=r"[\s\S]+",
                                      mergeable_ranks=ranks, special_tokens={})
            splits, last = tuple(map(_Isolating, splits)), _Isolating(pattern)
    except Exception as exc:  # noqa: BLE001 - a regex tiktoken's engine cannot compile
        return None, f"tiktoken cannot take the pre-tokenizer: {type(exc).__name__}: {exc}"
    lengths = np.zeros(max(ranks.values()) + 1, dtype=np.int64)
    for data, token_id in ranks.items():
        lengths[token_id] = len(data)
    return FastBPE(encoding, form, added, lengths, splits, whole, last, id_of), ""
