"""Capability 5: mapping threads to PUs with the policies of the papers, and scoring mappings.

:func:`compute_mapping` turns a matrix, a topology and a policy of the registry
(:mod:`pinwise.policies`) into a :class:`~pinwise.plan.Plan`; nothing here reads the live
machine. ``pinwise map -o`` writes the plan as a mapping file, which ``pinwise run --mapping`` reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import policies
from ..policies import CREATOR_AUTO, CREATOR_MODES, simple_plan
from ..comm import CommMatrix
from ..rounds import find_rounds, fold_rounds
from ..errors import PinwiseError
from ..plan import Machine, Plan, Rounds
from ..topology import Topology
from .cost import CostReport, mapping_cost
from .even import evenly


def _matrix(comm) -> np.ndarray:
    if isinstance(comm, CommMatrix):
        return comm.matrix
    return comm if hasattr(comm, "shape") else np.asarray(comm, dtype=np.float64)  # a list of rows too


#: A creator thread that executes less than this share of an average worker's instructions
#: mostly waits (it creates the workers and joins them).
IDLE_CREATOR_SHARE = 0.10


def idle_creator(comm) -> bool:
    """Whether thread 0, which creates the others in a pthreads program, is idle by the trace's
    instruction counts: those executed while another thread was alive where the trace has them
    (the program's start-up, the loader's work among it, is not the creator competing with its
    workers), all of them otherwise. False when the matrix carries none, e.g. a CSV file."""
    if not isinstance(comm, CommMatrix):
        return False
    together = comm.info.instructions_together
    instructions = np.array(together, dtype=np.float64) if together is not None else comm.instructions
    if instructions is None or len(instructions) < 3 or len(instructions) != comm.threads:
        return False
    workers = float(np.mean(instructions[1:]))
    return workers > 0 and float(instructions[0]) < IDLE_CREATOR_SHARE * workers


def by_role(comm):
    """A traced matrix whose workers were created in rounds, folded to one thread per role
    (:func:`pinwise.rounds.fold_rounds`); anything else as it is."""
    if isinstance(comm, CommMatrix):
        rounds = find_rounds(comm)
        if rounds is not None:
            return fold_rounds(comm, rounds)
    return comm


def traced_rounds(comm) -> Rounds | None:
    """The rounds a folded matrix stands for (see :func:`by_role`), if any."""
    return comm.info.rounds if isinstance(comm, CommMatrix) else None


def as_comm(comm) -> CommMatrix:
    """``comm`` (a CommMatrix, an array or a scipy sparse matrix) as the CommMatrix the mapping
    reads (its rounds folded by role, :func:`by_role`)."""
    comm = by_role(comm)
    return comm if isinstance(comm, CommMatrix) else CommMatrix.from_array(_matrix(comm))


def check_threads(threads: int | None, count: int) -> None:
    """Refuse an expected thread count (--threads) that is not the matrix's ``count``."""
    if threads is not None and threads != count:
        raise PinwiseError(f"--threads {threads} does not match the matrix, which has {count} threads")


def compute_mapping(policy: str, comm, topology: Topology, seed: int | None = None,
                    threads: int | None = None, creator: str = CREATOR_AUTO, source: str | None = None) -> Plan | None:
    """Map the threads of ``comm`` (a CommMatrix, an array or a scipy sparse matrix) onto the
    allowed PUs of ``topology`` with ``policy``, a registry name; None for ``os``, which places
    nothing. ``auto`` is decided above this stage, from the matrix's analysis
    (:func:`pinwise.placement.matrix_plan`, which ``pinwise.map`` calls). ``source``: what the
    plan says it came from (default: the policy).

    ``creator`` says where a communication-aware policy puts thread 0, the thread that creates
    the others: ``"policy"`` maps it like any thread (the papers); ``"last"`` maps only the
    workers and puts the creator beside the last thread it creates, where it delays no creation
    (pinned beside the first group, it competes with the first worker it starts and holds back
    the creation of all the others); ``"auto"`` is ``"last"`` when the trace shows the creator
    idle (:func:`idle_creator`) and ``"policy"`` otherwise.
    """
    if creator not in CREATOR_MODES:
        raise PinwiseError(f"creator placement {creator!r}: choose one of {', '.join(CREATOR_MODES)}")
    if not isinstance(topology, Topology):  # a name, file or synthetic string, as --topology takes it
        from ..topology import load_topology

        topology = load_topology(topology)
    comm = by_role(comm)
    if policy.strip().lower() == policies.AUTO:
        raise PinwiseError("policy auto is decided from the matrix's analysis, above the mapping: call "
                           "pinwise.map(comm) or pinwise.placement.matrix_plan('auto', comm, topology)")
    entry = policies.lookup(policy)
    matrix = _matrix(comm)
    count = matrix.shape[0]
    check_threads(threads, count)
    if not entry.pins:
        return None
    rounds = traced_rounds(comm)
    fields = {"rounds": rounds, "repeat_from": 1 if rounds is not None and count > 1 else 0}
    if source:
        fields["source"] = source
    if not entry.needs_matrix:
        return simple_plan(entry, topology, count, seed, **fields)
    kernel = entry.load_kernel()
    if creator == CREATOR_AUTO:
        creator = "last" if idle_creator(comm) else "policy"
    if creator == "last" and count >= 3:
        workers = evenly(kernel, matrix[1:, 1:], topology, count - 1)
        pus = [workers[-1], *workers]
        fields["creator"] = "beside the last thread it creates"
    else:
        pus = evenly(kernel, matrix, topology, count)
    return Plan.from_cpus(pus, **{"source": f"policy {entry.name}", **fields, "policy": entry.name,
                                  "machine": Machine.of(topology)})


@dataclass(frozen=True)
class Comparison:
    policy: str
    plan: Plan | None
    cost: CostReport | None
    seconds: float


def compare(comm, topology: Topology, names: list[str] | None = None, seed: int = 1,
            creator: str = CREATOR_AUTO) -> list[Comparison]:
    """Every policy's mapping with its cost, for ``pinwise map --compare``: the same mappings as
    ``pinwise map --policy`` gives (creator rule and rounds included), scored on the matrix they
    were computed from."""
    rows = []
    comm = by_role(comm)
    matrix = _matrix(comm)
    for name in names or policies.names():
        start = time.perf_counter()
        plan = compute_mapping(name, comm, topology, seed=seed, creator=creator)
        seconds = time.perf_counter() - start
        cost = mapping_cost(matrix, topology, plan.pus) if plan is not None else None
        rows.append(Comparison(name, plan, cost, seconds))
    return rows


__all__ = ["Comparison", "CostReport", "by_role", "compare", "compute_mapping", "idle_creator", "mapping_cost",
           "traced_rounds"]
