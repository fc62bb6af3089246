"""Per-run counters: CPU migrations and context switches (perf software events), RAPL energy.

Software events need no hardware counters, so they work in VMs. The counters are opened on the
bench process itself with ``inherit``: every child created afterwards is counted too, and its
counts join ours when it exits, so one reading before and one after a run give the program's
events (plus the handful of the bench process waiting for it). Where perf_event_open is refused
(perf_event_paranoid, seccomp), context switches come from getrusage and migrations are unknown.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

_SYS_PERF_EVENT_OPEN = 298  # x86-64
_PERF_TYPE_SOFTWARE = 1
_CONTEXT_SWITCHES = 3
_CPU_MIGRATIONS = 4
_ATTR_SIZE = 128
_INHERIT = 1 << 1


class SoftwareCounters:
    """Open the two counters once per bench; read() gives (migrations, context switches)."""

    def __init__(self):
        self.fds: dict[str, int] = {}
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return
        for name, config in (("migrations", _CPU_MIGRATIONS), ("context_switches", _CONTEXT_SWITCHES)):
            attr = bytearray(_ATTR_SIZE)
            struct.pack_into("IIQ", attr, 0, _PERF_TYPE_SOFTWARE, _ATTR_SIZE, config)
            struct.pack_into("Q", attr, 40, _INHERIT)  # flags word after sample_period/type/read_format
            buffer = ctypes.create_string_buffer(bytes(attr), _ATTR_SIZE)
            fd = libc.syscall(_SYS_PERF_EVENT_OPEN, buffer, 0, -1, -1, 0)
            if fd >= 0:
                self.fds[name] = fd

    def read(self) -> dict[str, int | None]:
        values: dict[str, int | None] = {}
        for name in ("migrations", "context_switches"):
            fd = self.fds.get(name)
            values[name] = struct.unpack("Q", os.read(fd, 8))[0] if fd is not None else None
        return values

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def rapl_energy_uj() -> int | None:
    """Package energy in microjoules summed over RAPL domains, or None where RAPL is not readable."""
    total = 0
    found = False
    for domain in Path("/sys/class/powercap").glob("intel-rapl:[0-9]*"):
        if domain.name.count(":") != 1:
            continue
        try:
            total += int((domain / "energy_uj").read_text())
            found = True
        except (OSError, ValueError):
            return None
    return total if found else None
