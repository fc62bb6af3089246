"""The one registry of placement policies: every command, the bench, auto and the help text read it.

A policy is either *application independent* (Mazouz et al. 3.1, OpenMP's proc_bind): a pure
function of the topology and the thread count, written here in plain Python; or it *needs the
communication matrix* (Mazouz et al. 3.2, Diener et al. 4): a kernel ``(matrix, SlotTree) -> PU of
each thread`` in :mod:`pinwise.mapping`, imported only when the policy is used, so that listing or
applying the simple policies never loads numpy or scipy.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from .errors import PinwiseError
from .frozen import Frozen
from .plan import Machine, Plan

#: The kernel of a matrix policy: (matrix, SlotTree) -> PU of each thread.
Kernel = Callable[..., list[int]]


class Policy(Frozen):
    """One entry of the registry."""

    name: str
    family: str
    description: str
    #: Application independent: (topology, threads, seed) -> CPU of each thread. None for ``os``
    #: (no pinning) and for the policies that read the matrix.
    order: Callable[..., list[int]] | None = None
    #: "module:function" of the kernel of a policy that reads the matrix.
    kernel: str | None = None
    aliases: tuple[str, ...] = ()
    #: The OS's placement, against which the others are measured (bench, auto, report).
    baseline: bool = False
    #: A new placement for every run of a bench (random), never one plan.
    redrawn: bool = False

    @property
    def needs_matrix(self) -> bool:
        return self.kernel is not None

    @property
    def pins(self) -> bool:
        """False for ``os``, which leaves the threads to the OS."""
        return self.order is not None or self.kernel is not None

    def load_kernel(self) -> Kernel:
        module, _, function = (self.kernel or "").partition(":")
        return getattr(importlib.import_module(module), function)


def draw_seed() -> int:
    """A new seed for the random policy, from the OS's entropy (printed and stored with the plan)."""
    return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF


def _repeat(order: list[int], threads: int) -> list[int]:
    return [order[i % len(order)] for i in range(threads)]


def compact(topology, threads: int, seed: int | None = None) -> list[int]:
    """Depth-first PU order (KMP_AFFINITY=compact), wrapping round past the last PU."""
    return _repeat(topology.compact_order(), threads)


def scatter(topology, threads: int, seed: int | None = None) -> list[int]:
    """PUs dealt round the tree: one per package first (KMP_AFFINITY=scatter; Topology.scatter_order)."""
    return _repeat(topology.scatter_order(), threads)


def random(topology, threads: int, seed: int | None = None) -> list[int]:
    """A permutation of the allowed PUs fixed by ``seed`` (Mazouz et al.'s random mapping)."""
    import random as random_module  # only this policy needs it

    order = topology.compact_order()
    random_module.Random(seed).shuffle(order)
    return _repeat(order, threads)


def omp_close_places(places: int, threads: int) -> list[int]:
    """The place of each OpenMP thread under proc_bind(close), the primary thread on place 0 of
    ``places`` (OpenMP 5.2, 10.1.3), as libgomp applies it: T <= P puts thread i on place i;
    T > P puts T // P threads on each place in turn and the T % P left over one by one on the
    first places again (libgomp, T=3 on 2 places: 0,1,0)."""
    if threads <= places:
        return list(range(threads))
    per_place, rest = divmod(threads, places)
    place, on_place, result = 0, 1, [0]
    for thread in range(1, threads):
        if on_place == per_place:
            place, on_place = (place + 1) % places, 1
            if thread == threads - rest:
                per_place = 1
        else:
            on_place += 1
        result.append(place)
    return result


def omp_spread_places(places: int, threads: int) -> list[int]:
    """The place of each OpenMP thread under proc_bind(spread): T <= P cuts the places into T
    subpartitions, the P % T first ones a place longer, and puts each thread on the first place
    of its own (libgomp, T=3 on 16 places: 0,6,11); T > P is close's distribution."""
    if threads > places:
        return omp_close_places(places, threads)
    size, rest = divmod(places, threads)
    longer_until = (size + 1) * rest
    place, result = 0, [0]
    for _ in range(1, threads):
        place += size + 1 if place < longer_until else size
        result.append(place)
    return result


