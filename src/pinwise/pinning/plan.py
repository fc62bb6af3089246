"""A Plan: which CPUs each thread of a program may run on, in the order threads are created.

Slot 0 is the main thread, slot k the k-th thread the program creates (helper threads named by the
skip mask take no slot). Past the last slot the plan starts again at slot ``repeat_from`` (0 by
default, as likwid-pin wraps; 1 for programs that create their workers in rounds, so round k's
worker j gets worker j's slot, never the main thread's). A plan knows how to say itself
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
    #: Past the last slot, the plan starts again at this slot.
    repeat_from: int = 0

    def __post_init__(self):
        if not self.slots:
            raise PinwiseError("empty plan: it places no thread; give at least one CPU")
        if any(not slot for slot in self.slots):
            raise PinwiseError("a slot of the plan has no CPU")
        if not 0 <= self.repeat_from < len(self.slots):
            raise PinwiseError(f"the plan repeats from slot {self.repeat_from}, but it has slots 0 to {len(self.slots) - 1}")
        if self.skip_mask < 0 or self.skip_mask >= 1 << MAX_SKIP_BITS:
            raise PinwiseError(f"skip mask {self.skip_mask:#x} is beyond {MAX_SKIP_BITS} bits "
                               "(one bit per created thread, like likwid-pin -s)")

    @property
    def nb_slots(self) -> int:
        return len(self.slots)

    def slot_of_thread(self, index: int) -> int:
        """The slot of the index-th slotted thread (main = 0), as the preload library hands them out."""
        n = len(self.slots)
        return index if index < n else self.repeat_from + (index - self.repeat_from) % (n - self.repeat_from)

    def cpus_for_slot(self, slot: int) -> tuple[int, ...]:
        return self.slots[self.slot_of_thread(slot)]

    def expanded(self, threads: int) -> Plan:
        """The same placement written out for ``threads`` threads with no repeat rule, for tools
        that only wrap from the start of a list (likwid-pin, OpenMP, taskset)."""
        if self.repeat_from == 0 or threads <= len(self.slots):
            return self
        return Plan(tuple(self.cpus_for_slot(k) for k in range(threads)), self.skip_mask, self.source, self.details)

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
        if self.repeat_from:
            env["PINWISE_REPEAT_FROM"] = str(self.repeat_from)
        if self.skip_mask:
            env["PINWISE_SKIP"] = f"{self.skip_mask:x}"
        return env

    def omp_environment(self) -> dict[str, str]:
        return {"OMP_PLACES": self.omp_places(), "OMP_PROC_BIND": "close"}

    def job_script_lines(self, threads: int | None = None) -> list[tuple[str, str]]:
        """What to paste into a job script, tool by tool. The other tools only wrap from the start
        of their list, so a plan that repeats from a later slot is written out for ``threads``
        threads (the count the program was traced with) or, without it, withheld with the reason."""
        options = (f" --skip {self.skip_mask:#x}" if self.skip_mask else "") + \
            (f" --repeat-from {self.repeat_from}" if self.repeat_from else "")
        lines = [("pinwise", f"pinwise run --cpus {self.cpulist()}{options}" if self.is_one_cpu_per_slot
                  else f"PINWISE_PLAN='{self.pinwise_plan_env()}'" + (f" PINWISE_REPEAT_FROM={self.repeat_from}"
                                                                     if self.repeat_from else "") + " (C API)")]
        taskset = ("taskset", f"{self.taskset()}   (whole process, no per-thread placement)")
        if self.repeat_from and threads is None:
            withheld = f"(withheld: it starts again from its first CPU, this plan from slot {self.repeat_from})"
            return lines + [(name, withheld) for name in ("likwid-pin", "OpenMP", "GNU OpenMP", "Intel OpenMP")] + [taskset]
        plan = self.expanded(threads) if self.repeat_from else self
        lines += [
            ("likwid-pin", plan.likwid_pin()),
            ("OpenMP", f'OMP_PLACES="{plan.omp_places()}" OMP_PROC_BIND=close'),
            ("GNU OpenMP", f'GOMP_CPU_AFFINITY="{plan.gomp_cpu_affinity()}"'),
            ("Intel OpenMP", f'KMP_AFFINITY="{plan.kmp_affinity()}"'),
            taskset,
        ]
        if self.repeat_from:
            lines.append(("note", f"the likwid-pin and OpenMP lines are written out for the {threads} threads traced; "
                                  "past them those tools start again from their first CPU"))
        return lines

    def to_json(self) -> str:
        return json.dumps({"format": "pinwise-plan", "version": 1, "source": self.source,
                           "slots": [list(slot) for slot in self.slots], "skip_mask": self.skip_mask,
                           "repeat_from": self.repeat_from, "details": self.details})


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
