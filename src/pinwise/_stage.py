"""Modules that are also their stage's function.

``pinwise.trace``, ``pinwise.bench`` and ``pinwise.topology`` are modules (one per capability)
and, for the Python API, the stage itself: ``pinwise.trace(argv, "comm.json")`` calls
:func:`pinwise.trace.trace`. A package attribute cannot be both a function and the submodule that
the import system binds to the same name, so the module object itself is made callable.
"""

from __future__ import annotations

import sys
import types


class StageModule(types.ModuleType):
    """A module whose call runs its stage function (named by ``__stage__``)."""

    def __call__(self, *args, **kwargs):
        return getattr(self, self.__stage__)(*args, **kwargs)


def make_callable(module_name: str, function: str) -> None:
    module = sys.modules[module_name]
    module.__stage__ = function
    module.__class__ = StageModule
