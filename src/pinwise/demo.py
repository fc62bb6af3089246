"""`pinwise demo`: the whole pipeline on the built-in workloads, explained in plain words.

topology -> trace each workload -> analyze (metrics, pattern, recommendation, heat map) -> map
with the recommended and the papers' policies -> bench a subset -> report (terminal + HTML + PNGs).
"""

from __future__ import annotations

import html
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import policies as registry
from .patterns import analyze
from .report.plots import save_heat_map
from .bench import BenchOptions, build_candidates, open_db, run_bench
from .comm import read_comm
from .errors import PinwiseError
from .mapping import compare
from .mapping.cost import vs_best
from .report import hyperfine_lines, save_plots, summarize, write_html
from .report.html import heat_map_grid
from .report.terminal import summary_table
from .report.wide import wide_console
from .topology import live_topology, preset, render
from .trace import trace
from .vocabulary import Pattern
from .workloads import TIME_REGEX, WORKLOAD_OF, workload_command

#: pattern -> (trace iterations, bench iterations) of the workload that makes it (None: not
#: benched); sized for this project's 2-core test machine.
QUICK = {Pattern.PAIRS: (2000, 3000), Pattern.NEIGHBOUR: (2000, None), Pattern.MASTER: (2000, None),
         Pattern.NONE: (2000, 3000)}
FULL = {Pattern.PAIRS: (2000, 4000), Pattern.NEIGHBOUR: (2000, 4000), Pattern.FAR_PAIRS: (2000, None),
        Pattern.MASTER: (2000, None), Pattern.PIPELINE: (2000, None), Pattern.ALL_TO_ALL: (2000, 3000),
        Pattern.NONE: (2000, 4000)}


#: Marks a folder as the demo's own: only there does it replace what a demo wrote before.
OWN_FOLDER_MARK = ".pinwise-demo"


def _own_folder(out_dir: str) -> Path:
    """The demo's output folder, new or one an earlier demo wrote: the demo replaces its results
    database and matrices, so a folder holding a user's files (``--out .``) is refused."""
    out = Path(out_dir)
    try:
        if out.is_dir() and any(out.iterdir()) and not (out / OWN_FOLDER_MARK).exists():
            raise PinwiseError(f"{out_dir} holds files that no demo wrote, and the demo replaces what it writes "
                               "(results.db, *.comm.json, report.html): give a new folder with --out")
        out.mkdir(parents=True, exist_ok=True)
        (out / OWN_FOLDER_MARK).touch()
    except OSError as err:
        raise PinwiseError(f"cannot create {out_dir}: {err.strerror}") from None
    return out