def close(topology, threads: int, seed: int | None = None) -> list[int]:
    """OpenMP proc_bind(close) over one place per allowed PU (see :func:`omp_close_places`)."""
    places = topology.compact_order()
    return [places[p] for p in omp_close_places(len(places), threads)]


def spread(topology, threads: int, seed: int | None = None) -> list[int]:
    """OpenMP proc_bind(spread) over one place per allowed PU (see :func:`omp_spread_places`)."""
    places = topology.compact_order()
    return [places[p] for p in omp_spread_places(len(places), threads)]


def distrib(topology, threads: int, seed: int | None = None) -> list[int]:
    """hwloc-distrib's answer (``hwloc-distrib --single N``; hwloc_distrib in hwloc/helper.h):
    from the machine down, each object's threads are shared among its children in proportion to
    their allowed PUs, rounding each child's running total up; an object given one thread or
    none left to split keeps them, and a thread is placed on the first PU of its object. A child
    given no thread joins the set of the one before it."""
    sets: list[set[int]] = []

    def share(objects, count: int) -> None:
        weights = [len(obj.cpuset & topology.allowed) for obj in objects]
        total, given_weight = sum(weights), 0
        for obj, weight in zip(objects, weights):
            if not weight:
                continue
            chunk = ((given_weight + weight) * count + total - 1) // total - (given_weight * count + total - 1) // total
            if not obj.children or chunk <= 1:
                if chunk:
                    sets.extend(set(obj.cpuset & topology.allowed) for _ in range(chunk))
                else:
                    sets[-1] |= obj.cpuset & topology.allowed
            else:
                share(obj.children, chunk)
            given_weight += weight

    share([topology.root], threads)
    return [min(cpus) for cpus in sets]


def primary(topology, threads: int, seed: int | None = None) -> list[int]:
    """OpenMP proc_bind(primary): every thread on the primary thread's place."""
    return [topology.compact_order()[0]] * threads


_MAPPING = "pinwise.mapping"

# Every policy's name, spelled here only: the other modules name a policy by these (a test
# greps, tests/test_structure.py).
OS, RANDOM, COMPACT, SCATTER = "os", "random", "compact", "scatter"
CLOSE, SPREAD, PRIMARY, DISTRIB = "close", "spread", "primary", "distrib"
LP_COMPACT, LP_SCATTER, GP, LPGP, GPLP = "lp-compact", "lp-scatter", "gp", "lpgp", "gplp"
LOCALITY, DISTANCE, BALANCE, BALANCED_LOCALITY = "locality", "distance", "balance", "balanced-locality"
#: Chosen from the matrix's metrics by ``pinwise analyze`` (any command with a matrix accepts it).
AUTO = "auto"

