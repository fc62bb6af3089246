"""The handlers of `pinwise trace` (under Valgrind, or sampled) and `pinwise analyze`."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import policies
from .. import topology as topo_mod
from ..errors import PinwiseError
from ..topology.model import format_size
from ..vocabulary import HEAT_MAPS
from .options import no_program, program_of
from .placing import read_comm_file


_VALGRIND_ONLY = {"window": "--window", "model": "--model", "omp_wait": "--omp-wait", "max_lines": "--max-lines"}
_SAMPLE_ONLY = {"pid": "--pid", "duration": "--duration", "period": "--period", "watch_rate": "--watch-rate",
                "seed": "--seed"}


@dataclass(frozen=True)
class TraceCommand:
    """``pinwise trace``'s options, checked against each other: the program (or the process to
    attach to), the backend, and its keyword arguments (pinwise.trace.trace or
    pinwise.sample.sample) as given: the backend's own defaults stand for the others."""

    argv: list[str]
    pid: int | None                  # the process to attach to (sample)
    output: str
    backend: str                     # valgrind or sample
    settings: dict[str, object]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TraceCommand:
        argv = program_of(args)
        backend = args.backend or ("sample" if args.pid is not None else "valgrind")
        if args.pid is not None and argv:
            raise PinwiseError("--pid attaches to a running process: give no program after --")
        if args.pid is None and not argv:
            raise no_program("trace -o comm.json", " (or --pid PID to sample a running process)")
        if args.pid is not None and backend == "valgrind":
            raise PinwiseError("--pid samples a running process, which Valgrind cannot attach to: drop --backend "
                               "valgrind")
        wrong = _VALGRIND_ONLY if backend == "sample" else _SAMPLE_ONLY
        given = [flag for key, flag in wrong.items() if getattr(args, key) is not None]
        if given:
            raise PinwiseError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for the "
                               f"{'valgrind' if backend == 'sample' else 'sample'} backend, not --backend {backend}")
        own = [key for key in (_SAMPLE_ONLY if backend == "sample" else _VALGRIND_ONLY) if key != "pid"]
        settings = {key: getattr(args, key) for key in ("window_ms", *own) if getattr(args, key) is not None}
        if backend == "sample":  # the sampler's names and units
            if "period" in settings:
                settings["period_us"] = max(10, round(settings.pop("period") * 1e6))
            if "watch_rate" in settings:
                settings["arms_per_s"] = settings.pop("watch_rate")
        else:
            settings["native_run"] = args.native_run
        settings.update(sharing=args.sharing, readonly=args.readonly, stack=args.stack)
        return cls(argv, args.pid, args.output, backend, settings)


def cmd_trace(args: argparse.Namespace) -> int:
    command = TraceCommand.from_args(args)
    if command.backend == "sample":
        return _sample_trace(command)
    from ..trace import trace

    comm = trace(command.argv, command.output, **command.settings)
    info = comm.info
    print(f"wrote {command.output}: {_threads_written(comm)}, {info.total_accesses:,} accesses, "
          f"{info.lines_tracked:,} lines tracked ({format_size(_whole_kib(info.memory_bytes))} of tracer memory, "
          f"{format_size(_whole_kib(info.cache_bytes))} line cache)"
          + (f", {info.lines_dropped:,} accesses to lines past --max-lines not counted" if info.lines_dropped else "")
          + (" [partial]" if info.partial else ""), file=sys.stderr)
    print(f"next: pinwise analyze {command.output}", file=sys.stderr)
    return 0 if not info.partial else 1


