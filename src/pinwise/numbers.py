"""Numbers as users and files write them, read one way everywhere: ASCII digits only, bounded.

Python's own readers are generous: ``int("١")`` is 1 (an Arabic-Indic digit), ``int("1_0")`` is
10, ``float("1e400")`` is infinity. A CPU number, a count or a size written that way is a mistake
to report, not a number to guess, so every number pinwise reads from a command line, a synthetic
string, an XML attribute or a CSV file goes through :func:`whole_number`, :func:`hex_number` or
:func:`real_number`, each ending in one clear error that names what was being read.
"""

from __future__ import annotations

import math
import re

from .errors import PinwiseError

_DECIMAL = re.compile(r"[0-9]+\Z")
_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]+\Z")
_REAL = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")

#: Digits beyond which a "number" is certainly a mistake (and Python refuses to convert it).
MAX_DIGITS = 40


def _bounded(value, text: str, what: str, minimum, maximum, say=str):
    """``value`` within [minimum, maximum], else the message names the bound as ``say`` writes it."""
    if minimum is not None and value < minimum:
        raise PinwiseError(f"{what} must be at least {say(minimum)}, not {text}")
    if maximum is not None and value > maximum:
        raise PinwiseError(f"{what} must be at most {say(maximum)}, not {text}")
    return value


def say_duration(seconds: float, digits: int | None = None) -> str:
    """A duration in the unit a user would write it in: 10ms, 1.5s, 10m, 2h (to ``digits``
    significant digits: 27s, 4.5m)."""
    larger = None
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        value = float(f"{seconds / size:.{digits}g}") if digits else seconds / size
        if value >= 1 or unit == "us":  # rounded first: 59.97 s to two digits is 1m, not 60s
            if larger is not None and value * size >= larger[1]:  # 55 s to one digit: 0.9m, but 6e+01 s
                return f"1{larger[0]}"
            return f"{value:g}{unit}"
        larger = (unit, size)
    return f"{seconds:g}s"


def whole_number(text: str, what: str, minimum: int | None = 0, maximum: int | None = None) -> int:
    """``text`` (decimal ASCII digits, blanks around allowed) as an int in [minimum, maximum]."""
    text = str(text).strip()
    if text.startswith("-") and _DECIMAL.match(text[1:]) and len(text) <= MAX_DIGITS and minimum is not None:
        return _bounded(int(text), text, what, minimum, maximum)  # "-1" is a whole number below the bound
    if not _DECIMAL.match(text):
        raise PinwiseError(f"{what} {text[:MAX_DIGITS]!r} is not a whole number (digits 0-9 only)")
    if len(text) > MAX_DIGITS:
        raise PinwiseError(f"{what} {text[:MAX_DIGITS]}... ({len(text)} digits) is far too large")
    return _bounded(int(text), text, what, minimum, maximum)


def hex_number(text: str, what: str, maximum: int | None = None) -> int:
    """``text`` as a hexadecimal number, ``0x`` prefix optional (likwid-pin's skip masks, cpusets)."""
    text = str(text).strip()
    if not _HEX.match(text) or len(text) > MAX_DIGITS:
        raise PinwiseError(f"{what} {text[:MAX_DIGITS]!r} is not a hex number such as 0x1 or 0x3")
    return _bounded(int(text, 16), text, what, None, maximum)


def real_number(text: str, what: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """``text`` as a finite float in [minimum, maximum]: ASCII digits, a point, an exponent."""
    text = str(text).strip()
    if not _REAL.match(text) or len(text) > MAX_DIGITS:
        raise PinwiseError(f"{what} {text[:MAX_DIGITS]!r} is not a number")
    value = float(text)
    if not math.isfinite(value):
        raise PinwiseError(f"{what} {text!r} is too large")
    return _bounded(value, text, what, minimum, maximum)


_DURATION = re.compile(r"([0-9.eE+-]+)\s*(ns|us|µs|ms|s|m|min|h)?\Z")
_UNIT_SECONDS = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0, "min": 60.0,
                 "h": 3600.0}


def duration_seconds(text: str, what: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """A duration as users write it for perf, timeout and sleep: ``10``, ``10s``, ``200ms``,
    ``250us``, ``5ns``, ``1.5m``, ``1h`` (a bare number is seconds), in seconds within [minimum, maximum]."""
    text = str(text).strip()
    found = _DURATION.match(text)
    if not found:
        raise PinwiseError(f"{what} {text[:MAX_DIGITS]!r} is not a duration such as 10s, 200ms or 2m")
    value = real_number(found.group(1), what) * _UNIT_SECONDS[found.group(2)]
    return _bounded(value, text, what, minimum, maximum, say_duration)
