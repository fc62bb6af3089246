"""`pinwise simulate`: judge placements on a machine one does not have, by trace-driven cache
simulation.

The program runs once under pinwise's second Valgrind tool (native/valgrind/ps_main.c, where the
model is described), which feeds every data access to K models of the target topology, one per
placement, in the same pass. This module writes the machine's description for the tool, runs it,
and reads back per placement: accesses and misses per cache level, invalidations, cache-to-cache
transfers by distance, local and remote DRAM accesses, and estimated cycles per thread.

Bandwidth (ps_main.c has the model): every cache instance above L1 and every NUMA node's memory
controller moves at most a number of bytes per cycle (:data:`pinwise.simmachine.DEFAULT_BANDWIDTH`, the
papers' machines' own memory figures in its PRESET_DRAM_BANDWIDTH, ``--bandwidth`` overrides); over
each chunk of interleaved accesses a resource's utilisation makes each line through it wait as in
an M/D/1 queue, and the waits join the cycles. Sequential streams are prefetched (their lines
cost the L2's latency but still cross the memory controller), so a streaming program is bound by
bandwidth, not latency.

What the model leaves out (docs/simulate.md says it too): instruction fetches and everything but data
accesses; out-of-order overlap of misses other than prefetched streams; a thread's cycles are its
memory cycles. Threads run one at a time under Valgrind; the tool buffers their accesses and
interleaves them in turns of ``quantum`` accesses per thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cpulist import format_cpulist
from .errors import PinwiseError
from .pinning.launcher import find_program
from .plan import Plan
from .processes import how_it_ended, run_in_group
from .simmachine import MachineModel, default_bandwidth, machine_model, memory_side_notes, uneven_bandwidth_notes
from .temporary import temporary_folder
from .topology import Topology

#: Cycles, from published figures for Intel Skylake-SP (Intel's optimization manual, 7-cpu.com):
#: hits by level; a transfer between two cores by the lowest level they share ("L2", "L3"), in one
#: package without a shared cache ("package"), and between packages ("machine"); DRAM.
DEFAULT_LATENCY = {"L1d": 4, "L2": 14, "L3": 50, "transfer-L2": 30, "transfer-L3": 80, "transfer-package": 110,
                   "transfer-machine": 300, "dram-local": 200, "dram-remote": 320}


def placement_notes(placements: list[tuple[str, Plan]]) -> list[str]:
    """What the simulator does with a placement that it cannot take as given: it runs each thread
    on one PU, so a slot of several CPUs is simulated on its lowest (said); a skip mask (threads
    that may run on any CPU of the plan) has no PU to give them, and is refused."""
    notes = []
    for name, plan in placements:
        if plan.skip_mask:
            raise PinwiseError(f"placement {name} has a skip mask ({plan.skip_mask:#x}): its skipped threads may run "
                               "on any CPU of the plan, and the simulator runs each thread on one PU: give it without "
                               "the mask")
        wide = [(k, slot) for k, slot in enumerate(plan.slots) if len(slot) > 1]
        if wide:
            shown = ", ".join(f"slot {k} {format_cpulist(sorted(slot))} as {min(slot)}" for k, slot in wide[:4])
            notes.append(f"{name}: the simulator runs a thread on one PU, so a slot of several CPUs ran on its lowest "
                         f"({shown}{', ...' if len(wide) > 4 else ''})")
    return notes


def _settings(text: str | None, option: str, unit: str, names) -> list[tuple[str, str, str]]:
    """``NAME=VALUE,...`` of ``option`` as (item, name, value): each name one of ``names``, once.
    None (the option not given) is none; given, it may not be empty."""
    if text is None:
        return []
    if not text.strip():
        raise PinwiseError(f"{option} is empty: give NAME={unit},... or leave it out for the defaults")
    found, seen = [], set()
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise PinwiseError(f"{option} {item.strip()!r}: write NAME={unit} with NAME one of {', '.join(names)}")
        if name in seen:
            raise PinwiseError(f"{option} {text.strip()!r} sets {name} twice: which one is meant?")
        seen.add(name)
        found.append((item.strip(), name, value.strip()))
    return found


def parse_latencies(text: str | None) -> dict[str, int]:
    """``L1d=4,dram-remote=350,...`` over the defaults; names as DEFAULT_LATENCY has them."""
    latency = dict(DEFAULT_LATENCY)
    for item, name, value in _settings(text, "--latency", "CYCLES", latency):
        try:
            cycles = int(value)
        except ValueError:
            cycles = -1
        if not 0 <= cycles <= 1 << 20:
            raise PinwiseError(f"--latency {item!r}: cycles must be a whole number from 0 to {1 << 20}")
        latency[name] = cycles
    return latency


#: The least bandwidth the simulator can take, in bytes per cycle: it counts bytes per thousand
#: cycles, and less than one would be read as 0, which is no limit at all.
MIN_BANDWIDTH = 0.001


def parse_bandwidth(text: str | None, defaults: dict[str, float]) -> dict[str, float]:
    """``L3=64,dram=10.7`` (bytes per cycle, per instance; 0: no limit) over ``defaults``."""
    bandwidth = dict(defaults)
    for item, name, value in _settings(text, "--bandwidth", "BYTES_PER_CYCLE", bandwidth):
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not (number == 0 or MIN_BANDWIDTH <= number <= 1e6):  # NaN fails both
            raise PinwiseError(f"--bandwidth {item!r}: bytes per cycle must be 0 (no limit) or a number "
                               f"from {MIN_BANDWIDTH:g} to 1000000")
        bandwidth[name] = number
    return bandwidth


def config_text(machine: MachineModel, plans: list[Plan], latency: dict[str, int],
                bandwidth: dict[str, float] | None = None, prefetch: bool = True) -> str:
    """The machine and placements in the tool's --ps-config format (see ps_main.c)."""
    position = {pu: i for i, pu in enumerate(machine.pus)}
    out = ["pinwise-sim-config 1", f"pus {len(machine.pus)}", f"levels {len(machine.levels)}"]
    for level in machine.levels:
        out.append(f"level {level.size} {level.line} {level.ways} {latency.get(level.name, 0)} {level.instances} "
                   + " ".join(map(str, level.instance_of_pu)))
    out.append(f"nodes {max(machine.node_of_pu) + 1} " + " ".join(map(str, machine.node_of_pu)))
    out.append(f"classes {len(machine.classes)} "
               + " ".join(str(latency[f"transfer-{name}"]) for name in machine.classes))
    out.append(" ".join(str(c) for row in machine.class_of_pair for c in row))
    out.append(f"dram {latency['dram-local']} {latency['dram-remote']}")
    bandwidth = bandwidth or {}
    out.append("bandwidth " + " ".join(str(round(bandwidth.get(level.name, 0.0) * 1000)) for level in machine.levels)
               + f" {round(bandwidth.get('dram', 0.0) * 1000)}")  # bytes per thousand cycles
    out.append(f"prefetch {1 if prefetch else 0}")
    out.append(f"placements {len(plans)}")
    for plan in plans:
        slots = [position[min(slot)] for slot in plan.slots]
        out.append(f"placement {plan.repeat_from} {len(slots)} " + " ".join(map(str, slots)))
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class LevelCounts:
    """One cache level's accesses and misses under one placement."""

    accesses: int
    misses: int