def _sample_trace(command: TraceCommand) -> int:
    from ..confidence import blind
    from ..sample import RATIONED_ABOVE, SWITCH_LIMIT, quiet_words, sample, unwatched_threads

    comm = sample(command.argv or None, command.output, pid=command.pid, **command.settings)
    s = comm.info.sampling
    skipped = {k: v for k, v in s["skipped"].items() if v}
    # with --duration the sampling stops then; a started program runs on to its end
    duration = command.settings.get("duration")
    span = (f"the first {duration:g} s of a {comm.info.seconds:.1f} s run"
            if duration and command.argv and duration < comm.info.seconds else f"{comm.info.seconds:.1f} s")
    print(f"wrote {command.output}: {_threads_written(comm)}, {s['samples']:,} samples in {span} "
          f"({s['address_samples']:,} with an address), {s['events']:,} events from {s['arms']:,} watchpoints "
          f"[sampled: a statistical estimate]" + (" [partial]" if comm.info.partial else ""), file=sys.stderr)
    slower = quiet_words(s)
    if slower:
        print(f"  sampled {slower}, while no watchpoint trapped (the counts are in {s['period_ns'] / 1e6:g} ms periods)",
              file=sys.stderr)
    if skipped:
        print("  samples without a shared address: " + ", ".join(f"{v:,} {k}" for k, v in skipped.items()),
              file=sys.stderr)
    if s["child_samples"]:
        print(f"  warning: {s['child_samples']:,} samples ({s['child_samples'] / max(1, s['samples']):.0%}) were in "
              f"{s['child_processes']} child process(es), whose threads this matrix does not hold", file=sys.stderr)
    if s["lost"]:
        print(f"  warning: the kernel dropped {s['lost']:,} samples (the sampler fell behind)", file=sys.stderr)
    unseen = blind(s)
    if unseen:
        print(f"  warning: {unseen}", file=sys.stderr)
    if comm.info.unseen and not s["child_samples"]:  # (the child processes' share is said above)
        print(f"  warning: {comm.info.unseen}", file=sys.stderr)
    unwatched = unwatched_threads(comm)
    if unwatched:
        rationed = s.get("mode") == "system-wide"
        print(f"  warning: {_thread_list(unwatched)} switched more than "
              f"{RATIONED_ABOVE if rationed else SWITCH_LIMIT:,} times a second (a yielding spin-wait): a watchpoint "
              "slows every switch of the thread it is armed on, so "
              + ("they were watched only a few times a second" if rationed else "none was armed on them")
              + "; their sharing rests on few events", file=sys.stderr)
    print(f"next: pinwise analyze {command.output}", file=sys.stderr)
    return 0 if not comm.info.partial else 1


def _threads_written(comm) -> str:
    """The threads of a written trace, in words: more than the file holds where their rounds were
    folded (pinwise.sample.FOLD_ABOVE)."""
    rounds = comm.info.rounds
    if rounds is None:
        return f"{comm.threads} threads"
    return (f"{rounds.threads:,} threads in {rounds.count:,} rounds of {rounds.size}, written as {comm.threads} "
            "(the creator and one round: worker j of every round as worker j)")


