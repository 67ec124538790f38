"""train-tokenizer: a Hugging Face BPE or SentencePiece tokenizer trained on a corpus of
any size, the counting on a Beam runner, the training by the trainers' own code on the
summed counts (`launch.run_train`; README, Training a tokenizer)."""
