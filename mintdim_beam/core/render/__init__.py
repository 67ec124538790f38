"""Rendering: JSONL field templates (`template`) and their checks against the
tokenizer (`template_checks`), and one batch of lines rendered into samples: templated
fields (`render_batch`) or dialogues and preference pairs (`render_dialogues`, using
`core.chat`)."""