#: Every policy, in the order ``map --compare`` and ``bench --policies all`` show them.
REGISTRY: dict[str, Policy] = {p.name: p for p in (
    Policy(OS, "independent", "no pinning: the OS places threads (baseline)", baseline=True),
    Policy(RANDOM, "independent", "a random permutation of the PUs, new for every seed", order=random, redrawn=True),
    Policy(COMPACT, "independent", "depth-first PU order, like KMP_AFFINITY=compact", order=compact),
    Policy(SCATTER, "independent", "one PU per package first, like KMP_AFFINITY=scatter", order=scatter),
    Policy(CLOSE, "OpenMP", "OpenMP proc_bind close over PU places", order=close),
    Policy(SPREAD, "OpenMP", "OpenMP proc_bind spread over PU places", order=spread),
    Policy(PRIMARY, "OpenMP", "OpenMP proc_bind primary: every thread on the first PU", order=primary,
           aliases=("master",)),
    Policy(DISTRIB, "independent", "hwloc-distrib's answer: each level's threads shared among its objects in "
           "proportion to their PUs", order=distrib),
    Policy(LP_COMPACT, "Mazouz", "exact matching pairs threads; pairs on sharing PUs, compact order",
           kernel=f"{_MAPPING}.pairing:lp_compact"),
    Policy(LP_SCATTER, "Mazouz", "exact matching pairs threads; pairs on sharing PUs, scatter order",
           kernel=f"{_MAPPING}.pairing:lp_scatter"),
    Policy(GP, "Mazouz", "balanced k-way partition (METIS), one part per package", kernel=f"{_MAPPING}.pairing:gp"),
    Policy(LPGP, "Mazouz", "pairs first, then the pairs partitioned onto packages", kernel=f"{_MAPPING}.pairing:lpgp"),
    Policy(GPLP, "Mazouz", "packages first (partition), then pairs inside each package",
           kernel=f"{_MAPPING}.pairing:gplp"),
    Policy(LOCALITY, "Diener", "hierarchical grouping maximising communication inside each object (EagerMap)",
           kernel=f"{_MAPPING}.grouping:locality"),
    Policy(DISTANCE, "Diener", "locality on the inverted matrix max(M) - M", kernel=f"{_MAPPING}.grouping:distance"),
    Policy(BALANCE, "Diener", "threads by decreasing CommV, each where the least communication is so far",
           kernel=f"{_MAPPING}.grouping:balance"),
    Policy(BALANCED_LOCALITY, "Diener", "locality, no object above its level's average communication",
           kernel=f"{_MAPPING}.grouping:balanced_locality"),
)}

#: The placement every other is measured against: the OS's.
BASELINE = next(p.name for p in REGISTRY.values() if p.baseline)
#: The policies that aim at locality, which the cost model judges (pinwise.patterns.checked_on),
#: the first preferred on a tie.
LOCALITY_POLICIES = (LOCALITY, BALANCED_LOCALITY, COMPACT)

_BY_ALIAS = {alias: policy for policy in REGISTRY.values() for alias in (policy.name, *policy.aliases)}


def names(with_auto: bool = False) -> list[str]:
    """The policy names every command accepts (aliases aside), in registry order."""
    return [*REGISTRY, *([AUTO] if with_auto else [])]


def is_policy(name: str) -> bool:
    return name.strip().lower() in _BY_ALIAS or name.strip().lower() == AUTO


def lookup(name: str, otherwise: str | None = None) -> Policy:
    """The policy called ``name`` (case and aliases allowed), or one clear error listing them all,
    then ``otherwise``: what else the command takes instead of a policy, if anything."""
    key = name.strip().lower()
    if key in _BY_ALIAS:
        return _BY_ALIAS[key]
    raise PinwiseError(f"unknown policy {name!r}: choose one of {', '.join(names(with_auto=True))}"
                       + (f", {otherwise}" if otherwise else ""))


def help_text(matrix_from: str = "--comm") -> str:
    """One line for --help: every name, the matrix policies marked with where the command takes
    the matrix from (``matrix_from``: its option, or its argument)."""
    simple = [p.name for p in REGISTRY.values() if not p.needs_matrix]
    matrix = [p.name for p in REGISTRY.values() if p.needs_matrix]
    return (f"{', '.join(simple)}; with the matrix ({matrix_from}): {', '.join(matrix)}, or {AUTO} "
            "(the one 'pinwise analyze' recommends)")


#: Where a communication-aware policy puts thread 0, the thread that creates the others
#: (:func:`pinwise.mapping.compute_mapping`).
CREATOR_MODES = (CREATOR_AUTO, CREATOR_LAST, CREATOR_POLICY) = (AUTO, "last", "policy")


def simple_plan(policy: Policy, topology, threads: int, seed: int | None = None, **fields) -> Plan:
    """An application-independent policy's plan for ``threads`` threads (a random one draws a new
    seed unless given one, and keeps it)."""
    if policy.redrawn:
        seed = seed if seed is not None else draw_seed()
        fields.update(seed=seed, source=f"policy random (seed {seed})")
    return Plan.from_cpus(policy.order(topology, threads, seed), **{"source": f"policy {policy.name}", **fields,
                                                                     "policy": policy.name,
                                                                     "machine": Machine.of(topology)})
