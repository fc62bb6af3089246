"""CPU lists in the kernel's and taskset's syntax: ``0,4,1-3``, ``0-15:2``.

Order is kept (a placement ``0,4,1`` means slot 0 on CPU 0, slot 1 on CPU 4, ...), so these are
lists, not sets; :func:`format_cpulist` compresses ascending runs back into ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import PinwiseError

_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?$")  # ASCII digits only, as pinwise.numbers

#: Upper bound on a CPU number; Linux's NR_CPUS maximum is 8192.
MAX_CPU = 1 << 16


def parse_cpulist(text: str, what: str = "CPU list") -> list[int]:
    """Parse ``"0,4,1-3"`` (and ``a-b:step``) into ``[0, 4, 1, 2, 3]``, keeping the order given."""
    text = text.strip()
    if not text:
        raise PinwiseError(f"empty {what}: give CPU numbers such as 0,2 or 0-3")
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        match = _RANGE.match(part)
        if not match:
            raise PinwiseError(
                f"malformed {what} {text!r}: {part!r} is not a number or a range like 2-5 or 0-14:2"
            )
        if max(len(g or "") for g in match.groups()) > 9:
            raise PinwiseError(f"CPU number in {what} {text!r} is beyond any machine (max {MAX_CPU - 1})")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        step = int(match.group(3)) if match.group(3) is not None else 1
        if last < first:
            raise PinwiseError(f"malformed {what} {text!r}: range {part!r} runs backwards")
        if step < 1:
            raise PinwiseError(f"malformed {what} {text!r}: step in {part!r} must be at least 1")
        if last >= MAX_CPU:
            raise PinwiseError(f"CPU {last} in {what} {text!r} is beyond any machine (max {MAX_CPU - 1})")
        cpus.extend(range(first, last + 1, step))
    return cpus


def format_cpulist(cpus: Iterable[int]) -> str:
    """Write CPUs as a compact list, ranges for ascending runs: ``[0,1,2,5,4]`` -> ``"0-2,5,4"``."""
    cpus = list(cpus)
    parts: list[str] = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{cpus[i]}-{cpus[j]}")
        else:
            parts.extend(str(c) for c in cpus[i : j + 1])
        i = j + 1
    return ",".join(parts)
