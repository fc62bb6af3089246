"""The handlers of `pinwise mpi trace`, `mpi map` and `mpi run` (pinwise.mpi)."""

from __future__ import annotations

import argparse
import sys

from ..errors import PinwiseError
from .placing import read_comm_file


def cmd_mpi_help(args: argparse.Namespace) -> int:
    args.mpi_parser.print_help()
    return 0


def cmd_mpi_trace(args: argparse.Namespace) -> int:
    from ..mpi import mpi_trace

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    comm = mpi_trace(job, args.output)
    extra = comm.info.extra
    sent = int(sum(sum(row) for row in extra["bytes_sent"]))
    messages = int(sum(sum(row) for row in extra["messages"])) // 2
    collectives = ", ".join(f"{name} {v['calls']} x" for name, v in extra["collectives"].items())
    print(f"wrote {args.output}: {comm.threads} ranks, {sent:,} bytes in {messages:,} messages"
          + (f"; collectives: {collectives}" if collectives else "") + (" [partial]" if comm.info.partial else ""),
          file=sys.stderr)
    print(f"next: pinwise analyze {args.output}", file=sys.stderr)
    return 0 if not comm.info.partial else 1


def cmd_mpi_map(args: argparse.Namespace) -> int:
    import numpy as np

    from ..files import write_text_atomic
    from ..mapping import mapping_cost
    from ..mpi import find_cluster, format_placement, rank_places, rank_plans

    comm = read_comm_file(args.comm)
    cluster = find_cluster(args.cluster, args.hostfile, args.node_topology)
    if args.gpus_per_node:
        from dataclasses import replace

        from ..mpi import gpu_rank_plans

        per_rank, gpus = gpu_rank_plans(comm, cluster, args.policy, args.threads_per_rank, args.gpus_per_node, args.seed)
        places = [replace(place, gpu=gpu) for place, gpu in zip(rank_places(per_rank, cluster), gpus)]
    else:
        per_rank = rank_plans(comm, cluster, args.policy, args.threads_per_rank, args.seed)
        places = rank_places(per_rank, cluster)
    matrix = np.asarray(comm.matrix)
    node_of = np.array([cluster.hosts.index(p.host) for p in places])
    rows, cols = np.nonzero(np.triu(matrix, 1))
    same = node_of[rows] == node_of[cols]
    total = float(matrix[rows, cols].sum())
    inside = float(matrix[rows, cols][same].sum())
    cost = mapping_cost(matrix, cluster.topology, [pus[0] for pus in per_rank]).hops
    summary = (f"{comm.threads} ranks on {len(set(node_of.tolist()))} of {len(cluster.hosts)} nodes ({cluster.node.shape} "
               f"each), policy {args.policy}: {inside / total:.0%} of the bytes and {int(same.sum())} of {len(rows)} "
               f"communicating pairs inside a node; cost {cost:,.0f}" if total else f"{comm.threads} ranks, no communication")
    if cluster.slots:
        summary += "; held to the hostfile's slots (" + ", ".join(f"{h} {n}" for h, n in cluster.slots.items()) + ")"
    text = None if args.format == "table" else format_placement(places, args.format)
    if args.output:
        write_text_atomic(args.output, text if text is not None else format_placement(places, "openmpi"))
        print(f"wrote {args.output}", file=sys.stderr)
    if text is not None:
        sys.stdout.write(text)
        print(summary, file=sys.stderr)
        return 0
    from rich.table import Table
    from rich.text import Text

    from ..report.wide import wide_console

    console = wide_console()
    console.print(Text(summary), soft_wrap=True)
    table = Table()
    columns = ("rank", "host", "CPUs", "socket:core") + (("GPU",) if args.gpus_per_node else ())
    for column in columns:
        table.add_column(column, justify="right" if column not in ("host", "GPU") else "left")
    for p in places:
        table.add_row(str(p.rank), p.host, ",".join(map(str, p.cpus)), p.slot, *((p.gpu,) if args.gpus_per_node else ()))
    console.print(table)
    return 0


def cmd_mpi_run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..mpi import find_cluster, rank_plans, ranks_matrix, run_placed
    from ..mpi.placing import check_rank_count
    from ..report.wide import wide_console

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    if not job:
        raise PinwiseError("no job given: write its launcher after --, e.g. pinwise mpi run --policy compact -- "
                           "mpirun -np 4 ./app")
    comm = ranks_matrix(args.comm, args.policy, job)
    check_rank_count(job, comm.threads)  # before the cluster is sized for them
    cluster = find_cluster(args.cluster, args.hostfile, args.node_topology, job)
    per_rank = rank_plans(comm, cluster, args.policy, args.threads_per_rank)
    status, rankfile, found = run_placed(job, cluster, per_rank, args.verify)
    print("placement: " + "; ".join(rankfile), file=sys.stderr)
    if not args.verify:
        return status
    console = wide_console(stderr=True)
    console.print("where every thread of every rank ran (read back from the ranks):")
    table = Table()
    for column in ("rank", "pid", "thread", "asked", "ran on", "where asked?"):
        table.add_column(column, justify="right" if column != "where asked?" else "left")
    wrong = missing = 0
    for rank, records in found.items():
        if not records:
            missing += 1
            table.add_row(str(rank), "-", "-", "-", "-", "no record (did the rank start?)")
        for t in records:
            ok = t.ran_where_asked
            wrong += not ok
            table.add_row(str(rank), str(t.pid), str(t.index), ",".join(map(str, t.requested)), str(t.start_cpu),
                          "yes" if ok else "NO")
    console.print(table)
    threads = sum(len(r) for r in found.values())
    print(f"pinwise: {threads} threads in {len(found)} ranks, " + ("all where asked" if not wrong and not missing else
          f"{wrong} off their CPUs, {missing} ranks without a record"), file=sys.stderr)
    return status or (1 if wrong or missing else 0)
