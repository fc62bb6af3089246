"""A Plan: which CPUs each thread of a program may run on, in the order threads are created.

Slot 0 is the main thread, slot k the k-th thread the program creates (helper threads named by the
skip mask take no slot). Past the last slot the plan wraps round. A plan knows how to say itself
in every vocabulary a job script uses: a CPU list, OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY,
likwid-pin, taskset, and the PINWISE_PLAN variable the preload library and the C API read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..cpulist import format_cpulist
from ..errors import PinwiseError
from ..topology import Topology

MAX_SKIP_BITS = 64


@dataclass(frozen=True)
class Plan:
    """Per-slot CPU sets, plus the skip mask for helper threads."""

    slots: tuple[tuple[int, ...], ...]
    skip_mask: int = 0
    #: How the plan was made, in the user's words ("--cpus 0,2", "policy scatter", ...).
    source: str = ""
    #: Extra facts worth keeping with the plan (e.g. the seed of a random placement).
    details: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if not self.slots:
            raise PinwiseError("empty plan: it places no thread; give at least one CPU")
        if any(not slot for slot in self.slots):
            raise PinwiseError("a slot of the plan has no CPU")
        if self.skip_mask < 0 or self.skip_mask >= 1 << MAX_SKIP_BITS:
            raise PinwiseError(f"skip mask {self.skip_mask:#x} is beyond {MAX_SKIP_BITS} bits "
                               "(one bit per created thread, like likwid-pin -s)")

    @property
    def nb_slots(self) -> int:
        return len(self.slots)

    def cpus_for_slot(self, slot: int) -> tuple[int, ...]:
        return self.slots[slot % len(self.slots)]

    @property
    def all_cpus(self) -> list[int]:
        return sorted({cpu for slot in self.slots for cpu in slot})

    @property
    def is_one_cpu_per_slot(self) -> bool:
        return all(len(slot) == 1 for slot in self.slots)

    def validate(self, topology: Topology) -> None:
        """Every CPU must exist on the topology and be allowed to this process."""
        for cpu in self.all_cpus:
            if not topology.has_pu(cpu):
                raise PinwiseError(
                    f"CPU {cpu} does not exist on {topology.source} (its PUs are "
                    f"{topology.cpulist_text(p.os_index for p in topology.pus)})"
                )
        forbidden = [cpu for cpu in self.all_cpus if cpu not in topology.allowed]
        if forbidden:
            why = f" (restricted by {topology.restriction})" if topology.restriction else ""
            raise PinwiseError(
                f"CPU {topology.cpulist_text(forbidden)} is not allowed to this process{why}; "
                f"allowed: {topology.cpulist_text(topology.allowed)}"
            )

    # -- vocabularies --------------------------------------------------------------------------

    def slot_text(self, slot: tuple[int, ...]) -> str:
        return format_cpulist(sorted(slot))

    def pinwise_plan_env(self) -> str:
        return ";".join(self.slot_text(slot) for slot in self.slots)

    def cpulist(self) -> str:
        """One CPU per slot as a list (for sets, each slot's CPUs joined)."""
        return ",".join(self.slot_text(slot) for slot in self.slots)

    def omp_places(self) -> str:
        return ",".join("{" + ",".join(str(c) for c in sorted(slot)) + "}" for slot in self.slots)

    def gomp_cpu_affinity(self) -> str:
        return " ".join(self.slot_text(slot).replace(",", " ") for slot in self.slots)

    def kmp_affinity(self) -> str:
        cpus = ",".join(str(slot[0]) if len(slot) == 1 else "{" + ",".join(map(str, sorted(slot))) + "}"
                        for slot in self.slots)
        return f"granularity=fine,explicit,proclist=[{cpus}]"

    def likwid_pin(self) -> str:
        skip = f" -s {self.skip_mask:#x}" if self.skip_mask else ""
        cpus = ",".join(str(min(slot)) for slot in self.slots)
        return f"likwid-pin -c {cpus}{skip}"

    def taskset(self) -> str:
        return f"taskset -c {format_cpulist(self.all_cpus)}"

    def environment(self) -> dict[str, str]:
        """The variables the preload library and the C API read."""
        env = {"PINWISE_PLAN": self.pinwise_plan_env()}
        if self.skip_mask:
            env["PINWISE_SKIP"] = f"{self.skip_mask:x}"
        return env

    def omp_environment(self) -> dict[str, str]:
        return {"OMP_PLACES": self.omp_places(), "OMP_PROC_BIND": "close"}

    def job_script_lines(self) -> list[tuple[str, str]]:
        """What to paste into a job script, tool by tool."""
        return [
            ("pinwise", f"pinwise run --cpus {self.cpulist()}" + (f" --skip {self.skip_mask:#x}" if self.skip_mask else "")
             if self.is_one_cpu_per_slot else f"PINWISE_PLAN='{self.pinwise_plan_env()}' (C API)"),
            ("likwid-pin", self.likwid_pin()),
            ("OpenMP", f'OMP_PLACES="{self.omp_places()}" OMP_PROC_BIND=close'),
            ("GNU OpenMP", f'GOMP_CPU_AFFINITY="{self.gomp_cpu_affinity()}"'),
            ("Intel OpenMP", f'KMP_AFFINITY="{self.kmp_affinity()}"'),
            ("taskset", f"{self.taskset()}   (whole process, no per-thread placement)"),
        ]

    def to_json(self) -> str:
        return json.dumps({"format": "pinwise-plan", "version": 1, "source": self.source,
                           "slots": [list(slot) for slot in self.slots], "skip_mask": self.skip_mask,
                           "details": self.details})


def parse_skip_mask(text: str | None) -> int:
    """likwid-pin's skip mask: a hex number (0x prefix optional), one bit per created thread."""
    if text is None or text == "":
        return 0
    try:
        value = int(text, 16)
    except ValueError:
        raise PinwiseError(f"skip mask {text!r} is not a hex number such as 0x1 or 0x3") from None
    if value < 0 or value >= 1 << MAX_SKIP_BITS:
        raise PinwiseError(f"skip mask {text!r} is beyond {MAX_SKIP_BITS} bits (one bit per created thread)")
    return value
