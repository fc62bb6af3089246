"""Libraries that only some features need, installed with pinwise's extras: ``pinwise[plots]``
(matplotlib: PNG/SVG plots, the HTML report's pictures) and ``pinwise[graphs]`` (pymetis: the
partitioning policies gp, lpgp and gplp; networkx: exact matching where pinwise was built without
LEMON). A plain ``pinwise run`` needs neither."""

from __future__ import annotations

import importlib

from .errors import PinwiseError

#: module -> (the extra that installs it, what it is for)
_EXTRAS = {
    "matplotlib": ("plots", "plots (PNG, SVG and the HTML report's pictures)"),
    "pymetis": ("graphs", "the partitioning policies gp, lpgp and gplp (METIS)"),
    "networkx": ("graphs", "exact matching without LEMON"),
}


def require(module: str):
    """``module``, imported; one clear error naming the extra that installs it when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra, purpose = _EXTRAS[module.split(".")[0]]
        raise PinwiseError(f"{purpose} need {module.split('.')[0]}, which is not installed: "
                           f"pip install 'pinwise[{extra}]'") from None
