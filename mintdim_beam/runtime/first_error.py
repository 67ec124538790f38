"""FirstError: of all the errors workers found, the one to raise: the first in file and
line order, with its real line number (known only once every range is counted), so a
bad input gives the same error on every runner. Used by both pipelines and `plan`."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.errors.failures import resolve
from mintdim_beam.runtime.apply_to_all import ApplyToAll


def first_error(pending_errors, numbering, datasets):
    if not pending_errors:
        return None
    first = min(pending_errors, key=lambda e: e.order)
    return resolve(first, numbering, datasets)


class FirstError(beam.PTransform):
    """Pending errors -> one payload (or None): the first in file and line order, with
    its real line number. Shared by the build, the prompt's planning pass and `plan`."""

    def __init__(self, datasets, numbering):
        super().__init__()
        self._datasets, self._numbering = datasets, numbering

    def expand(self, pending):
        datasets = self._datasets
        return pending | "First" >> ApplyToAll(lambda errs, num: first_error(errs, num, datasets),
                                               beam.pvalue.AsSingleton(self._numbering))
