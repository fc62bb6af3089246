"""The one way from what a user writes to a :class:`~pinwise.plan.Plan`: CPU lists, likwid-pin
expressions, hwloc locations (:mod:`pinwise.locations`), OpenMP places (:mod:`pinwise.openmp`),
policies of the registry (with the program's matrix for those that read it) and
mapping files. ``pinwise run``, ``pin``, ``map``, ``bench``, ``auto`` and the Python API all call
:func:`resolve`, so they accept the same names and refuse the same mistakes.

Every plan ends as an ordered list of CPUs, one slot per thread, checked against the topology and
the CPUs this process may use before anything runs. Nothing here imports numpy unless a matrix is
involved: pinning a program to a CPU list stays as quick as taskset.
"""

from __future__ import annotations

import os
import warnings

from . import policies
from .cpulist import parse_cpulist
from .errors import PinwiseError
from .frozen import Frozen
from .plan import Machine, Plan, parse_skip_mask, read_plan
from .policies import CREATOR_MODES, simple_plan


class PlacementWarning(UserWarning):
    """Something about the placement the user should know before the program runs."""


class Placement(Frozen):
    """A placement as a user writes it: exactly one of ``cpus``, ``expr``, ``policy``, ``mapping``,
    and the options that shape it."""

    cpus: str | None = None
    expr: str | None = None
    policy: str | None = None
    mapping: str | None = None
    #: Slots to plan (default: the list's length, the matrix's threads, or every allowed CPU).
    threads: int | None = None
    skip: str | None = None
    seed: int | None = None
    #: Where a communication-aware policy puts thread 0 (pinwise.mapping.compute_mapping).
    creator: str = policies.CREATOR_AUTO
    repeat_from: int = 0
    #: Run a mapping file made for a machine of another structure anyway.
    any_machine: bool | None = False  # None: the caller offers no --any-machine (bench's, simulate's --placement)
    #: Which CPU kind of a hybrid machine the policies fill first: performance, efficiency or any.
    cpu_kinds: str = "performance"
    #: OpenMP places (OMP_PLACES's syntax) that close, spread and primary distribute threads over.
    places: str | None = None
    #: A device (gpu:1, mlx5_0, a PCI bus id) whose local PUs the policy places the threads on.
    near: str | None = None

    @classmethod
    def parse(cls, text: str, **options) -> Placement:
        """One word as a user types it: a policy name, a mapping file (``.json``), or a CPU list or
        likwid-pin expression."""
        text = text.strip()
        if policies.is_policy(text):
            return cls(policy=text, **options)
        if text.endswith(".json"):
            return cls(mapping=text, **options)
        return cls(expr=text, **options)


def resolve(spec: Placement | str, topology=None, comm=None) -> Plan | None:
    """The plan for ``spec`` on ``topology`` (default: this machine); None means "do not pin"
    (policy ``os``).

    ``comm`` (a :class:`pinwise.comm.CommMatrix` or an array) is the program's communication
    matrix, needed by the policies that read it; with it, every policy plans one slot per traced
    thread (per role, for workers created in rounds)."""
    if isinstance(spec, str):
        spec = Placement.parse(spec)
    given = [name for name, value in (("--cpus", spec.cpus), ("--expr", spec.expr), ("--policy", spec.policy),
                                       ("--mapping", spec.mapping)) if value is not None]
    if len(given) > 1:
        raise PinwiseError(f"give only one placement, not {' and '.join(given)}")
    if spec.near is not None:
        if given and spec.policy is None:
            raise PinwiseError(f"--near goes with a --policy (or alone: compact), not with {given[0]}, which names "
                               "the CPUs itself")
        topology = near(spec.near, topology if topology is not None else _this_machine())
        plan = resolve(spec.replace(policy=spec.policy or policies.COMPACT, near=None), topology, comm)
        return None if plan is None else plan.replace(source=f"{plan.source} near {spec.near}")
    if not given:
        raise PinwiseError("no placement given: use --cpus LIST, --expr EXPR, --policy NAME or --mapping FILE")
    if spec.threads is not None and spec.threads < 1:
        raise PinwiseError(f"-n/--threads must be at least 1, not {spec.threads}")
    if spec.creator not in CREATOR_MODES:
        raise PinwiseError(f"creator placement {spec.creator!r}: choose one of {', '.join(CREATOR_MODES)}")
    if comm is not None and spec.policy is None:
        raise PinwiseError("--comm goes with a --policy (locality, lp-compact, gp, ...), not with "
                           f"{given[0]}")
    if spec.places is not None and (spec.policy is None or policies.lookup(spec.policy).name not in OPENMP_BINDS):
        raise PinwiseError(f"--places goes with --policy {', '.join(OPENMP_BINDS)} (OpenMP's proc_bind); for the "
                           f"places themselves, one thread each, give them as --cpus {spec.places}")
    skip_mask = parse_skip_mask(spec.skip)
    cpus_expression = spec.cpus is not None and not _plain_cpulist(spec.cpus)
    if cpus_expression:  # likwid-pin -c takes both
        spec = spec.replace(cpus=None, expr=spec.cpus)
    if topology is None and spec.cpus is None:
        topology = _this_machine()
    if spec.policy is not None:
        plan = _policy_plan(spec, topology, comm)
        if plan is None:
            if spec.repeat_from:
                raise PinwiseError("--repeat-from goes with a placement; policy os places nothing")
            return None
    elif spec.mapping is not None:
        plan = read_plan(spec.mapping)
        message = plan.check_machine(topology, spec.any_machine)
        if message:
            warnings.warn(message, PlacementWarning, stacklevel=2)
    elif spec.cpus is not None:
        plan = Plan.from_cpus(parse_cpulist(spec.cpus), source=f"--cpus {spec.cpus}")
    elif _openmp().is_places(spec.expr):
        plan = Plan(tuple(_openmp().places(spec.expr, topology)), source=f"OpenMP places {spec.expr}",
                    machine=Machine.of(topology))
    else:
        from . import locations
        from .pinning import likwid

        hwloc = locations.is_location(spec.expr)
        try:
            cpus = locations.cpus_of(spec.expr, topology) if hwloc else likwid.evaluate(spec.expr, topology)
        except PinwiseError as err:
            if not cpus_expression or hwloc:
                raise
            raise PinwiseError(f"--cpus {spec.expr!r} is neither a CPU list (0,4,1-3) nor a likwid-pin expression "
                               f"that this machine has ({err}) nor an hwloc location (core:0-1)") from None
        plan = Plan.from_cpus(cpus, source=f"{'hwloc location' if hwloc else 'likwid expression'} {spec.expr}",
                              machine=Machine.of(topology))
    if spec.threads is not None and spec.policy is None and spec.threads != plan.nb_slots:
        plan = plan.replace(slots=tuple(plan.cpus_for_slot(k) for k in range(spec.threads)),
                       repeat_from=min(plan.repeat_from, spec.threads - 1))
    if skip_mask:
        plan = plan.replace(skip_mask=skip_mask)
    if spec.repeat_from:
        plan = plan.replace(repeat_from=spec.repeat_from)
    if topology is None and set(plan.all_cpus) <= os.sched_getaffinity(0):
        return plan  # CPUs this process may use exist and are allowed: no need to read the machine
    plan.validate(topology or _this_machine())
    return plan