def run_demo(out_dir: str, quick: bool = False, console: Console | None = None) -> Path:
    console = console or wide_console()
    out = _own_folder(out_dir)
    start = time.perf_counter()
    plan = {WORKLOAD_OF[pattern]: sizes for pattern, sizes in (QUICK if quick else FULL).items()}
    threads = 4
    runs = 10 if quick else 25
    machine = live_topology()

    stage = {"name": "", "start": start}

    def step(text: str) -> None:
        """Close the stage that ran (its own time) and open the next."""
        now = time.perf_counter()
        if stage["name"]:
            console.print(Text(f"   ({stage['name']} took {now - stage['start']:.0f} s)", style="dim"))
        stage.update(name=f"stage {text.split('.', 1)[0]}", start=now)
        console.print(Text(f"\n== {text}", style="bold"))

    step("1. the machine")
    console.print(Text(render(machine)))
    console.print(Text(f"pinwise sees {machine.nb_pus} PUs; it may use {len(machine.allowed)} of them."))

    shown = 8  # enough threads for every pattern to show; the bench uses `threads` on this machine
    step(f"2. tracing {len(plan)} workloads with {shown} threads under Valgrind")
    analyses = {}
    for index, (name, (trace_iterations, _)) in enumerate(plan.items(), start=1):
        comm_path = out / f"{name}.comm.json"
        with console.status(f"  tracing {name} ({index}/{len(plan)}) under Valgrind ..."):
            trace(workload_command(name, shown, trace_iterations), comm_path, progress=False, quiet=True)
        comm = read_comm(comm_path)
        result = analyze(comm)
        analyses[name] = (comm, result)
        save_heat_map(comm.matrix, str(out / f"{name}.heatmap.png"), f"{name}: who talks to whom")
        console.print(Text(f"  {name:<11} pattern {result.pattern:<17} HComm {result.metrics.hcomm:7.1f}  "
                           f"BComm {result.metrics.bcomm:6.1f}  -> {result.policy}"))

    step("3. analysis in plain words")
    for name, (comm, result) in analyses.items():
        console.print(Text(f"  {name}: {result.pattern_reason}; so {result.policy}: {result.reason}."))

    step("4. mapping: every policy's cost on a 4-socket machine of the papers (x7550, 64 PUs)")
    paper = preset("x7550")
    table = Table(title=Text("cost = sum of M[i][j] x tree distance; lower keeps communicating threads closer"),
                  title_justify="left")
    policies = [registry.COMPACT, registry.SCATTER, registry.LP_COMPACT, registry.GP, registry.LOCALITY, registry.BALANCE,
                registry.BALANCED_LOCALITY]
    table.add_column("workload")
    for p in policies:
        table.add_column(p, justify="right")
    for name, (comm, _) in analyses.items():
        rows = {r.policy: r for r in compare(comm.matrix, paper, policies)}
        best = min(r.cost.hops for r in rows.values())
        table.add_row(name, *[vs_best(rows[p].cost.hops, best) for p in policies])
    console.print(table)
    console.print(Text("  (1.00 is the best policy for that workload; all-flat rows mean no placement matters)"))

    step(f"5. benchmarking on this machine with {threads} threads: OS vs the recommended placement, "
         f"{runs} interleaved runs each")
    db_path = str(out / "results.db")
    if os.path.exists(db_path):
        os.remove(db_path)
    summaries = []
    for name, (_, bench_iterations) in plan.items():
        if bench_iterations is None:
            continue
        result = analyses[name][1]
        comm_path = out / f"{name}.{threads}threads.comm.json"  # the mapping needs this thread count's matrix
        with console.status(f"  tracing {name} with {threads} threads for its mapping ..."):
            trace(workload_command(name, threads, plan[name][0]), comm_path, progress=False, quiet=True)
        comm = read_comm(comm_path)
        chosen = [registry.BASELINE, result.policy] + ([registry.SCATTER] if result.policy != registry.SCATTER else [registry.COMPACT])
        candidates = build_candidates(list(dict.fromkeys(chosen)), [], machine, None, comm)
        command = workload_command(name, threads, bench_iterations)
        console.print(Text(f"  {name}: {len(candidates)} placements x {runs} runs ...", style="dim"))
        experiment = run_bench(command, candidates, machine, db_path,
                               BenchOptions(runs, time_regex=TIME_REGEX, new=True, progress=console.is_terminal,
                                            extra_config={"recommended": result.policy},
                                            say=lambda text: None))  # its own lines say enough
        connection = open_db(db_path, create=False)
        try:
            summary = summarize(connection, experiment)
        finally:
            connection.close()
        summaries.append(summary)
        console.print(summary_table(summary))
        for line in hyperfine_lines(summary):
            console.print(Text("  " + line), soft_wrap=True)

    step("6. report")
    png_dir = out / "plots"
    for summary in summaries:
        save_plots(summary, png_dir, prefix=f"{Path(summary.experiment.command[1]).name}-")
    heat_maps = heat_map_grid([(f"{name}: {analyses[name][1].pattern}", _b64(out / f"{name}.heatmap.png"))
                               for name in analyses])
    words = "".join(f"<li><b>{name}</b>: {html.escape(r.pattern_reason)}; recommended {r.policy}: "
                    f"{html.escape(r.reason)}.</li>" for name, (_, r) in analyses.items())
    write_html(summaries, out / "report.html",
               [f"<section><h2>what the traces showed ({shown} threads each)</h2><ul>{words}</ul>{heat_maps}</section>"])
    console.print(Text(f"in plain words: {_conclusion(summaries)}"))
    console.print(Text(f"report: {out / 'report.html'} (plots in {png_dir}, heat maps and matrices in {out})"))
    console.print(Text(f"   ({stage['name']} took {time.perf_counter() - stage['start']:.0f} s)", style="dim"))
    console.print(Text(f"demo finished in {time.perf_counter() - start:.0f} s"))
    return out / "report.html"


def _b64(path: Path) -> str:
    import base64

    return base64.b64encode(path.read_bytes()).decode()


def _conclusion(summaries) -> str:
    parts = []
    for summary in summaries:
        workload = summary.experiment.command[1] if len(summary.experiment.command) > 1 else summary.experiment.label
        parts.append(summary.conclusion(
            lambda w: f"{workload} ran {w.median.speedup:.1f}x faster (median) with {w.name} than under the OS",
            f"{workload} gained nothing significant from pinning, so it is best left to the OS"))
    return "; ".join(parts) + "."