def _whole_kib(size: int) -> int:
    """Rounded up to whole KiB, which format_size shows to one decimal in the largest unit."""
    return -(-size // 1024) * 1024


def cmd_analyze(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..patterns import analyze
    from ..report.plots import save_heat_map
    from ..report.terminal import heat_map_text

    from ..mapping import by_role

    # workers created in rounds: one thread per role, as map, run and auto read the same file
    comm = by_role(read_comm_file(args.comm_file))
    rounds = comm.info.rounds
    if rounds is not None and not args.json:
        print(f"the program creates its workers in {rounds.count} rounds of {rounds.size}: analyzed as the creator "
              "and one round (worker j of every round as worker j), as map and run plan it", file=sys.stderr)
    topology = topo_mod.load_topology(args.topology) if args.topology else None
    result = analyze(comm, topology)
    from ..confidence import SURE, pattern_confidence
    from ..patterns import WEAK_ADVICE
    from ..phases import phase_change

    sureness = pattern_confidence(comm, result)
    change = phase_change(comm)
    if args.png:
        save_heat_map(result.comm.matrix, args.png, f"{Path(args.comm_file).name}: communication")
        print(f"wrote {args.png}", file=sys.stderr)
    if args.json:
        import json

        document = result.to_document()
        document["backend"] = comm.info.backend or "valgrind"
        document["rounds"] = {"count": rounds.count, "size": rounds.size} if rounds is not None else None
        document["confidence"] = sureness.to_document() if sureness is not None else None
        document["phases"] = change.to_document() if change is not None else None
        print(json.dumps(document, indent=1))
        return 0
    m = result.metrics
    console = Console(highlight=False, width=max(110, Console().width))
    why_spins = ("threads waiting on it spin, and are sampled while they spin" if comm.info.backend == "sample" else
                 "threads waiting on it, which Valgrind runs one at a time, spin through whole time slices")
    for line in result.spin_lines:
        console.print(Text(f"spin-wait: {_hot_line_name(line)} carries {line.events / _events(comm):.1%} of all events, "
                           f"{_reads_and_writes(line)}: {why_spins}; what follows is of the matrix without its events"))
    table = Table(title=Text(f"{args.comm_file}: {m.threads} threads"), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    rows = [
        ("HComm", f"{m.hcomm:.1f}", "heterogeneity, eq. 1: mean row variance of M/max(M)*100 (diagonal included; the "
                                    "paper's)"),
        ("  off-diagonal", f"{m.heterogeneity:.1f}", "the same without the diagonal: the one to trust (eq. 1's zero "
                                                     "diagonal makes a flat matrix score highest); used to recommend"),
        ("BComm", f"{m.bcomm:.1f} %", "communication imbalance, eq. 2: max(CommV)/avg(CommV) - 1"),
    ]
    if m.bcomm_observed is not None:  # a sampled matrix's, less its own noise (docs/trace.md); then as counted
        rows[1] = (rows[1][0], rows[1][1], rows[1][2] + f"; less the sample's noise ({m.heterogeneity_observed:.1f} "
                   "as counted)")
        rows[2] = (rows[2][0], rows[2][1], rows[2][2] + f"; less the sample's noise ({m.bcomm_observed:.1f} % as "
                   "counted)")
    rows += [
        ("AComm", f"{m.acomm:.4g}", "amount, eq. 3: sum of M / T^2"),
        ("RComm", "-" if m.rcomm is None else f"{m.rcomm:.3g}", "ratio, eq. 4: AComm / total memory accesses"),
        ("load balance", "-" if m.load_balance is None else f"{m.load_balance:.1f} %",
         "max/avg - 1 of the instructions per thread"),
    ]
    if m.comm_share is not None:
        rows.append(("communicating", f"{m.comm_share:.3g}", "communication events per memory access"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    matrix = result.comm.matrix
    if args.heat_map != HEAT_MAPS[1]:
        console.print(Text(heat_map_text(matrix)))
    if args.hot and result.hot_lines:
        _print_hot_lines(console, comm, result, args.hot)
    console.print(Text(f"pattern{' of what was traced' if result.withheld else ''}: {result.pattern} "
                       f"({result.pattern_reason})"))
    if result.withheld:
        console.print(Text(f"no recommendation: {result.withheld}; trace the program that does the work (not its "
                           "launcher), or choose a policy that needs no matrix (compact, scatter) and bench it"))
        return 0
    unsure = ""
    if sureness is not None:
        if sureness.pattern_agreement is None:
            console.print(Text(f"how sure: cannot say: {sureness.reason}"))
            unsure = " (uncertain: a sampled matrix whose sureness cannot be measured)"
        else:
            console.print(Text(f"how sure: {sureness.reason}" + ("" if sureness.sure else
                               f"; below {SURE:.0%}, as redraws that mix the phases' time blocks give" if change else
                               f"; below {SURE:.0%}: the pattern rests on the luck of the draw, sample longer or at a "
                               "higher --watch-rate")))
            agree = sureness.policy_agreement
            if not sureness.sure:
                unsure = (f" (uncertain: {agree:.0%} of redraws give this policy)" if agree is None or agree < SURE else
                          f" ({agree:.0%} of redraws give this policy, whichever pattern they read)")
    weak = " (a weak reading)" if result.doubt else ""
    reason = result.reason
    if change is not None:
        console.print(Text(f"phases: {change.text()}"))
        # the sum of two phases sits between their patterns: that, not the trace's length, is why
        reason = reason.replace(WEAK_ADVICE, "Its two phases summed read as neither: each phase's own pattern is "
                                             "named above")
    whole = " (for the whole run, its phases summed)" if change is not None else ""
    console.print(Text(f"recommended policy: {result.policy}{unsure or weak}{whole}: {reason}"))
    if result.costs is not None:
        compact = result.costs[policies.COMPACT]
        console.print(Text(f"cost on {result.costs.topology}: {result.policy} "
                           f"{result.costs[result.policy]:,.0f}, compact {compact:,.0f} (sum of M[i][j] x tree "
                           "distance; pinwise map --compare shows every policy)"))
    other = result.other_sharing
    if other is not None:
        mine = comm.info.sharing
        if not other["compared"]:
            console.print(Text(f"sharing models: not compared ({other['why']})"))
        elif other["agrees"]:
            console.print(Text(f"sharing models: --sharing {other['sharing']} reads it the same ({other['pattern']} -> "
                               f"{other['policy']})"))
        else:
            console.print(Text(f"sharing models disagree: with --sharing {other['sharing']} this trace reads "
                               f"{other['pattern']} -> {other['policy']} ({other['pattern_reason']}), with "
                               f"{mine} {result.pattern} -> {result.policy}. They differ by read sharing (a halo "
                               "its owner and a neighbour both read, a table every thread reads): any counts it, "
                               "write only where a write moved the line; bench both (pinwise auto does)"))
    console.print(Text(f"next: pinwise map {args.comm_file} --policy {result.policy} -o mapping.json"))
    if comm.info.partial:
        console.print(Text("note: this matrix is partial (the traced program did not end normally)"))
    return 0


def _events(comm) -> float:
    from ..patterns import event_count

    return max(event_count(comm), 1.0)


def _thread_list(threads) -> str:
    from ..cpulist import format_cpulist

    if not threads:
        return "no thread"
    return f"threads {format_cpulist(threads)}" if len(threads) != 1 else f"thread {threads[0]}"


def _reads_and_writes(line) -> str:
    """What the tracer counted on a hot line since it became hot, and only that: "read 40 times
    per write (threads 1,2 read it, thread 0 writes it)", or, with no write counted, "read 567,413
    times, no write since it became hot (threads 1,2 read it)"."""
    reads, writes = sum(line.reads), sum(line.writes)
    if writes == 0:
        return f"read {reads:,} times, no write since it became hot ({_thread_list(line.readers)} read it)"
    return (f"read {reads / writes:,.0f} times per write ({_thread_list(line.readers)} read it, "
            f"{_thread_list(line.writers)} write{'s' if len(line.writers) == 1 else ''} it)")


def _hot_line_name(line) -> str:
    return f"line 0x{line.address & ~63:x} (an access {_where(line)})"


def _where(line) -> str:
    """Where the address the tracer described in a hot line lies: "at progress+0" (the variable
    at that address, not everything the line's 64 bytes hold), or "in anonymous memory ..."."""
    if line.where.startswith("variable "):
        return f"at {line.where[len('variable '):]}"
    return f"in {line.where}"


#: "(in /usr/lib/x86_64-linux-gnu/libgomp.so.1)" in Valgrind's descriptions of code: the file's name is enough.
OBJECT_PATH = re.compile(r"[(]in /[^)]*/([^/)]+)[)]")


def _print_hot_lines(console, comm, result, count: int) -> None:
    """The lines carrying the most communication, one per line: what they are, who shares them, the
    code that touches them."""
    from rich.text import Text

    total = _events(comm)
    console.print(Text("hot shared lines (the cache lines that carry the most communication; fix false sharing here; "
                       "one address seen in each, code seen anywhere in its 64 bytes, counts since it became hot):"))
    for line in result.hot_lines[:count]:
        pairs = sorted(line.pairs, key=lambda p: -p[2])[:3]
        counted = sum(n for _, _, n in line.pairs) or 1
        read, written = (OBJECT_PATH.sub(r"(in \1)", text) if text else None
                         for text in (line.read_code, line.write_code))
        code = (f"read and written at {read}" if read == written and read else
                ", ".join(f"{kind} at {text}" for kind, text in (("read", read), ("written", written)) if text))
        who = (f"{_thread_list(line.readers)} read, {_thread_list(line.writers)} write" if line.writers
               else f"{_thread_list(line.readers)} read, no write")
        top = ", ".join(f"{i}-{j} {n / counted:.0%}" for i, j, n in pairs)
        console.print(Text(f"  {line.events / total:6.1%}{' spin-wait' if line in result.spin_lines else ''}  "
                           f"0x{line.address & ~63:x}  {_where(line)}: {who}"
                           + (f"; pairs {top}" if top else "") + (f"; in the line: {code}" if code else "")))
