"""A Plan: which CPUs each thread of a program may run on, in the order threads are created.

Slot 0 is the main thread, slot k the k-th thread the program creates (helper threads named by the
skip mask take no slot). Past the last slot the plan starts again at slot ``repeat_from`` (0 by
default, as likwid-pin wraps; 1 for programs that create their workers in rounds, so round k's
worker j gets worker j's slot, never the main thread's). A plan knows how to say itself
in every vocabulary a job script uses: a CPU list, OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY,
likwid-pin, taskset, and the PINWISE_PLAN variable the preload library and the C API read.

It also knows the machine it was made for (:class:`Machine`): the CPU numbers of a plan computed
for a 4-socket machine exist on many others, where they mean other cores. The mapping file that
``pinwise map -o`` writes and ``pinwise run --mapping`` reads is :meth:`Plan.to_json`.
"""

from __future__ import annotations

import shlex

from .cpulist import format_cpulist
from .errors import PinwiseError
from .frozen import Frozen
from .numbers import hex_number

MAX_SKIP_BITS = 64
MAPPING_FORMAT = "pinwise-mapping"
MAPPING_VERSION = 2
#: Threads a plan places at most (the bound of every -n option too): as many as PUs a topology holds.
MAX_SLOTS = 1 << 16


class Machine(Frozen):
    """The structure a plan was computed for: a fingerprint of the tree (object types and the PUs
    below each, cache sizes aside) and its shape in words, e.g. ``pack:2 core:1 pu:1``."""

    fingerprint: str
    shape: str

    @classmethod
    def of(cls, topology) -> Machine:
        return cls(topology.fingerprint, topology.shape)


class Rounds(Frozen):
    """Workers created in rounds: the creator (thread 0) starts ``size`` workers, joins them, and
    starts ``size`` more, ``count`` times; ``threads`` is how many the trace saw in all."""

    size: int
    count: int
    threads: int = 0

    def role(self, thread: int) -> int:
        """The slot of a thread when the plan holds the creator and one round: 0, 1..size."""
        return 0 if thread == 0 else 1 + (thread - 1) % self.size