@dataclass(frozen=True)
class DramCounts:
    """The DRAM accesses under one placement, to the thread's own NUMA node and to another's."""

    local: int
    remote: int

    @property
    def total(self) -> int:
        return self.local + self.remote


@dataclass
class PlacementResult:
    policy: str
    cpus: list[int]
    levels: dict[str, LevelCounts]   # per cache level of the topology, by its name (L1d, L2, ...)
    invalidations: int
    transfers: dict[str, int]        # cache-to-cache transfers per sharing class (the level two PUs share)
    dram: DramCounts
    cycles_per_thread: list[int]
    thread_pus: list[int] = field(default_factory=list)  # the PU of each thread (empty: one each)
    queue_per_thread: list[int] = field(default_factory=list)  # cycles waited on bandwidth (in the cycles)
    memory_bytes: list[int] = field(default_factory=list)  # per NUMA node, what its controller moved
    busiest: float = 0.0   # the highest utilisation of a cache's or controller's bandwidth over a chunk

    @property
    def cycles(self) -> int:
        return sum(self.cycles_per_thread)

    @property
    def critical_path(self) -> int:
        """The busiest PU's cycles: what the run takes if the threads run in parallel and those
        placed on one PU take turns (with a PU each, the slowest thread's)."""
        if not self.thread_pus:
            return max(self.cycles_per_thread, default=0)
        busy: dict[int, int] = {}
        for pu, cycles in zip(self.thread_pus, self.cycles_per_thread):
            busy[pu] = busy.get(pu, 0) + cycles
        return max(busy.values(), default=0)


