"""The placements an experiment compares: policies by name, NAME=SPEC placements and ``adapt``,
each resolved once to its plan (:func:`pinwise.placement.resolve`), and those that are one
placement found so that it runs once."""

from __future__ import annotations

from dataclasses import dataclass

from .. import policies
from ..errors import PinwiseError
from ..placement import Placement, resolve
from ..plan import Plan
from ..topology import Topology
from ..topology.symmetry import placement_form
from ..vocabulary import ADAPT


@dataclass(frozen=True)
class Candidate:
    """One placement under test: a policy name or a user's NAME=SPEC placement."""

    name: str
    plan: Plan | None            # None: the OS places the threads (or, with adapt, pinwise as they run)
    random_threads: int = 0      # > 0: the `random` policy, drawn anew for every run
    adapt: bool = False          # placed while it runs (pinwise.adapt), anew in every run

    def plan_for_run(self, topology: Topology, seed: int) -> Plan | None:
        if not self.random_threads:
            return self.plan
        return resolve(Placement(policy=policies.RANDOM, threads=self.random_threads, seed=seed), topology)


def build_candidates(names: list[str], placements: list[str], topology: Topology, threads: int | None,
                     comm=None) -> list[Candidate]:
    """Policies by name (those that read the matrix need ``comm``) and NAME=SPEC placements, where
    SPEC is a CPU list, a likwid-pin expression, a policy or a mapping file; all through
    :func:`pinwise.placement.resolve`."""
    candidates: list[Candidate] = []
    for name in names:
        name = name.strip().lower()
        if not name:
            continue
        if name == ADAPT:
            candidates.append(Candidate(ADAPT, None, adapt=True))
            continue
        if name != policies.AUTO:  # bench has no --mapping: its own placements go in --placement
            name = policies.lookup(name, f"or {ADAPT} (placed while each run runs); your own CPUs or a mapping "
                                         "file go in --placement NAME=SPEC").name
        plan = resolve(Placement(policy=name, threads=threads), topology, comm)
        if name != policies.AUTO and policies.lookup(name).redrawn:
            candidates.append(Candidate(name, None, random_threads=plan.nb_slots))
        else:
            candidates.append(Candidate(name, plan))
    for text in placements:
        label, sep, spec = text.partition("=")
        if not sep or not label.strip() or not spec.strip():
            raise PinwiseError(f"placement {text!r} must look like NAME=CPUS, e.g. together=1,0,0,1 or spread=S:scatter")
        plan = resolve(Placement.parse(spec, any_machine=None), topology)  # bench, simulate: no --any-machine
        candidates.append(Candidate(label.strip(), None if plan is None else plan.replace(source=f"--placement {text}")))
    names = [c.name for c in candidates]
    if not candidates:
        raise PinwiseError("nothing to compare: give --policies and/or --placement")
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise PinwiseError(f"placement names must differ: {', '.join(sorted(duplicates))} appears twice")
    return candidates


def unique_candidates(candidates: list[Candidate], topology: Topology | None = None
                      ) -> tuple[list[Candidate], dict[str, list[str]]]:
    """Candidates that are one placement are run once, under the first one's name; returns them
    and, per kept name, the names it stands for. One placement: the same CPUs for every thread
    (and the same repeat rule and skip mask), or, given ``topology``, CPUs that its symmetry maps
    onto each other (0,1,0 and 1,0,1 on two identical cores: :mod:`pinwise.topology.symmetry`)."""
    unique: list[Candidate] = []
    keys: list[object] = []
    aliases: dict[str, list[str]] = {}
    for candidate in candidates:
        key = _placement_key(candidate, topology)
        same = next((u for u, k in zip(unique, keys) if key is not None and k == key), None)
        if same is None:
            unique.append(candidate)
            keys.append(key)
        else:
            aliases.setdefault(same.name, []).append(candidate.name)
    return unique, aliases


def _placement_key(candidate: Candidate, topology: Topology | None):
    if candidate.plan is None or candidate.random_threads or candidate.adapt:
        return None  # the OS and random placements are never the same as another
    plan = candidate.plan
    slots = placement_form(topology, plan.slots) if topology is not None else plan.slots
    return slots, plan.repeat_from, plan.skip_mask
