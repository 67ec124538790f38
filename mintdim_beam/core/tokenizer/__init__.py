"""Tokenizers: SentencePiece and Hugging Face adapters (`tokenizers`), special tokens
and their sources (`special_tokens`), encoding a rendered batch (`encode_batch`), the
round-trip evidence (`round_trip`) and the tokenizer card (`tokenizer_card`)."""
