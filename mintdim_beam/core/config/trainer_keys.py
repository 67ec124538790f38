"""The key names (and SentencePiece's defaults) of a train-tokenizer's `trainer:` block,
declared where the config schema (`schema.TRAINER`) and the trainer's checks
(`train_tokenizer.spec`) both read them: the trainers' own names, `tokenizers`'
`BpeTrainer` and `SentencePieceTrainer`'s."""
from __future__ import annotations

HF_KEYS = ("type", "vocab_size", "min_frequency", "special_tokens", "initial_alphabet",
           "limit_alphabet", "max_token_length", "pre_tokenizer", "normalizer", "decoder",
           "unk_token", "continuing_subword_prefix", "end_of_word_suffix")
# SentencePieceTrainer's keys we pass through (its own names and defaults), by kind.
SP_INT = {"character_coverage": None, "max_sentencepiece_length": 16,
          "max_sentence_length": 4192, "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1,
          "num_threads": 16, "seed_sentencepiece_size": 1000000, "num_sub_iterations": 2}
SP_FLAGS = {"add_dummy_prefix": True, "remove_extra_whitespaces": True, "byte_fallback": False,
            "split_digits": False, "split_by_unicode_script": True, "split_by_number": True,
            "split_by_whitespace": True, "treat_whitespace_as_suffix": False,
            "allow_whitespace_only_pieces": False, "hard_vocab_limit": True,
            "use_all_vocab": False, "train_extremely_large_corpus": False}
SP_TEXT = {"normalization_rule_name": "nmt_nfkc", "unk_piece": "<unk>", "bos_piece": "<s>",
           "eos_piece": "</s>", "pad_piece": "<pad>", "unk_surface": " \u2047 ",
           "required_chars": ""}
SP_LISTS = ("user_defined_symbols", "control_symbols")
SP_KEYS = ("type", "vocab_size", "shrinking_factor", "input_sentence_size", "seed",
           *SP_INT, *SP_FLAGS, *SP_TEXT, *SP_LISTS)