def _plain_cpulist(text: str) -> bool:
    """A CPU list (digits, commas, ranges, strides), not a likwid-pin expression."""
    return all(c.isdigit() or c in ",-: \t\n" for c in text) and text.count(":") <= text.count("-")


def near(device: str, topology):
    """``topology`` with only the allowed PUs local to ``device`` (pinwise.topology.devices)."""
    from .topology.devices import find_device

    found = find_device(topology, device)
    local = found.cpuset & topology.allowed
    if not local:
        raise PinwiseError(f"device {device!r} ({found.label()}) is local to PUs {topology.cpulist_text(found.cpuset)}, "
                           f"none of which this process may use ({topology.cpulist_text(topology.allowed)})")
    return topology.restricted(local, f"near {device} ({found.label()})")


def _openmp():
    from . import openmp  # reads the topology's objects: not loaded to pin to a CPU list

    return openmp


def _this_machine():
    from .topology import load_topology

    return load_topology(None)


def matrix_plan(policy: str, comm, topology, **options) -> Plan | None:
    """The plan of ``policy`` for the threads of ``comm`` (a CommMatrix, an array or a scipy
    sparse matrix) on ``topology`` (a Topology, or what ``--topology`` accepts). ``auto`` is
    decided here, above the mapping stage: the policy :func:`pinwise.patterns.analyze` recommends,
    checked against the cost model on ``topology``. ``options``: those of
    :func:`pinwise.mapping.compute_mapping` (seed, threads, creator)."""
    from .mapping import as_comm, compute_mapping
    from .topology import Topology, load_topology

    if not isinstance(topology, Topology):
        topology = load_topology(topology)
    if policy.strip().lower() != policies.AUTO:
        return compute_mapping(policy, comm, topology, **options)
    from .patterns import analyze

    found = analyze(as_comm(comm), topology)
    return compute_mapping(found.recommended(), comm, topology, **options,
                           source=f"policy {found.policy} (auto: {found.pattern} pattern)")


def _policy_plan(spec: Placement, topology, comm) -> Plan | None:
    name = spec.policy.strip().lower()
    topology = topology.preferring(spec.cpu_kinds)
    if comm is not None:
        return matrix_plan(name, comm, topology, seed=spec.seed, threads=spec.threads, creator=spec.creator)
    if name == policies.AUTO:
        raise PinwiseError("policy auto is chosen from the program's communication matrix: add --comm FILE "
                           "(from 'pinwise trace')")
    policy = policies.lookup(name)
    if spec.places is not None:
        return _openmp_plan(policy, spec, topology)
    if policy.needs_matrix:
        raise PinwiseError(f"policy {policy.name} needs the program's communication matrix: add --comm FILE "
                           "(from 'pinwise trace'), or compute a mapping file with 'pinwise map'")
    if not policy.pins:
        return None
    return simple_plan(policy, topology, spec.threads or len(topology.allowed), spec.seed)


#: The policies that are OpenMP's proc_bind, which --places shapes.
OPENMP_BINDS = ("close", "spread", "primary")


def _openmp_plan(policy: policies.Policy, spec: Placement, topology) -> Plan:
    """Threads over OpenMP places as libgomp binds them: thread k on the place proc_bind gives it
    (each place a slot of all its PUs)."""
    places = _openmp().places(spec.places, topology)
    threads = spec.threads or len(topology.allowed)
    if policy.name == "primary":
        chosen = [0] * threads
    else:
        distribute = policies.omp_close_places if policy.name == "close" else policies.omp_spread_places
        chosen = distribute(len(places), threads)
    return Plan(tuple(places[p] for p in chosen), source=f"policy {policy.name} over OMP_PLACES={spec.places}",
                policy=policy.name, machine=Machine.of(topology))