@dataclass
class Simulation:
    topology: str
    quantum: int
    inclusive: bool
    latency: dict[str, int]
    threads: int
    accesses_per_thread: list[int]
    placements: list[PlacementResult]
    notes: list[str] = field(default_factory=list)
    program: str = ""
    cache_groups: int = 0   # how many simulated the caches apart (placements sharing their L1s alike share a group)
    bandwidth: dict[str, float] = field(default_factory=dict)  # bytes per cycle (see simmachine.DEFAULT_BANDWIDTH)
    prefetch: bool = True
    exit_status: int = 0   # the program's, as subprocess gives it (negative: the signal that killed it)

    def to_document(self) -> dict:
        return {
            "program": self.program, "topology": self.topology, "quantum": self.quantum, "inclusive": self.inclusive, "latency": self.latency,
            "bandwidth": self.bandwidth, "prefetch": self.prefetch, "exit_status": self.exit_status, "threads": self.threads, "accesses_per_thread": self.accesses_per_thread, "notes": self.notes,
            "placements": [{"policy": p.policy, "cpus": p.cpus, "levels": {n: asdict(c) for n, c in p.levels.items()},
                            "invalidations": p.invalidations, "transfers": p.transfers, "dram": asdict(p.dram),
                            "cycles": p.cycles,
                            "critical_path": p.critical_path, "cycles_per_thread": p.cycles_per_thread,
                            "thread_pus": p.thread_pus, "queue_per_thread": p.queue_per_thread,
                            "memory_bytes": p.memory_bytes, "busiest": p.busiest}
                           for p in self.placements],
        }


def parse_result(text: str, machine: MachineModel, names: list[str], plans: list[Plan]) -> tuple[int, list[int], list[PlacementResult]]:
    lines = iter(text.splitlines())
    try:
        if next(lines).split() != ["pinwise-sim", "1"]:
            raise ValueError("not a pinwise-sim result")
        threads = int(next(lines).split()[1])
        accesses = [int(v) for v in next(lines).split()[1:]]
        models = int(next(lines).split()[1])
        results = []
        for k in range(models):
            next(lines)
            levels = {}
            for level in machine.levels:
                _, _, acc, miss = next(lines).split()
                levels[level.name] = LevelCounts(int(acc), int(miss))
            invalidations = int(next(lines).split()[1])
            transfers = dict(zip(machine.classes, (int(v) for v in next(lines).split()[1:])))
            _, local, remote = next(lines).split()
            cycles = [int(v) for v in next(lines).split()[1:]]
            queue = [int(v) for v in next(lines).split()[1:]]
            memory = [int(v) for v in next(lines).split()[1:]]
            busiest = int(next(lines).split()[1]) / 1e6
            results.append(PlacementResult(names[k], [min(s) for s in plans[k].slots], levels, invalidations, transfers,
                                           DramCounts(int(local), int(remote)), cycles,
                                           [min(plans[k].cpus_for_slot(t)) for t in range(len(cycles))],
                                           queue, memory, busiest))
    except (StopIteration, ValueError, IndexError) as err:
        raise PinwiseError(f"the simulator's result cannot be read ({err})") from None
    return threads, accesses, results


