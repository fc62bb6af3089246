"""The ``pinwise`` command line: one sub-parser per command, each naming its handler
(``module:function`` in :mod:`pinwise.cli`), which main() imports only when the command runs."""

from __future__ import annotations

import argparse

from .. import __version__, policies
from ..numbers import duration_seconds
from ..policies import CREATOR_AUTO, CREATOR_MODES
from ..vocabulary import ADAPT, AUTO_BACKEND, AUTO_COMMAND, BACKENDS, HEAT_MAPS
from .options import (CONFIDENCE, CREATOR_HELP, MAP_FORMATS, MAX_SEED, MAX_THREADS, OUTPUT_FILE, OUTPUT_FOLDER, Parser,
                      adapt_options, add_export_options, add_kinds_option, add_topology_option, argument_type,
                      mpi_placement_options, placement_options, real, whole)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pinwise",
        description="Place the threads of parallel programs on the cores of multicore machines, "
                    "and prove with statistics that it helped.",
    )
    parser.add_argument("--version", action="version", version=f"pinwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    parser.commands = commands  # main() lets a command's own parser report a usage error
    add_running_commands(commands)
    add_studying_commands(commands)
    add_measuring_commands(commands)
    add_mpi_commands(commands)
    add_pin_command(commands)
    return parser


def add_running_commands(commands) -> None:
    """topo and run (handlers: :mod:`pinwise.cli.placing`)."""
    topo = commands.add_parser("topo", help="show the machine: packages, NUMA nodes, caches, cores, PUs",
                               description="Show a machine as a tree (what this process may use is marked).")
    add_topology_option(topo)
    topo.add_argument("--of", choices=("text", "json", "xml", "synthetic"), default="text",
                      help="output format (default: text picture)")
    topo.add_argument("--output", "-o", metavar="FILE", type=OUTPUT_FILE, help="write to FILE instead of standard output")
    topo.add_argument("--presets", action="store_true", help="list the named presets of the papers' machines")
    topo.set_defaults(handler="placing:cmd_topo")

    run = commands.add_parser(
        "run", help="run a program with its threads pinned and show where they ran",
        description="Run an unmodified program with thread k (main thread = 0, then in creation order) "
                    "pinned to the k-th CPU of the placement. Example: pinwise run --expr S0:0-3 -- ./app",
    )
    placement_options(run)
    run.add_argument("--omp", action="store_true",
                     help="give the placement to the OpenMP runtime (OMP_PLACES, OMP_PROC_BIND) instead of preloading")
    run.add_argument("--print", action="store_true", help="show the plan and the job-script lines, do not run")
    run.add_argument("--verify", action=argparse.BooleanOptionalAction, default=None,
                     help="after the run, print where each thread ran (default: on when stderr is a terminal); "
                          "--no-verify: pinwise becomes the program (exec, like taskset), whose exit status and "
                          "signals reach you unchanged")
    run.add_argument("--allow-unpinned", action="store_true", help="run unpinned instead of refusing an unusable plan")
    adapt_options(run)
    run.add_argument("--follow-children", dest="follow", action="store_true", default=True,
                     help=argparse.SUPPRESS)  # the older name of --follow
    run.add_argument("--follow", dest="follow", action=argparse.BooleanOptionalAction, default=True,
                     help="the processes the program starts take the plan too (default): a program it execs, "
                          "directly or in a child (sh -c, time, env, numactl, a launcher script), gets the whole plan "
                          "from slot 0, its main thread pinned when it starts its first thread; a child it forks "
                          "without exec takes the next slot, as a thread would. --no-follow: they get back the "
                          "affinity pinwise started with, and --verify names them")
    memory = run.add_argument_group(
        "memory placement (choose one; applied to every thread, also with --omp, or alone: the threads are then left "
        "to the OS, as numactl --membind leaves them). NODES as numactl writes them (0-1,3, all, +0 for the first "
        "node this process may use, !1 for all but node 1) or as hwloc does (numa:1, node:0-1, package:0). Unlike "
        "numactl, pinwise's -m is --mapping and -p --policy: write --membind and --preferred in full")
    memory = memory.add_mutually_exclusive_group()
    memory.add_argument("--membind", metavar="NODES", help="allocate only on these NUMA nodes (numactl --membind)")
    memory.add_argument("--interleave", metavar="NODES", help="interleave pages over these NUMA nodes (numactl --interleave)")
    memory.add_argument("--preferred", metavar="NODE", help="allocate on this NUMA node first (numactl --preferred)")
    memory.add_argument("--mempolicy", choices=("local",), help="local: allocate on the node of the CPU that touches "
                        "the page (numactl --localalloc)")
    memory.add_argument("--mem", choices=("local-to-thread",), help="local-to-thread: bind each thread's memory to "
                        "the NUMA node of the CPU it is pinned to (per thread: no process-wide tool can)")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    run.set_defaults(handler="placing:cmd_run")


def add_studying_commands(commands) -> None:
    """trace, analyze and map: the program's communication and the placements it asks for
    (handlers: :mod:`pinwise.cli.tracing` and :mod:`pinwise.cli.mapping`)."""
    tracer = commands.add_parser(
        "trace", help="measure which threads share data (Valgrind, or sampling at native speed), writing a "
                      "communication matrix",
        description="Measure which threads of an unmodified program share data and write its communication matrix "
                    "(threads numbered in creation order, main = 0, as pinwise run pins them): under pinwise's "
                    "Valgrind tool, every access (exact, 5-50x slower), or with --backend sample / --pid at the "
                    "program's own speed from clock samples and hardware watchpoints (a statistical estimate).",
    )
    tracer.add_argument("-o", "--output", default="comm.json", type=OUTPUT_FILE, help="matrix file to write (default comm.json)")
    tracer.add_argument("--backend", choices=("valgrind", "sample"), default=None,
                        help="valgrind (default): every access under Valgrind; sample: outside the program at its "
                             "own speed (perf events: clock samples decoded with Capstone, watchpoints in the other "
                             "threads); needs kernel.perf_event_paranoid <= 2 or root")
    sampled = tracer.add_argument_group("sampling (--backend sample, --pid)")
    sampled.add_argument("--pid", type=whole(1, 1 << 30), metavar="PID",
                         help="attach to this running process (as perf record -p) instead of starting a program; "
                              "implies --backend sample; the process runs on when pinwise detaches")
    sampled.add_argument("--duration", type=argument_type(duration_seconds, "--duration", 0.001, 1e9), metavar="TIME",
                         help="sample for this long, then detach (10s, 500ms, 2m; default: until the program ends "
                              "or Ctrl-C)")
    sampled.add_argument("--period", type=argument_type(duration_seconds, "--period", 1e-5, 10.0), default=None,
                         metavar="TIME", help="CPU time between two samples of a thread (default 1ms)")
    sampled.add_argument("--watch-rate", type=whole(1, 1_000_000), default=None, metavar="N",
                         help="hardware watchpoints armed per second at most (default 1000): more events, more cost")
    sampled.add_argument("--seed", type=whole(0, MAX_SEED), help="seed of the sampler's random draws")
    tracer.add_argument("--window", type=whole(1, 10 ** 12), default=None,
                        help="accesses per thread per time window (default 1000000); sharing counts only within a "
                             "window, which spans a time slice of every thread")
    tracer.add_argument("--window-ms", type=whole(1, 10 ** 9),
                        help="windows of this many milliseconds instead; with sampling, how long a watchpoint waits "
                             "for another thread (default 20)")
    tracer.add_argument("--model", choices=("diener", "mazouz"), default=None,
                        help="diener: events in windows (default); mazouz: alpha, accesses to lines both threads touch")
    tracer.add_argument("--sharing", choices=("write", "any"), default="write",
                        help="write (default): an event only when one of the two accesses writes the line, so data "
                             "threads only read together is not communication; any: every access to a line another "
                             "thread touched in the window (the paper's definition)")
    tracer.add_argument("--omp-wait", choices=("passive", "keep"), default=None,
                        help="passive (default): trace with OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0 KMP_BLOCKTIME=0 "
                             "where your environment does not set them, so OpenMP barriers sleep instead of spinning "
                             "through Valgrind's time slices; keep: your environment as it is")
    tracer.add_argument("--readonly", action="store_true",
                        help="also count lines that are read-only when accessed (constants, code, RELRO data) and the "
                             "loader's GOT, which every call into a shared library reads")
    tracer.add_argument("--stack", action="store_true",
                        help="also trace accesses addressed from the stack pointer (thread-private in practice)")
    tracer.add_argument("--max-lines", type=whole(1024, 1 << 34), default=None,
                        help="cache lines tracked at most (bounds memory; default 16777216)")
    tracer.add_argument("--no-native-run", dest="native_run", action="store_false",
                        help="skip the one native run (output discarded) that records when each thread lived and "
                             "what the trace missed (threads Valgrind did not start, work in forked or exec'd "
                             "processes); without it, workers created in rounds are not recognised and a matrix "
                             "that misses work is not flagged")
    tracer.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    tracer.set_defaults(handler="tracing:cmd_trace")

    analyzer = commands.add_parser("analyze", help="metrics, pattern and recommended policy of a communication matrix",
                                   description="Diener et al.'s HComm, BComm, AComm, RComm, the load balance, a heat "
                                               "map, the pattern and the recommended mapping policy.")
    analyzer.add_argument("comm_file", metavar="COMM_FILE", help="communication matrix (.json or .csv)")
    analyzer.add_argument("--png", metavar="FILE", type=OUTPUT_FILE, help="write the heat map as a PNG")
    analyzer.add_argument("--heat-map", choices=HEAT_MAPS, default=HEAT_MAPS[0], help="terminal heat map (default text)")
    analyzer.add_argument("--json", action="store_true",
                          help="print the analysis as JSON (pattern, policy, reason, metrics, hot lines) instead")
    analyzer.add_argument("--hot", type=whole(0, 32), default=5, metavar="N",
                          help="hot shared lines to list (default 5; the trace records up to 32)")
    add_topology_option(analyzer, "check the recommendation against the cost model on this machine ('live': this "
                                   "one; default: no check):")
    analyzer.set_defaults(handler="tracing:cmd_analyze")

    mapper = commands.add_parser(
        "map", help="compute a placement from a communication matrix with a policy of the papers",
        description="Map threads to PUs from a communication matrix (JSON from 'pinwise trace', or CSV). "
                    "Policies: " + ", ".join(policies.names(with_auto=True)) + ".",
    )
    mapper.add_argument("comm_file", metavar="COMM_FILE", help="communication matrix (.json or .csv)")
    mapper.add_argument("--policy", "-p", metavar="NAME", help="a policy: " + policies.help_text("COMM_FILE"))
    mapper.add_argument("--compare", action="store_true", help="run every policy and compare their costs")
    mapper.add_argument("--format", "-f", choices=MAP_FORMATS, default="table", help="how to print the mapping")
    mapper.add_argument("--output", "-o", metavar="FILE", type=OUTPUT_FILE, help="write the mapping file that 'pinwise run --mapping' reads")
    mapper.add_argument("--threads", "-n", type=whole(1, MAX_THREADS), help="expected thread count (checked against the matrix)")
    mapper.add_argument("--seed", type=whole(0, MAX_SEED), help="seed of the random policy")
    mapper.add_argument("--creator", choices=CREATOR_MODES, default=CREATOR_AUTO,
                        help=CREATOR_HELP)
    mapper.add_argument("--near", metavar="DEVICE",
                        help="map onto the PUs local to a device (gpu:N, nic:N, an OS device's name or a PCI bus id), "
                             "as pinwise run --near does")
    add_kinds_option(mapper)
    add_topology_option(mapper)
    mapper.set_defaults(handler="mapping:cmd_map")


def add_measuring_commands(commands) -> None:
    """bench, report, workload, demo, auto and simulate: placements measured, compared and
    simulated (handlers: :mod:`pinwise.cli.measuring`)."""
    bench = commands.add_parser(
        "bench", help="run a program many times under several placements and test the speedups",
        description="Run the program under each placement, -r times, in shuffled blocks; every run is saved "
                    "in the SQLite database at once, and the same command resumes an interrupted experiment.",
    )
    bench.add_argument("--policies", default="os,compact,scatter",
                       help="comma-separated policies, or 'all' (default: os,compact,scatter); policies: "
                            + policies.help_text() + f"; and {ADAPT}: placed while each run runs, as "
                            "'pinwise run --adapt' places it")
    bench.add_argument("--placement", action="append", metavar="NAME=CPUS",
                       help="your own placement, a CPU list or likwid expression (repeatable), e.g. together=1,0,0,1")
    bench.add_argument("-r", "--runs", type=whole(1, 100_000), default=35, help="measured runs per placement (default 35, as the papers)")
    bench.add_argument("--warmup", type=whole(0, 10_000), default=0, help="warm-up blocks before measuring (default 0)")
    bench.add_argument("-n", "--threads", type=whole(1, MAX_THREADS), help="threads to plan for (default: every allowed CPU)")
    bench.add_argument("--comm", metavar="FILE", help="communication matrix for the communication-aware policies")
    bench.add_argument("--time-regex", metavar="RE",
                       help="take the time the program prints, e.g. 'Time in seconds = *([0-9.]+)' (default: wall "
                            "time); a unit after the number, in the group or just after it (ns, us, ms, s, min), "
                            "is read with it: Google Benchmark's '2.27 ms' is 0.00227 s")
    bench.add_argument("--timeout", type=real(0.001, 10 ** 7), metavar="S", help="kill a run after S seconds and record it as failed (default: 10x the slowest run of the first block, at least 5 s)")
    bench.add_argument("--db", default="pinwise-results.db", help="results database (default pinwise-results.db)")
    bench.add_argument("--new", action="store_true", help="start a new experiment even if the database holds another")
    bench.add_argument("--seed", type=whole(0, MAX_SEED), help="seed of the run order and of random placements")
    bench.add_argument("--baseline", help="placement the speedups are measured against (default os)")
    bench.add_argument("--confidence", type=CONFIDENCE, default=0.95, help="confidence of the tests (default 0.95)")
    bench.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    add_topology_option(bench)
    add_export_options(bench)
    bench.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    bench.set_defaults(handler="measuring:cmd_bench")

    report = commands.add_parser("report", help="tables, plots and an HTML report of a results database",
                                 description="Report the experiments of a results database with the Speedup-Test.")
    report.add_argument("db", metavar="DB", nargs="?", help="results database written by pinwise bench")
    report.add_argument("--simulation", metavar="FILE", action="append",
                        help="also show a simulation written by pinwise simulate -o FILE (repeatable; then DB may "
                             "be left out)")
    report.add_argument("--html", metavar="FILE", type=OUTPUT_FILE, help="write one self-contained HTML file")
    report.add_argument("--png", metavar="DIR", type=OUTPUT_FOLDER, help="write PNG and SVG plots into DIR")
    report.add_argument("--baseline", help="placement to compare against (default os, else the first)")
    report.add_argument("--confidence", type=CONFIDENCE, default=0.95, help="confidence of the tests (default 0.95)")
    report.add_argument("--experiment", type=whole(1), help="only this experiment of the database")
    add_export_options(report)
    report.set_defaults(handler="measuring:cmd_report")

    workload = commands.add_parser("workload", help="built-in programs that make the papers' patterns",
                                   description="Workload programs with the communication patterns of the papers.")
    workload.add_argument("action", choices=("list", "run"))
    workload.add_argument("name", nargs="?", help="workload to run (pinwise workload list)")
    workload.add_argument("-n", "--threads", type=whole(1, 1024),
                          help="threads, the main thread included (default 4; blog-pairs 5: its idle main thread and "
                               "2 pairs)")
    workload.add_argument("-i", "--iterations", type=whole(1, 10 ** 9), default=2000,
                          help="iterations of 1000 accesses (default 2000; blog-pairs: a repetition of 100,000 "
                               "increments per 100 of them, at least one)")
    workload.add_argument("--shared-ratio", type=real(0, 1), help="share of accesses to shared lines (default 0.5)")
    workload.add_argument("--imbalance", type=real(0, 1000), help="extra work of the busiest thread, e.g. 1 = twice as much")
    workload.add_argument("--size", type=whole(1, 1 << 20), help="private working set per thread in KiB (default 4)")
    workload.add_argument("--print", action="store_true", help="print the command line instead of running it")
    workload.set_defaults(handler="measuring:cmd_workload")

    demo = commands.add_parser("demo", help="the whole pipeline on the built-in workloads",
                               description="Topology, trace, analyze, map, bench and report on the built-in workloads.")
    demo.add_argument("--quick", action="store_true", help="fewer workloads and runs (under 2 minutes)")
    demo.add_argument("--out", default="pinwise-demo", type=OUTPUT_FOLDER, help="folder for the report, plots and matrices (default pinwise-demo)")
    demo.set_defaults(handler="measuring:cmd_demo")

    auto = commands.add_parser(AUTO_COMMAND, help="trace, analyze, bench candidate placements and name the winner",
                               description="Find the best placement for a program by experiment, with statistics.")
    auto.add_argument("--budget", type=real(0.01, 10 ** 5), default=5.0,
                      help="minutes to spend benchmarking at most, the trace not counted (default 5); each placement "
                           "runs as often as a difference needs to reach significance at the corrected level (5 times "
                           "for 2-4 candidates at 95 %%) whatever the budget")
    auto.add_argument("--trace-args", metavar="ARGS", help="arguments for a smaller input to trace with (quoted)")
    auto.add_argument("--backend", choices=BACKENDS, default=AUTO_BACKEND,
                      help="how to measure who shares data: auto (default: sampling at the program's speed where the "
                           "kernel permits it, Valgrind where it does not or where the sample is too thin to be "
                           "sure), sample, or valgrind (every access, 5-50x slower)")
    auto.add_argument("--time-regex", metavar="RE", help="take the time the program prints (default: wall time), "
                                                          "with its unit as bench reads it")
    auto.add_argument("--db", help="keep the runs in this results database (default: a temporary one)")
    auto.add_argument("--policies", metavar="LIST",
                      help="comma-separated candidates instead of those the analysis suggests (os is always the "
                           "baseline); policies: " + policies.help_text("the trace's")
                           + f"; and {ADAPT}: placed while each run runs, as run --adapt places it")
    auto.add_argument("--simulate", metavar="T", nargs="?", const="",
                      help="for a machine you do not have: plan the candidates on topology T (a preset, XML file or "
                           "synthetic string; or give it with -t) and rank them by cache simulation (pinwise "
                           "simulate) instead of benchmarks")
    add_topology_option(auto, "with --simulate, the machine to simulate:")
    auto.add_argument("--placement", action="append", metavar="NAME=CPUS",
                      help="your own placement to try beside the candidates: a CPU list, likwid expression, policy "
                           "or mapping file (repeatable), as bench takes it, e.g. together=S0:0-1")
    auto.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    auto.set_defaults(handler="measuring:cmd_auto")

    sim = commands.add_parser(
        "simulate", help="judge placements on a machine you do not have, by cache simulation (Valgrind)",
        description="Run the program once under pinwise's cache simulator: every data access goes to a model of "
                    "the topology's caches under each placement, all in the same pass. Prints per placement the "
                    "misses per level, invalidations, cache-to-cache transfers, DRAM accesses and estimated cycles, "
                    "ranked by the busiest PU's cycles (threads on one PU take turns). Example: pinwise simulate "
                    "-t x7550 --policies compact,scatter -- ./app")
    sim.add_argument("--policies", default="compact,scatter",
                     help="comma-separated policies (default: compact,scatter); policies: " + policies.help_text())
    sim.add_argument("--placement", action="append", metavar="NAME=CPUS",
                     help="your own placement: a CPU list, likwid expression or mapping file (repeatable)")
    sim.add_argument("-n", "--threads", type=whole(1, MAX_THREADS), help="threads to plan for (default: every PU)")
    sim.add_argument("--comm", metavar="FILE", help="communication matrix for the communication-aware policies")
    sim.add_argument("--quantum", type=whole(0, 1 << 30), default=1,
                     help="accesses per thread per turn when the threads' accesses are interleaved (default 1: "
                          "threads on different cores alternate access by access); 0: in Valgrind's own order, "
                          "one thread's long time slice after another's")
    sim.add_argument("--inclusive", choices=("yes", "no"), default="yes",
                     help="yes (default): a line evicted from a cache leaves the caches below it; no: levels are "
                          "independent, as cachegrind models them")
    sim.add_argument("--latency", metavar="NAME=CYCLES,...",
                     help="override latencies: L1d, L2, L3, transfer-L2, transfer-L3, transfer-package, "
                          "transfer-machine, dram-local, dram-remote")
    sim.add_argument("--bandwidth", metavar="NAME=BYTES,...",
                     help="bytes per cycle that each cache instance (L2, L3) and each NUMA node's memory controller "
                          "(dram) moves, over the defaults (L2 32, L3 16 per core below it, dram 51; e5620 and "
                          "nehalem: dram 10.7 and 10.9, their datasheets'); 0: no limit, else at least 0.001. Lines "
                          "wait on a busy one as in an M/D/1 queue")
    sim.add_argument("--prefetch", choices=("yes", "no"), default="yes",
                     help="yes (default): a thread's sequential streams of L1 misses are prefetched (their lines cost "
                          "the L2's latency and still use the memory's bandwidth); no: every miss costs its full "
                          "latency")
    sim.add_argument("--workers", type=whole(0, 4),
                     help="processes that simulate the placements while the program runs (default: 4, at most one "
                          "per group of placements that share their L1s, and none where pinwise may use only one "
                          "CPU); 0: Valgrind's own process simulates them, after each chunk of accesses")
    sim.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    sim.add_argument("--output", "-o", metavar="FILE", type=OUTPUT_FILE,
                     help="also write the results as JSON to FILE (pinwise report --simulation FILE shows them)")
    sim.add_argument("--png", metavar="FILE", type=OUTPUT_FILE, help="write a plot comparing the placements")
    add_topology_option(sim, "machine to simulate:")
    sim.add_argument("program", nargs=argparse.REMAINDER, help="-- program and its arguments")
    sim.set_defaults(handler="measuring:cmd_simulate")


def add_mpi_commands(commands) -> None:
    """mpi trace, mpi map and mpi run (handlers: :mod:`pinwise.cli.mpi`)."""
    mpi = commands.add_parser("mpi", help="MPI jobs: who sends how much to whom, across ranks",
                              description="MPI jobs, through their real launcher (mpirun, mpiexec, srun).")
    mpi_commands = mpi.add_subparsers(dest="mpi_command", metavar="MPI_COMMAND", parser_class=Parser)
    mpi_trace = mpi_commands.add_parser(
        "trace", help="record bytes and messages between ranks with a PMPI library in every rank",
        description="Run the job with pinwise's PMPI recorder preloaded into every rank: bytes and messages "
                    "per destination for point-to-point calls, collectives decomposed into a stated algorithm's "
                    "traffic and kept as totals. Writes the comm file of pinwise trace with \"kind\": \"mpi\". "
                    "Example: pinwise mpi trace -o comm.json -- mpirun -np 8 ./app")
    mpi_trace.add_argument("--output", "-o", default="comm.json", type=OUTPUT_FILE,
                           help="communication matrix to write (default comm.json)")
    mpi_trace.add_argument("job", nargs=argparse.REMAINDER, help="-- launcher, its options, program and arguments")
    mpi_trace.set_defaults(handler="mpi:cmd_mpi_trace")
    mpi_map = mpi_commands.add_parser(
        "map", help="place the ranks on a cluster from their matrix, as a rankfile or Slurm/MPICH options",
        description="Map the ranks of a matrix (pinwise mpi trace) onto a cluster whose top level is the network, "
                    "with any policy of pinwise map. Example: pinwise mpi map comm.json --cluster 'node:4 pack:2 "
                    "core:8 pu:2' --policy locality --format openmpi -o rankfile")
    mpi_placement_options(mpi_map)
    mpi_map.add_argument("--format", "-f", choices=("table", "openmpi", "slurm", "mpich", "json"), default="table",
                         help="table (default); openmpi: a rankfile (mpirun --rankfile); slurm: SLURM_HOSTFILE lines "
                              "and srun's --cpu-bind; mpich: a machinefile and -bind-to user:; json")
    mpi_map.add_argument("--output", "-o", metavar="FILE", type=OUTPUT_FILE, help="write the chosen format to FILE")
    mpi_map.add_argument("--threads-per-rank", type=whole(1, 4096), default=1, metavar="K",
                         help="PUs per rank for its threads (hybrid MPI + OpenMP; default 1): a rank's K PUs in one "
                              "package, named by a core range in the rankfile")
    mpi_map.add_argument("--gpus-per-node", type=whole(1, 4096), metavar="G",
                         help="one rank per GPU: the ranks go to the nodes' first G GPUs (in PCI bus order) by the "
                              "policy, and each rank's PUs are local to its GPU (the node topology must come with its "
                              "devices: --cluster 'node:4 NODE.xml' or --node-topology NODE.xml, hwloc XML with I/O)")
    mpi_map.add_argument("--seed", type=whole(0, MAX_SEED), help="seed of the random policy")
    mpi_map.set_defaults(handler="mpi:cmd_mpi_map")
    mpi_run = mpi_commands.add_parser(
        "run", help="launch the job through mpirun/mpiexec/srun with its ranks and their threads placed, and show "
                    "where they ran",
        description="Map the ranks as pinwise mpi map does, then run the job through its launcher with each rank on "
                    "its node (Open MPI's mpirun: a rankfile; MPICH's mpiexec: a machinefile of one host per rank; "
                    "Slurm's srun: SLURM_HOSTFILE and --distribution=arbitrary) and pinwise's preload library in "
                    "every rank (each thread of a rank on its own PU). Without --cluster, --hostfile or a Slurm "
                    "allocation the job runs on this machine alone. Examples: pinwise mpi run --comm comm.json "
                    "--hostfile hosts --threads-per-rank 2 --verify -- mpirun -np 4 ./app; pinwise mpi run "
                    "--policy compact --verify -- mpirun -np 4 ./app")
    mpi_placement_options(mpi_run, comm_option=True)
    mpi_run.add_argument("--threads-per-rank", type=whole(1, 4096), default=1, metavar="K",
                         help="PUs per rank for its threads (hybrid MPI + OpenMP/pthreads; default 1)")
    mpi_run.add_argument("--verify", action="store_true",
                         help="read back from every rank where each of its threads ran, and fail if one ran elsewhere")
    mpi_run.add_argument("job", nargs=argparse.REMAINDER,
                         help="-- mpirun, mpiexec or srun, its options, program and arguments")
    mpi_run.set_defaults(handler="mpi:cmd_mpi_run")
    mpi.set_defaults(handler="mpi:cmd_mpi_help", mpi_parser=mpi)


def add_pin_command(commands) -> None:
    """pin, which places the threads of a running process (handler: :mod:`pinwise.cli.placing`)."""
    pin = commands.add_parser("pin", help="pin the threads of a running process",
                              description="Pin the threads of a running process, in TID order, to the placement.")
    pin.add_argument("--pid", type=whole(1, 1 << 22), required=True, help="process to pin")
    placement_options(pin, live_only=True)
    adapt_options(pin)
    pin.set_defaults(handler="placing:cmd_pin")
