"""The errors a user catches, at a path that stays: `from mintdim_beam.errors import
SourceParseError` (or `from mintdim_beam import MintDimError`, the base of them all).
Where they are defined (`mintdim_beam.core.errors`) may move; this module will not.
Each is bilingual: `exc.english`, `exc.vietnamese`, `str(exc)` both (`docs/errors.md`)."""
from mintdim_beam.core.errors import *  # noqa: F401,F403 - the public path re-exports all
from mintdim_beam.core.errors import __all__  # noqa: F401