class Plan(Frozen):
    """Per-slot CPU sets, plus the skip mask for helper threads."""

    slots: tuple[tuple[int, ...], ...]
    skip_mask: int = 0
    #: How the plan was made, in the user's words ("--cpus 0,2", "policy scatter", ...).
    source: str = ""
    #: Past the last slot, the plan starts again at this slot.
    repeat_from: int = 0
    #: The registry policy that made it, if one did.
    policy: str | None = None
    #: The seed of a random placement.
    seed: int | None = None
    #: Where a communication-aware policy put the creator thread, when not like any thread.
    creator: str | None = None
    #: The program creates its workers in rounds: the plan holds the creator and one round.
    rounds: Rounds | None = None
    #: The machine the plan was computed for (None: any machine whose CPUs it names).
    machine: Machine | None = None

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

    @classmethod
    def from_cpus(cls, cpus, **fields) -> Plan:
        """One CPU per slot, thread k on ``cpus[k]``."""
        return cls(tuple((int(cpu),) for cpu in cpus), **fields)

    @property
    def nb_slots(self) -> int:
        return len(self.slots)

    @property
    def pus(self) -> tuple[int, ...]:
        """The first CPU of each slot: for one-CPU slots, the PU of each thread."""
        return tuple(min(slot) for slot in self.slots)

    def slot_of_thread(self, index: int) -> int:
        """The slot of the index-th slotted thread (main = 0), as the preload library hands them out."""
        n = len(self.slots)
        return index if index < n else self.repeat_from + (index - self.repeat_from) % (n - self.repeat_from)

    def cpus_for_slot(self, slot: int) -> tuple[int, ...]:
        return self.slots[self.slot_of_thread(slot)]

    def skips(self, index: int) -> bool:
        """Whether the ``index``-th thread (0: the main thread, which is never skipped) takes no
        slot: bit ``index - 1`` of the skip mask, as likwid-pin -s counts created threads."""
        return 0 < index <= 64 and bool((self.skip_mask >> (index - 1)) & 1)

    def expanded(self, threads: int) -> Plan:
        """The same placement written out for ``threads`` threads with no repeat rule, for tools
        that only wrap from the start of a list (likwid-pin, OpenMP, taskset)."""
        if self.repeat_from == 0 or threads <= len(self.slots):
            return self
        return self.replace(slots=tuple(self.cpus_for_slot(k) for k in range(threads)), repeat_from=0)

    @property
    def traced_threads(self) -> int | None:
        """How many threads the program had when traced, if it creates them in rounds."""
        return self.rounds.threads if self.rounds and self.rounds.threads else None

    @property
    def all_cpus(self) -> list[int]:
        return sorted({cpu for slot in self.slots for cpu in slot})

    @property
    def is_one_cpu_per_slot(self) -> bool:
        return all(len(slot) == 1 for slot in self.slots)

    def validate(self, topology) -> None:
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

    def check_machine(self, topology, any_machine: bool | None = False) -> str | None:
        """None if the plan was made for this machine's structure (or for none in particular).
        Otherwise the one line that says so: an error, or with ``any_machine`` a warning to print
        (None: the command has no --any-machine, so the error does not offer it)."""
        if self.machine is None or self.machine.fingerprint == topology.fingerprint:
            return None
        text = (f"this plan was made for another machine ({self.machine.shape}); this one is {topology.shape}, "
                "where its CPU numbers name other cores")
        if any_machine:
            return f"{text}; running it anyway (--any-machine)"
        if any_machine is None:
            here = (topology.source or "").startswith("this machine")
            machine = shlex.quote(topology.source or topology.shape)
            again = "pinwise map COMM -o FILE" if here else f"pinwise map COMM -t {machine} -o FILE"
            raise PinwiseError(f"{text}: compute it again for {'this machine' if here else 'it'} ({again})")
        raise PinwiseError(f"{text}: compute it again here (pinwise map COMM -o FILE), or add --any-machine "
                           "to run it as it is")

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

    def omp_line(self) -> str:
        """The OpenMP 4 variables, as written before the program."""
        return f'OMP_PLACES="{self.omp_places()}" OMP_PROC_BIND=close'

    def gomp_line(self) -> str:
        return f'GOMP_CPU_AFFINITY="{self.gomp_cpu_affinity()}"'

    def kmp_line(self) -> str:
        return f'KMP_AFFINITY="{self.kmp_affinity()}"'

    def likwid_cpus(self) -> list[int]:
        """The shortest CPU list that likwid-pin, wrapping round as it does, turns into this plan."""
        cpus = [min(slot) for slot in self.slots]
        period = next(p for p in range(1, len(cpus) + 1) if all(cpus[i] == cpus[i % p] for i in range(len(cpus))))
        return cpus[:period]

    def likwid_truncation(self, hw_threads: int | None) -> str | None:
        """Why likwid-pin cannot apply this plan on a machine of ``hw_threads`` hardware threads,
        or None: likwid-pin 5.2 keeps only the first ``hw_threads`` CPUs of a longer list (its
        cpustr_to_cpulist fills a list that long) and wraps round those, so later threads would
        land elsewhere than the plan says."""
        cpus = self.likwid_cpus()
        if hw_threads is None or len(cpus) <= hw_threads:
            return None
        return (f"its list would have {len(cpus)} CPUs, more than the machine's {hw_threads} hardware threads; "
                f"likwid-pin keeps only the first {hw_threads} and wraps round them, so thread {hw_threads} "
                "onward would run elsewhere")

    def likwid_pin(self) -> str:
        """The likwid-pin line; where its list is shorter than the plan (it wraps round), with the
        plan's OMP_NUM_THREADS before it: likwid-pin sets an unset OMP_NUM_THREADS to its list's
        length, so `likwid-pin -c 0` would start one OpenMP thread of a four-thread plan."""
        skip = f" -s {self.skip_mask:#x}" if self.skip_mask else ""
        cpus = self.likwid_cpus()
        threads = f"OMP_NUM_THREADS={len(self.slots)} " if len(cpus) < len(self.slots) else ""
        return f"{threads}likwid-pin -c {','.join(map(str, cpus))}{skip}"

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

    def job_script_lines(self, threads: int | None = None, hw_threads: int | None = None) -> list[tuple[str, str]]:
        """What to paste into a job script, tool by tool. The other tools only wrap from the start
        of their list, so a plan that repeats from a later slot is written out for ``threads``
        threads (the count the program was traced with) or, without it, withheld with the reason.
        ``hw_threads``: the machine's hardware threads; likwid-pin truncates a longer list."""
        options = (f" --skip {self.skip_mask:#x}" if self.skip_mask else "") + \
            (f" --repeat-from {self.repeat_from}" if self.repeat_from else "")
        # slots of several CPUs are OpenMP places, which --cpus takes too
        cpus = self.cpulist() if self.is_one_cpu_per_slot else f'"{self.omp_places()}"'
        lines = [("pinwise", f"pinwise run --cpus {cpus}{options}")]
        taskset = ("taskset", f"{self.taskset()}   (whole process, no per-thread placement)")
        if self.repeat_from and threads is None:
            withheld = f"(withheld: it starts again from its first CPU, this plan from slot {self.repeat_from})"
            return lines + [(name, withheld) for name in ("likwid-pin", "OpenMP", "GNU OpenMP", "Intel OpenMP")] + [taskset]
        plan = self.expanded(threads) if self.repeat_from else self
        likwid, gomp = plan.likwid_pin(), plan.gomp_line()
        truncated = plan.likwid_truncation(hw_threads)
        if truncated:
            likwid = f"(withheld: {truncated}; use the pinwise line)"
        omp, kmp = plan.omp_line(), plan.kmp_line()
        if not plan.is_one_cpu_per_slot:
            likwid = gomp = "(withheld: it gives each thread one CPU, this plan some threads several; use the OpenMP line)"
        if self.skip_mask:  # the runtimes place their team in order and know no mask
            omp = gomp = kmp = (f"(withheld: an OpenMP runtime places its team's threads in order and takes no skip "
                                f"mask; whether they line up with this plan's (mask {self.skip_mask:#x}) depends on "
                                "which threads the mask skips; use the pinwise or likwid-pin line)")
        lines += [
            ("likwid-pin", likwid),
            ("OpenMP", omp),
            ("GNU OpenMP", gomp),
            ("Intel OpenMP", kmp),
            taskset,
        ]
        if self.repeat_from:
            lines.append(("note", f"the likwid-pin and OpenMP lines are written out for the {threads} threads traced; "
                                  "past them those tools start again from their first CPU"))
        return lines

    def to_json(self) -> str:
        """The mapping file: what ``pinwise map -o`` writes and ``pinwise run --mapping`` reads."""
        import json

        document: dict = {"format": MAPPING_FORMAT, "version": MAPPING_VERSION, "policy": self.policy,
                          "source": self.source, "threads": self.nb_slots}
        if self.is_one_cpu_per_slot:
            document["pus"] = [slot[0] for slot in self.slots]
        else:
            document["slots"] = [sorted(slot) for slot in self.slots]
        document.update(skip_mask=self.skip_mask, repeat_from=self.repeat_from)
        if self.seed is not None:
            document["seed"] = self.seed
        if self.creator is not None:
            document["creator"] = self.creator
        if self.rounds is not None:
            document["rounds"] = {"size": self.rounds.size, "count": self.rounds.count, "threads": self.rounds.threads}
        if self.machine is not None:
            document["machine"] = {"fingerprint": self.machine.fingerprint, "shape": self.machine.shape}
        return json.dumps(document, indent=1)

    @classmethod
    def from_json(cls, text: str, source: str = "mapping file") -> Plan:
        """Read :meth:`to_json`'s output, or a version 1 file (``pus`` and the policy only, no
        machine: it runs wherever its CPUs exist)."""
        from .files import read_document

        document = read_document(text, source, MAPPING_FORMAT, "a pinwise mapping file", newest=MAPPING_VERSION)

        def field(name, kind, default=None):
            value = document.get(name, default)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise PinwiseError(f"{source}: \"{name}\" has the wrong type ({type(value).__name__})")
            return value

        def cpu(value) -> int:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PinwiseError(f"{source}: {value!r} is not a CPU number")
            return value

        if isinstance(document.get("slots"), list) and document["slots"]:
            if not all(isinstance(slot, list) and slot for slot in document["slots"]):
                raise PinwiseError(f"{source}: \"slots\" must be a list of non-empty CPU lists")
            slots = tuple(tuple(cpu(c) for c in slot) for slot in document["slots"])
        elif isinstance(document.get("pus"), list) and document["pus"]:
            slots = tuple((cpu(c),) for c in document["pus"])
        else:
            raise PinwiseError(f"{source}: \"pus\" must be a non-empty list of CPU numbers")
        if len(slots) > MAX_SLOTS:  # a plan for more threads than any machine runs: a damaged or foreign file
            raise PinwiseError(f"{source} places {len(slots):,} threads, more than the {MAX_SLOTS:,} pinwise plans for")
        threads = field("threads", int)
        if threads is not None and threads != len(slots):
            raise PinwiseError(f"{source}: \"threads\" says {threads} but the file places {len(slots)}")
        rounds = field("rounds", dict)
        machine = field("machine", dict)
        try:
            rounds = Rounds(int(rounds["size"]), int(rounds["count"]), int(rounds.get("threads", 0))) if rounds else None
            machine = Machine(str(machine["fingerprint"]), str(machine["shape"])) if machine else None
        except (KeyError, TypeError, ValueError):
            raise PinwiseError(f"{source}: \"rounds\" or \"machine\" is incomplete") from None
        policy = field("policy", str)
        repeat_from = field("repeat_from", int)
        if repeat_from is None:  # version 1 kept only the rounds; they imply the repeat rule
            repeat_from = 1 if rounds is not None and len(slots) > 1 else 0
        described = field("source", str) or (f"policy {policy}" if policy else "")
        return cls(slots, field("skip_mask", int, 0), f"mapping {source}" + (f" ({described})" if described else ""),
                   repeat_from, policy, field("seed", int), field("creator", str), rounds, machine)


def parse_skip_mask(text: str | None) -> int:
    """likwid-pin's skip mask: a hex number (0x prefix optional), one bit per created thread."""
    if text is None:
        return 0
    value = hex_number(text, "skip mask")
    if value >= 1 << MAX_SKIP_BITS:
        raise PinwiseError(f"skip mask {text!r} is beyond {MAX_SKIP_BITS} bits (one bit per created thread)")
    return value


def read_plan(path) -> Plan:
    """A mapping file written by ``pinwise map -o`` (or :meth:`Plan.to_json`)."""
    from .files import read_input

    return Plan.from_json(read_input(path, "mapping file"), str(path))