def simulate(argv: list[str], topology: Topology, placements: list[tuple[str, Plan]], *, quantum: int = 1,
             inclusive: bool = True, latency: dict[str, int] | None = None, progress: bool | None = None,
             stdout=None, check_groups: bool = False, workers: int | None = None,
             check_workers: bool = False, bandwidth: dict[str, float] | str | None = None,
             prefetch: bool = True, split: int | None = None) -> Simulation:
    """Run ``argv`` once under the simulator with every placement (name, Plan) on ``topology``;
    ``stdout`` is where the program's output goes (default: pinwise's). ``check_groups``: the
    tool also simulates every placement alone and the counts must agree with the grouped ones
    (a self-test of the sharing between placements, see ps_main.c). ``workers``: processes that
    simulate while the program runs, each some of the groups of placements (default: 4, or none
    where pinwise may use a single CPU; 0: none, Valgrind's process simulates); the counts are the same either way,
    and ``check_workers`` makes Valgrind's process simulate every group as well and raises if
    the workers' counts differ from its own (a self-test). ``bandwidth``: bytes per cycle per level
    and ``dram`` (:func:`default_bandwidth` for the topology, which a dict or a ``--bandwidth``
    string overrides); ``prefetch``: sequential streams are prefetched. ``split``: groups of
    placements that share their L1s alike are split until there are that many (default: as many as
    the workers and the CPUs pinwise may use; 0: never), each part simulating the shared levels
    again so that every worker has some (ps_main.c's split_groups); the counts are the same."""
    from .trace import SIM_TOOL, check_tracer, tool_environment

    if not placements:
        raise PinwiseError("nothing to simulate: give --policies and/or --placement")
    most = 32 if check_groups else 64
    if len(placements) > most:
        raise PinwiseError(f"{len(placements)} placements: the simulator takes {most} at most in one pass")
    if quantum < 0:
        raise PinwiseError(f"--quantum must be 0 or more, not {quantum}")
    if workers is None:
        # 4 even on 2 CPUs: the groups cost unlike amounts, and more, smaller shares let the kernel
        # keep both CPUs busy to the end (8 placements on x7550, 2 CPUs: 4 workers took 7-15% less
        # time than 2); on one CPU, workers only add their hand-overs
        workers = 4 if len(os.sched_getaffinity(0)) > 1 else 0
    if not 0 <= workers <= 4:
        raise PinwiseError(f"--workers must be between 0 and 4, not {workers}")
    valgrind = check_tracer()
    if not SIM_TOOL.exists():
        raise PinwiseError("pinwise was built without its cache simulator (Valgrind's tool-building files were "
                           "missing): install them and reinstall pinwise")
    program = find_program(argv)
    latency = latency or dict(DEFAULT_LATENCY)
    machine = machine_model(topology)
    defaults = default_bandwidth(topology, machine)
    if not isinstance(bandwidth, dict):
        bandwidth = parse_bandwidth(bandwidth, defaults)
    names = [name for name, _ in placements]
    plans = [plan for _, plan in placements]
    notes = [f"{level.name}: {level.note}" for level in machine.levels if level.note]
    notes += memory_side_notes(topology)
    if bandwidth.get("L3") == defaults.get("L3"):  # the default, not the user's
        notes += uneven_bandwidth_notes(machine, bandwidth)
    notes += placement_notes(placements)
    with temporary_folder("simulate") as tmp:
        config, out = Path(tmp, "machine.txt"), Path(tmp, "result.txt")
        config.write_text(config_text(machine, plans, latency, bandwidth, prefetch), encoding="utf-8")
        env = tool_environment(Path(tmp))
        command = [valgrind, "--tool=pwsim", "-q", "--vgdb=no", "--fair-sched=yes", "--max-threads=4096",
                   f"--ps-config={config}", f"--ps-out={out}", f"--ps-quantum={quantum}",
                   f"--ps-inclusive={'yes' if inclusive else 'no'}", f"--ps-workers={workers}",
                   # as many groups as CPUs to simulate them: placements sharing one grouping of
                   # L1s are split (each part simulates the L1s again) rather than left to one worker
                   f"--ps-split={min(workers, len(os.sched_getaffinity(0))) if split is None else split}",
                   *(["--ps-check-groups=yes"] if check_groups else []),
                   *(["--ps-check-workers=yes"] if check_workers else []), program, *argv[1:]]
        show = sys.stderr.isatty() if progress is None else progress
        if show:
            print(f"simulating {len(plans)} placement{'s' if len(plans) > 1 else ''} of {' '.join(argv)} on "
                  f"{topology.source or 'the topology'} under Valgrind ...", file=sys.stderr)
        returncode = run_in_group(command, "Valgrind", env=env, stdin=subprocess.DEVNULL, stdout=stdout)
        if not out.exists():
            raise PinwiseError(f"{argv[0]} ended with status {returncode} before the simulator wrote anything")
        text = out.read_text(encoding="utf-8", errors="replace")
        threads, accesses, results = parse_result(text, machine, names, plans)
    trailer = dict(line.split() for line in text.splitlines()
                   if line.startswith(("groups ", "check ", "workers-check ")))
    if check_groups and trailer.get("check") != "0":
        raise PinwiseError(f"the simulator's self-check failed: {trailer.get('check', 'no')} placements counted "
                           "differently grouped and alone")
    if check_workers and workers and trailer.get("workers-check") != "0":
        raise PinwiseError(f"the simulator's self-check failed: {trailer.get('workers-check', 'no')} placements "
                           "counted differently by the workers and by one process")
    if returncode != 0:
        notes.append(f"the program {how_it_ended(returncode)}: the counts cover its run up to there")
    return Simulation(topology.source or "topology", quantum, inclusive, latency, threads, accesses, results, notes,
                      " ".join(argv), int(trailer.get("groups", 0)), bandwidth, prefetch, returncode)


