"""pinwise: place the threads of parallel programs on the cores of multicore machines.

The Python API, one function per stage, each loading what it needs when first called::

    import pinwise

    machine = pinwise.topology()                        # this machine (or a preset, XML file, synthetic string)
    comm = pinwise.trace(["./app", "8"], "comm.json")   # who shares data with whom, under Valgrind
    print(pinwise.analyze(comm).policy)                 # metrics, pattern and recommended policy
    plan = pinwise.map(comm, "locality")                # a Plan: thread k -> CPUs, for this machine
    result = pinwise.run(["./app", "8"], plan)          # pinned; result.threads says where each ran
    summary = pinwise.bench(["./app", "8"], ["os", "scatter"], "results.db")
    with pinwise.pinned([0, 1]):                        # this process on CPUs 0-1, restored afterwards
        ...

Every error is a :class:`PinwiseError` with one clear message.
"""

from __future__ import annotations

from .errors import PinwiseError

__version__ = "0.1.0"

#: Public name -> (module, attribute), imported on first use so that ``import pinwise`` stays cheap.
_LAZY = {
    "topology": ("pinwise.topology", None),   # the module is the stage: pinwise.topology(spec)
    "trace": ("pinwise.trace", None),         # pinwise.trace(argv, "comm.json")
    "bench": ("pinwise.bench", None),         # pinwise.bench(argv, ["os", "scatter"], "results.db")
    "Topology": ("pinwise.topology", "Topology"),
    "Plan": ("pinwise.plan", "Plan"),
    "Placement": ("pinwise.placement", "Placement"),
    "resolve": ("pinwise.placement", "resolve"),
    "CommMatrix": ("pinwise.comm", "CommMatrix"),
    "compute_mapping": ("pinwise.mapping", "compute_mapping"),  # compute_mapping("locality", M, "nehalem")
    "pin_threads": ("pinwise.pinning", "pin_threads"),
    "pinned": ("pinwise.pinning", "pinned"),
}
__all__ = ["PinwiseError", "__version__", "analyze", "map", "run", *_LAZY]


def _machine(spec=None):
    from .topology import load_topology

    return spec if spec is not None and not isinstance(spec, str) else load_topology(spec)


def _comm(comm):
    from .comm import CommMatrix, read_comm

    if isinstance(comm, CommMatrix):
        return comm
    if isinstance(comm, str) or hasattr(comm, "__fspath__"):
        return read_comm(comm)
    return CommMatrix.from_array(comm)


def analyze(comm, machine=None):
    """Diener et al.'s metrics, the pattern and the recommended policy of a matrix (a
    CommMatrix, an array, or a file from ``pinwise trace``), without its spin-waits; with
    ``machine`` (a Topology or what ``--topology`` accepts) the policy is checked against the cost
    model there."""
    from .patterns import analyze as analyze_matrix

    return analyze_matrix(_comm(comm), None if machine is None else _machine(machine))


def map(comm, policy: str | None = None, machine=None, **options):  # noqa: A001 - the stage's name
    """The :class:`Plan` of ``policy`` (None: the one analyze recommends) for the threads of
    ``comm`` on ``machine`` (a Topology or what ``--topology`` accepts; default: this one); None
    for ``os``. ``options``: ``seed``, ``threads``, ``creator`` (see
    :func:`pinwise.mapping.compute_mapping`)."""
    from .placement import matrix_plan
    from .policies import AUTO

    return matrix_plan(policy or AUTO, _comm(comm), _machine(machine), **options)


def run(argv: list[str], placement, **options):
    """Run ``argv`` with its threads pinned and return where each ran (``result.threads``).
    ``placement``: a :class:`Plan`, a list of CPUs, or a string as the command line takes it (a
    policy, a CPU list, a likwid-pin expression, a mapping file); None runs unpinned and observes.
    ``options``: ``omp``, ``follow``, ``extra_env``, ``output`` (see
    :func:`pinwise.pinning.run_program`). A Plan made for another machine is refused, as
    ``pinwise run --mapping`` refuses it; ``any_machine=True`` runs it as it is."""
    from .placement import resolve
    from .pinning import run_program
    from .plan import Plan

    any_machine = options.pop("any_machine", False)
    if isinstance(placement, Plan):  # its CPUs must exist here and be allowed
        machine = _machine()
        placement.check_machine(machine, any_machine)
        placement.validate(machine)
    elif placement is not None:
        placement = Plan.from_cpus(placement) if isinstance(placement, (list, tuple)) else resolve(placement, _machine())
    return run_program(argv, placement, **options)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = importlib.import_module(module)
        value = value if attribute is None else getattr(value, attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pinwise' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
