"""Chat and preference rendering, pure (no Beam, no I/O): JSON rows normalized into
`Message` tuples (`messages`), rendered by Jinja chat templates in a sandbox
(`jinja_env`, `templates`), split into a record's `context_<i>` / `assistant_<i>`
segments (`segments`) or a preference record's `prompt` / `chosen` / `rejected`
(`preference`), with the spans of user content that must be tokenized as plain text
(`spans`). Each step is testable alone; tokenizing the segments is the caller's."""
from mintdim_beam.core.chat.messages import (ROLE_ALIASES, DialogueProblem, Message,
                                              normalize_messages, normalize_row)
from mintdim_beam.core.chat.preference import (PREFERENCE_SEGMENTS, PreferenceRecord,
                                                preference_record)
from mintdim_beam.core.chat.segments import (ON_EXTRA_TURNS, ChatRecord, Layout,
                                              RenderedDialogue, chat_records, lay_out,
                                              render_dialogue, segment_names)
from mintdim_beam.core.chat.spans import plain_pieces, special_pattern
from mintdim_beam.core.chat.templates import (BUILTIN_TEMPLATES, ChatTemplate,
                                               TemplateSourceError, builtin_template)

__all__ = [
    "ROLE_ALIASES", "DialogueProblem", "Message", "normalize_messages", "normalize_row",
    "PREFERENCE_SEGMENTS", "PreferenceRecord", "preference_record",
    "ON_EXTRA_TURNS", "ChatRecord", "Layout", "RenderedDialogue", "chat_records", "lay_out",
    "render_dialogue", "segment_names",
    "plain_pieces", "special_pattern",
    "BUILTIN_TEMPLATES", "ChatTemplate", "TemplateSourceError", "builtin_template",
]
