"""Turning what a user writes into a Plan: CPU lists, likwid-pin expressions, OpenMP names,
application-independent policies and mapping files.

All of them end as an ordered list of CPUs, one slot per thread, checked against the topology and
the CPUs this process may use before anything runs.
"""

from __future__ import annotations

import json
import random as random_module
from pathlib import Path

from ..cpulist import parse_cpulist
from ..errors import PinwiseError
from ..files import read_input
from ..topology import Topology
from . import likwid
from .plan import Plan, parse_skip_mask

#: Policies that need no knowledge of the program (Mazouz et al. 3.1) and OpenMP's names.
SIMPLE_POLICIES = ("os", "random", "compact", "scatter", "close", "spread", "primary", "master")
MAPPING_FORMAT = "pinwise-mapping"


def simple_policy_order(name: str, topology: Topology, threads: int, seed: int | None = None) -> list[int]:
    """The CPU of each of ``threads`` threads under an application-independent policy.

    compact: depth-first PU order (KMP compact); scatter: reversed-coordinate order (KMP scatter);
    random: a new permutation of the allowed PUs for each seed; close/spread/primary: OpenMP's
    proc_bind policies over one place per allowed PU (OpenMP 5.2, 10.1.3).
    """
    places = topology.compact_order()
    count = len(places)
    if name == "compact":
        order = places
    elif name == "scatter":
        order = topology.scatter_order()
    elif name == "random":
        order = list(places)
        random_module.Random(seed).shuffle(order)
    elif name == "close":
        return [places[i % count] if threads <= count else places[i * count // threads] for i in range(threads)]
    elif name == "spread":
        return [places[i * count // threads] for i in range(threads)]
    elif name in ("primary", "master"):
        return [places[0]] * threads
    else:
        raise PinwiseError(f"unknown policy {name!r}")
    return [order[i % count] for i in range(threads)]


def read_mapping(path: str | Path) -> dict:
    """A mapping file written by ``pinwise map``: JSON with "format": "pinwise-mapping" and
    "pus", the PU OS index of each thread in creation order."""
    try:
        document = json.loads(read_input(path, "mapping file"))
    except json.JSONDecodeError as err:
        raise PinwiseError(f"mapping file {str(path)!r} is not valid JSON ({err})") from None
    if not isinstance(document, dict) or document.get("format") != MAPPING_FORMAT:
        raise PinwiseError(f"{path} is not a pinwise mapping file (expected \"format\": \"{MAPPING_FORMAT}\")")
    pus = document.get("pus")
    if not isinstance(pus, list) or not pus or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pus):
        raise PinwiseError(f"mapping file {path}: \"pus\" must be a non-empty list of CPU numbers")
    return document


def resolve_plan(topology: Topology, *, cpus: str | None = None, expr: str | None = None,
                 policy: str | None = None, mapping: str | None = None, threads: int | None = None,
                 skip: str | None = None, seed: int | None = None) -> Plan | None:
    """Build and validate the plan; None means "do not pin" (policy ``os``)."""
    given = [name for name, value in (("--cpus", cpus), ("--expr", expr), ("--policy", policy),
                                       ("--mapping", mapping)) if value is not None]
    if len(given) > 1:
        raise PinwiseError(f"give only one placement, not {' and '.join(given)}")
    if not given:
        raise PinwiseError("no placement given: use --cpus LIST, --expr EXPR, --policy NAME or --mapping FILE")
    if threads is not None and threads < 1:
        raise PinwiseError(f"-n/--threads must be at least 1, not {threads}")
    skip_mask = parse_skip_mask(skip)
    details: dict = {}
    if cpus is not None:
        order = parse_cpulist(cpus)
        source = f"--cpus {cpus}"
    elif expr is not None:
        order = likwid.evaluate(expr, topology)
        source = f"likwid expression {expr}"
    elif mapping is not None:
        document = read_mapping(mapping)
        order = document["pus"]
        source = f"mapping {mapping}" + (f" (policy {document['policy']})" if document.get("policy") else "")
        if isinstance(document.get("rounds"), dict):  # workers created in rounds: one round, repeated
            details["rounds"] = document["rounds"]
    else:
        name = policy.strip().lower()
        if name == "os":
            return None
        if name not in SIMPLE_POLICIES:
            raise PinwiseError(
                f"unknown policy {policy!r}: choose one of {', '.join(SIMPLE_POLICIES)}, or compute a "
                "mapping file with 'pinwise map' and pass it with --mapping"
            )
        count = threads or len(topology.allowed)
        if name == "random":
            seed = seed if seed is not None else random_module.SystemRandom().randrange(1 << 31)
            details["seed"] = seed
        order = simple_policy_order(name, topology, count, seed)
        source = f"policy {name}" + (f" (seed {seed})" if name == "random" else "")
    if not order:
        raise PinwiseError("empty plan: the placement selects no CPU")
    if threads is not None and policy is None:  # policies already made exactly `threads` slots
        order = [order[i % len(order)] for i in range(threads)]
    plan = Plan(tuple((cpu,) for cpu in order), skip_mask, source, details,
                repeat_from=1 if "rounds" in details and len(order) > 1 else 0)
    plan.validate(topology)
    return plan
