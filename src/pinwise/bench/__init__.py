"""Capability 6: experiments — many interleaved runs per placement, saved run by run."""

from __future__ import annotations

from .. import policies
from .._stage import make_callable
from ..topology import load_topology
from .candidates import Candidate, build_candidates
from .db import open_db
from .runner import BenchOptions, interrupted_message, run_bench, run_once


def bench(argv: list[str], placements=(policies.OS, policies.COMPACT, policies.SCATTER), db_path: str = "pinwise-results.db", *,
          topology=None, comm=None, threads: int | None = None, options: BenchOptions = BenchOptions(progress=False),
          baseline: str | None = None, confidence: float = 0.95):
    """Run ``argv`` under each placement, ``options.runs`` times in shuffled blocks, record every
    run in ``db_path``, and return the :class:`pinwise.report.ExperimentSummary` with the
    Speedup-Test's decisions against ``baseline``. A placement is a policy name or ``NAME=SPEC``
    (SPEC a CPU list, likwid-pin expression or mapping file); ``comm`` (a CommMatrix or a file)
    serves the policies that read the matrix."""
    from ..comm import CommMatrix, read_comm
    from ..report.summary import summarize

    topology = topology if topology is not None else load_topology(None)
    if comm is not None and not isinstance(comm, CommMatrix):
        comm = read_comm(comm)
    names = [p for p in placements if policies.is_policy(p)]
    own = [p if "=" in p else f"{p}={p}" for p in placements if not policies.is_policy(p)]
    experiment = run_bench(argv, build_candidates(names, own, topology, threads, comm), topology, db_path, options)
    connection = open_db(db_path, create=False)
    try:
        return summarize(connection, experiment, baseline, confidence)
    finally:
        connection.close()


__all__ = ["BenchOptions", "Candidate", "bench", "build_candidates", "interrupted_message", "open_db", "run_bench",
           "run_once"]


make_callable(__name__, 'bench')  # pinwise.bench(...) runs bench()