def read_simulation(path: str) -> Simulation:
    """A simulation written by ``pinwise simulate -o FILE`` (or ``--json``), read back."""
    from .files import read_input

    text = read_input(path, "simulation file")
    try:
        document = json.loads(text)
        placements = [PlacementResult(p["policy"], [int(c) for c in p["cpus"]],
                                      {name: LevelCounts(int(v["accesses"]), int(v["misses"]))
                                       for name, v in p["levels"].items()},
                                      int(p["invalidations"]), {k: int(v) for k, v in p["transfers"].items()},
                                      DramCounts(int(p["dram"]["local"]), int(p["dram"]["remote"])),
                                      [int(c) for c in p["cycles_per_thread"]],
                                      [int(c) for c in p.get("thread_pus", [])],
                                      [int(c) for c in p.get("queue_per_thread", [])],
                                      [int(b) for b in p.get("memory_bytes", [])], float(p.get("busiest", 0.0)))
                      for p in document["placements"]]
        if not placements:
            raise ValueError("no placement")
        if len({tuple(p.levels) for p in placements}) > 1:  # one machine: every placement counts the same caches
            raise ValueError("its placements count different cache levels: "
                             + " and ".join(sorted({"/".join(p.levels) for p in placements})))
        if any(p.thread_pus and len(p.thread_pus) != len(p.cycles_per_thread) for p in placements):
            raise ValueError("thread_pus and cycles_per_thread differ in length")
        return Simulation(str(document["topology"]), int(document["quantum"]), bool(document["inclusive"]),
                          dict(document["latency"]), int(document["threads"]),
                          [int(a) for a in document["accesses_per_thread"]], placements,
                          [str(n) for n in document.get("notes", [])], str(document.get("program", "")), 0,
                          {str(k): float(v) for k, v in document.get("bandwidth", {}).items()},
                          bool(document.get("prefetch", False)), int(document.get("exit_status", 0)))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise PinwiseError(f"{path!r} is not a simulation written by pinwise simulate ({err})") from None


def write_json(simulation: Simulation, path: str | None) -> None:
    text = json.dumps(simulation.to_document(), indent=2) + "\n"
    if path is None or path == "-":
        sys.stdout.write(text)
    else:
        from .files import write_text_atomic

        write_text_atomic(path, text)
