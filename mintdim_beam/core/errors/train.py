"""The errors of train-tokenizer, in the seed's two languages. The config's are raised
before the pipeline starts; the ones only the counted corpus can show (no text, a
vocabulary that the alphabet fills, a `min_frequency` no pair reaches, a tie at the
alphabet's cut, a count past the trainer's 32 bits) after counting, before anything is
written to the output directory: a training either leaves a complete tokenizer or none."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError, num

# rule -> (English, Vietnamese); {value} is the offending value as given.
RULES = {
    "trainer_type": ("trainer.type must be bpe, sentencepiece_bpe or sentencepiece_unigram, "
                     "got {value}",
                     "trainer.type phải là bpe, sentencepiece_bpe hoặc sentencepiece_unigram, "
                     "nhận {value}"),
    "vocab_size": ("trainer.vocab_size must be a positive integer, got {value}",
                   "trainer.vocab_size phải là số nguyên dương, nhận {value}"),
    "count": ("{value} must be a non-negative integer",
              "{value} phải là số nguyên không âm"),
    "positive": ("{value} must be a positive integer", "{value} phải là số nguyên dương"),
    "fraction": ("{value} must be a number from 0 to 1", "{value} phải là số từ 0 đến 1"),
    "flag": ("{value} must be true or false", "{value} phải là true hoặc false"),
    "text": ("{value} must be a non-empty string", "{value} phải là chuỗi không rỗng"),
    "token_list": ("{value} must be a list of non-empty strings",
                   "{value} phải là danh sách các chuỗi không rỗng"),
    "pre_tokenizer": ("trainer.pre_tokenizer must be byte_level, llama3, whitespace, "
                      "whitespace_split, metaspace, or a `tokenizers` pre-tokenizer as JSON "
                      "(a mapping with a type); {value}",
                      "trainer.pre_tokenizer phải là byte_level, llama3, whitespace, "
                      "whitespace_split, metaspace, hoặc một pre-tokenizer của `tokenizers` "
                      "dạng JSON (mapping có type); {value}"),
    "normalizer": ("trainer.normalizer must be null, nfc, nfkc, nfd, nfkd, lowercase, or a "
                   "`tokenizers` normalizer as JSON (a mapping with a type); {value}",
                   "trainer.normalizer phải là null, nfc, nfkc, nfd, nfkd, lowercase, hoặc một "
                   "normalizer của `tokenizers` dạng JSON (mapping có type); {value}"),
    "initial_alphabet": ("trainer.initial_alphabet must be byte_level or a list of single "
                         "characters, got {value}",
                         "trainer.initial_alphabet phải là byte_level hoặc danh sách các ký tự "
                         "đơn, nhận {value}"),
    "hash_order": ("{value} makes `tokenizers`' own trainer number tokens in the order of "
                   "its hash map, which changes from run to run: no trainer, ours included, "
                   "can give a reproducible vocabulary with it",
                   "{value} khiến trainer của `tokenizers` đánh số token theo thứ tự hash map, "
                   "thay đổi giữa các lần chạy: không trainer nào, kể cả của chúng tôi, cho "
                   "được vocabulary tái lập được với thiết lập này"),
    "sentencepiece_option": ("{value} cannot be reproduced from counted words (SentencePiece "
                             "would see other sentences): leave it at its default",
                             "{value} không tái tạo được từ số đếm từ (SentencePiece sẽ thấy "
                             "các câu khác): hãy để giá trị mặc định"),
    "chat_template": ("tokenizer_config.chat_template must be chatml, llama3, alpaca or a "
                      ".jinja file, got {value}",
                      "tokenizer_config.chat_template phải là chatml, llama3, alpaca hoặc một "
                      "file .jinja, nhận {value}"),
    "config_token": ("tokenizer_config.{value} names a token the trained vocabulary will not "
                     "hold as one token: list it in trainer.special_tokens (or a SentencePiece "
                     "symbol)",
                     "tokenizer_config.{value} là token mà vocabulary được train sẽ không giữ "
                     "nguyên là một token: hãy liệt kê nó trong trainer.special_tokens (hoặc "
                     "symbol của SentencePiece)"),
    "no_unk": ("{value}: a BPE whose pre-tokenizer is not ByteLevel needs trainer.unk_token "
               "(listed in special_tokens): without one, `tokenizers` drops every character "
               "it has not seen, silently, and our builds refuse such a tokenizer",
               "{value}: BPE có pre-tokenizer không phải ByteLevel cần trainer.unk_token (có "
               "trong special_tokens): nếu không, `tokenizers` âm thầm bỏ mọi ký tự chưa gặp, "
               "và các build của chúng tôi từ chối tokenizer như vậy"),
    "output_dir": ("output.dir must be one directory (a path string), got {value}",
                   "output.dir phải là một thư mục (chuỗi đường dẫn), nhận {value}"),
    "source_type": ("train-tokenizer reads jsonl (fields and templates), text (one field) or "
                    "chat (messages joined) sources; got {value}",
                    "train-tokenizer đọc source jsonl (fields và templates), text (một field) "
                    "hoặc chat (các message nối lại); nhận {value}"),
}


class TrainerValidationError(MintDimError):
    """Raised before any output when a train-tokenizer setting is invalid; `rule` names
    which (a key of `RULES`), `value` the offending value as given."""

    def __init__(self, *, component: str, rule: str, value: str):
        if rule not in RULES:
            raise TypeError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
        kw = {"component": str(component), "rule": rule, "value": str(value)}
        en, vi = (text.format(value=kw["value"]) for text in RULES[rule])
        self.component = kw["component"]
        self._set(kw, ["Invalid train-tokenizer configuration.",
                       f"Component: {kw['component']}", f"Problem: {en}"],
                  ["Cấu hình train-tokenizer không hợp lệ.", f"Thành phần: {kw['component']}",
                   f"Vấn đề: {vi}"])


class SpecialTokenRepeatedError(MintDimError):
    """Raised before any output when a special token (or SentencePiece symbol) is listed
    twice: the trainer would keep one id for it and every later id would move."""

    def __init__(self, *, component: str, token: str, positions: list):
        kw = {"component": str(component), "token": str(token),
              "positions": [int(p) for p in positions]}
        at = ", ".join(str(p) for p in kw["positions"])
        self._set(kw, ["A special token is listed more than once.",
                       f"Component: {kw['component']}", f"Token: {kw['token']!r}",
                       f"Positions: {at}", "Fix: list each special token once."],
                  ["Một token đặc biệt được liệt kê nhiều lần.",
                   f"Thành phần: {kw['component']}", f"Token: {kw['token']!r}",
                   f"Vị trí: {at}", "Cách sửa: mỗi token đặc biệt chỉ liệt kê một lần."])


class SpecialTokenSplitError(MintDimError):
    """Raised before any output when a SentencePiece symbol holds whitespace: SentencePiece
    cuts every sentence into words at whitespace before it looks for symbols, so the
    symbol could never be matched as one piece."""

    def __init__(self, *, component: str, token: str, pieces: list):
        kw = {"component": str(component), "token": str(token),
              "pieces": [str(p) for p in pieces]}
        shown = " | ".join(repr(p) for p in kw["pieces"])
        self._set(kw, ["A special token would be split by the pre-tokenizer.",
                       f"Component: {kw['component']}", f"Token: {kw['token']!r}",
                       f"Split into: {shown}",
                       "Fix: use a special token without whitespace."],
                  ["Một token đặc biệt sẽ bị pre-tokenizer tách ra.",
                   f"Thành phần: {kw['component']}", f"Token: {kw['token']!r}",
                   f"Bị tách thành: {shown}",
                   "Cách sửa: dùng token đặc biệt không chứa khoảng trắng."])


class TrainerVocabSizeError(MintDimError):
    """Raised when `vocab_size` leaves no room to learn: the special tokens and the
    alphabet (the initial alphabet before counting, every kept character after) fill it.
    `tokenizers` would silently return a larger vocabulary than asked."""

    def __init__(self, *, vocab_size: int, special: int, alphabet: int, where: str):
        kw = {"vocab_size": int(vocab_size), "special": int(special),
              "alphabet": int(alphabet), "where": str(where)}
        need = kw["special"] + kw["alphabet"] + 1
        self._set(kw, ["The vocabulary is too small for its special tokens and alphabet.",
                       f"vocab_size: {num(kw['vocab_size'], ',')}",
                       f"Special tokens: {kw['special']}",
                       f"Alphabet: {num(kw['alphabet'], ',')} ({kw['where']})",
                       f"Fix: a vocab_size of at least {num(need, ',')}, or fewer special "
                       "tokens, or limit_alphabet."],
                  ["Vocabulary quá nhỏ so với số token đặc biệt và bảng ký tự.",
                   f"vocab_size: {num(kw['vocab_size'], '.')}",
                   f"Token đặc biệt: {kw['special']}",
                   f"Bảng ký tự: {num(kw['alphabet'], '.')} ({kw['where']})",
                   f"Cách sửa: vocab_size ít nhất {num(need, '.')}, hoặc bớt token đặc biệt, "
                   "hoặc dùng limit_alphabet."])


class TrainEmptyCorpusError(MintDimError):
    """Raised when the inputs give no text to train on (every row blank, held out, or
    rendered to nothing): a tokenizer of specials and alphabet alone would look trained."""

    def __init__(self, *, files: list, rows: int, held_out: int):
        kw = {"files": [str(f) for f in files], "rows": int(rows), "held_out": int(held_out)}
        shown = ", ".join(kw["files"])
        self._set(kw, ["No text to train the tokenizer on.", f"Files: {shown}",
                       f"Rows read: {num(kw['rows'], ',')}",
                       f"Rows held out: {num(kw['held_out'], ',')}",
                       "Fix: check source.fields / source.templates (or source.field) select "
                       "the text, and that holdout leaves rows to train on."],
                  ["Không có văn bản nào để train tokenizer.", f"File: {shown}",
                   f"Số dòng đã đọc: {num(kw['rows'], '.')}",
                   f"Số dòng giữ lại (holdout): {num(kw['held_out'], '.')}",
                   "Cách sửa: kiểm tra source.fields / source.templates (hoặc source.field) có "
                   "chọn đúng văn bản, và holdout còn chừa dòng để train."])


class TrainerMinFrequencyError(MintDimError):
    """Raised when `min_frequency` is above the count of every pair: the trainer would
    learn no merge and return the alphabet as the tokenizer."""

    def __init__(self, *, min_frequency: int, largest: int, pair: str):
        kw = {"min_frequency": int(min_frequency), "largest": int(largest), "pair": str(pair)}
        self._set(kw, ["min_frequency leaves nothing to learn.",
                       f"min_frequency: {num(kw['min_frequency'], ',')}",
                       f"Most frequent pair: {kw['pair']!r}, {num(kw['largest'], ',')} times",
                       "Fix: a lower min_frequency, or more text."],
                  ["min_frequency không để lại gì để học.",
                   f"min_frequency: {num(kw['min_frequency'], '.')}",
                   f"Cặp xuất hiện nhiều nhất: {kw['pair']!r}, {num(kw['largest'], '.')} lần",
                   "Cách sửa: giảm min_frequency, hoặc thêm văn bản."])


class TrainerAlphabetTieError(MintDimError):
    """Raised when `limit_alphabet` cuts among characters of equal count: `tokenizers`
    keeps which of them by its hash map's order, so no run could be reproduced. `limits`:
    the two nearest limits that cut cleanly (none of them kept, all of them kept)."""

    def __init__(self, *, limit_alphabet: int, count: int, tied: str, limits: list):
        kw = {"limit_alphabet": int(limit_alphabet), "count": int(count), "tied": str(tied),
              "limits": [int(n) for n in limits]}
        low, high = kw["limits"]
        self._set(kw, ["limit_alphabet cuts between characters seen equally often.",
                       f"limit_alphabet: {kw['limit_alphabet']}",
                       f"Characters seen {num(kw['count'], ',')} times: {kw['tied']!r}",
                       f"Fix: limit_alphabet {low} (none of them) or {high} (all of them), "
                       "or no limit."],
                  ["limit_alphabet cắt giữa các ký tự có cùng số lần xuất hiện.",
                   f"limit_alphabet: {kw['limit_alphabet']}",
                   f"Các ký tự xuất hiện {num(kw['count'], '.')} lần: {kw['tied']!r}",
                   f"Cách sửa: limit_alphabet {low} (bỏ tất cả) hoặc {high} (giữ tất cả), "
                   "hoặc không giới hạn."])


class TrainerCountOverflowError(MintDimError):
    """Raised when a pair of characters occurs more often than `tokenizers`' trainer
    counts (32-bit signed): the crate would wrap around silently and learn garbage."""

    def __init__(self, *, pair: str, count: int):
        kw = {"pair": str(pair), "count": int(count)}
        self._set(kw, ["The corpus is too large for the BPE trainer's pair counts.",
                       f"Pair: {kw['pair']!r}, {num(kw['count'], ',')} times "
                       "(the trainer counts up to 2,147,483,647)",
                       "Fix: train on a sample of the rows (sample: a fraction)."],
                  ["Corpus quá lớn so với bộ đếm cặp của trainer BPE.",
                   f"Cặp: {kw['pair']!r}, {num(kw['count'], '.')} lần "
                   "(trainer chỉ đếm tới 2.147.483.647)",
                   "Cách sửa: train trên một phần mẫu của các dòng (sample: một tỉ lệ)."])
