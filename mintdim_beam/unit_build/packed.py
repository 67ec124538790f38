"""Side inputs carried as one pickled blob.

Beam's state cache weighs every side input it loads by walking the object graph
(objsize). A dict of thousands of overflow outcomes took longer to weigh than to use,
once per consumer; one bytes object weighs in constant time.
"""
from __future__ import annotations

import pickle


class Packed:
    """`Packed(value).unpack()` returns an equal value, unpickled once per instance."""

    _UNSET = object()

    def __init__(self, value):
        self._blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._value = Packed._UNSET

    def __getstate__(self):
        return self._blob

    def __setstate__(self, blob):
        self._blob = blob
        self._value = Packed._UNSET

    def unpack(self):
        if self._value is Packed._UNSET:
            self._value = pickle.loads(self._blob)
        return self._value
