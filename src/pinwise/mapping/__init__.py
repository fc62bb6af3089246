"""Capability 5: mapping threads to PUs with the policies of the papers, and scoring mappings.

Every policy is a pure function ``(matrix, topology, options) -> Mapping`` through
:func:`compute_mapping`; nothing here reads the live machine. A mapping file
(``{"format": "pinwise-mapping", ...}``) is what ``pinwise run --mapping`` consumes.
"""

from __future__ import annotations

import json
import random as random_module
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..comm import CommMatrix, find_rounds, fold_rounds
from ..errors import PinwiseError
from ..files import write_text_atomic
from ..pinning.placement import MAPPING_FORMAT, read_mapping, simple_policy_order
from ..pinning.plan import Plan
from ..policies import POLICIES
from ..topology import Topology
from . import grouping, pairing
from .cost import CostReport, mapping_cost
from .tree import SlotTree


#: The policies that read the matrix: (matrix, SlotTree) -> PU of each thread.
_COMM_AWARE = {
    "lp-compact": lambda matrix, tree: pairing.lp(matrix, tree, scatter=False),
    "lp-scatter": lambda matrix, tree: pairing.lp(matrix, tree, scatter=True),
    "gp": pairing.gp,
    "lpgp": pairing.lpgp,
    "gplp": pairing.gplp,
    "locality": grouping.locality,
    "distance": grouping.distance,
    "balance": grouping.balance,
    "balanced-locality": grouping.balanced_locality,
}


@dataclass(frozen=True)
class Mapping:
    """Thread i (creation order, main = 0) runs on PU ``pus[i]``; ``pus`` is None for ``os``."""

    policy: str
    pus: tuple[int, ...] | None
    threads: int
    topology: str
    details: dict = field(default_factory=dict, compare=False)

    def to_plan(self) -> Plan | None:
        """Thread i on ``pus[i]``; for workers created in rounds, the plan starts again at slot 1
        past its end, so every round's worker j gets worker j's PU."""
        if self.pus is None:
            return None
        return Plan(tuple((pu,) for pu in self.pus), 0, f"policy {self.policy}", self.details,
                    repeat_from=1 if "rounds" in self.details else 0)

    def to_json(self) -> str:
        return json.dumps({"format": MAPPING_FORMAT, "version": 1, "policy": self.policy,
                           "threads": self.threads, "topology": self.topology,
                           "pus": list(self.pus) if self.pus is not None else None, **self.details}, indent=1)


def write_mapping(mapping: Mapping, path: str | Path) -> None:
    if mapping.pus is None:
        raise PinwiseError("policy os places nothing, so it has no mapping file: run the program without pinning")
    write_text_atomic(path, mapping.to_json() + "\n")


def load_mapping(path: str | Path) -> Mapping:
    document = read_mapping(path)
    details = {key: document[key] for key in ("rounds", "creator", "seed") if key in document}
    return Mapping(document.get("policy", "?"), tuple(document["pus"]), len(document["pus"]),
                   document.get("topology", ""), details)


def _matrix(comm) -> np.ndarray:
    return comm.matrix if isinstance(comm, CommMatrix) else comm


#: A creator thread that executes less than this share of an average worker's instructions
#: mostly waits (it creates the workers and joins them).
IDLE_CREATOR_SHARE = 0.10
CREATOR_MODES = ("auto", "last", "policy")


def idle_creator(comm) -> bool:
    """Whether thread 0, which creates the others in a pthreads program, is idle by the trace's
    instruction counts: those executed while another thread was alive where the trace has them
    (the program's start-up, the loader's work among it, is not the creator competing with its
    workers), all of them otherwise. False when the matrix carries none, e.g. a CSV file."""
    if not isinstance(comm, CommMatrix):
        return False
    together = comm.metadata.get("instructions_together")
    instructions = np.array(together, dtype=np.float64) if isinstance(together, list) else comm.instructions
    if instructions is None or len(instructions) < 3 or len(instructions) != comm.threads:
        return False
    workers = float(np.mean(instructions[1:]))
    return workers > 0 and float(instructions[0]) < IDLE_CREATOR_SHARE * workers


def by_role(comm):
    """A traced matrix whose workers were created in rounds, folded to one thread per role
    (:func:`pinwise.comm.fold_rounds`); anything else as it is."""
    if isinstance(comm, CommMatrix):
        rounds = find_rounds(comm)
        if rounds is not None:
            return fold_rounds(comm, rounds)
    return comm


def compute_mapping(policy: str, comm, topology: Topology, seed: int | None = None,
                    threads: int | None = None, creator: str = "auto") -> Mapping:
    """Map the threads of ``comm`` (a CommMatrix, an array or a scipy sparse matrix) onto the
    allowed PUs of ``topology`` with ``policy``.

    ``creator`` says where a communication-aware policy puts thread 0, the thread that creates
    the others: ``"policy"`` maps it like any thread (the papers); ``"last"`` maps only the
    workers and puts the creator beside the last thread it creates, where it delays no creation
    (pinned beside the first group, it competes with the first worker it starts and holds back
    the creation of all the others); ``"auto"`` is ``"last"`` when the trace shows the creator
    idle (:func:`idle_creator`) and ``"policy"`` otherwise.
    """
    name = policy.strip().lower()
    if name not in POLICIES:
        raise PinwiseError(f"unknown policy {policy!r}: choose one of {', '.join(POLICIES)}")
    comm = by_role(comm)
    matrix = _matrix(comm)
    count = matrix.shape[0]
    if threads is not None and threads != count:
        raise PinwiseError(f"--threads {threads} does not match the matrix, which has {count} threads")
    if name == "os":
        return Mapping(name, None, count, topology.source)
    tree = SlotTree(topology, count)
    details: dict = {}
    if isinstance(comm, CommMatrix) and "rounds" in comm.metadata:
        details["rounds"] = comm.metadata["rounds"]
    if name in ("random", "compact", "scatter", "close", "spread"):
        if name == "random":
            seed = seed if seed is not None else random_module.SystemRandom().randrange(1 << 31)
            details["seed"] = seed
        pus = simple_policy_order(name, topology, count, seed)
    else:
        if creator not in CREATOR_MODES:
            raise PinwiseError(f"creator placement {creator!r}: choose one of {', '.join(CREATOR_MODES)}")
        if creator == "auto":
            creator = "last" if idle_creator(comm) else "policy"
        if creator == "last" and count >= 3:
            workers = _COMM_AWARE[name](matrix[1:, 1:], SlotTree(topology, count - 1))
            pus = [workers[-1], *workers]
            details["creator"] = "beside the last thread it creates"
        else:
            pus = _COMM_AWARE[name](matrix, tree)
    return Mapping(name, tuple(int(p) for p in pus), count, topology.source, details)


@dataclass
class Comparison:
    mapping: Mapping
    cost: CostReport | None
    seconds: float


def compare(comm, topology: Topology, policies: list[str] | None = None, seed: int = 1,
            creator: str = "auto") -> list[Comparison]:
    """Every policy's mapping with its cost, for ``pinwise map --compare``: the same mappings as
    ``pinwise map --policy`` gives (creator rule and rounds included), scored on the matrix they
    were computed from."""
    rows = []
    comm = by_role(comm)
    matrix = _matrix(comm)
    for name in policies or list(POLICIES):
        start = time.perf_counter()
        mapping = compute_mapping(name, comm, topology, seed=seed, creator=creator)
        seconds = time.perf_counter() - start
        cost = mapping_cost(matrix, topology, mapping.pus) if mapping.pus is not None else None
        rows.append(Comparison(mapping, cost, seconds))
    return rows


__all__ = ["CREATOR_MODES", "Comparison", "CostReport", "Mapping", "POLICIES", "compare", "compute_mapping",
           "idle_creator", "load_mapping", "mapping_cost", "write_mapping"]
