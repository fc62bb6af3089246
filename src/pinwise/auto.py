"""Capability 10: trace, analyze, choose candidates, bench them with early stopping, and name the
winner with its evidence and the exact lines to reuse it.

Early stopping looks at the results after LOOKS[0], LOOKS[1], ... runs per placement. Looking
several times raises the chance of a false discovery, so each look tests at
alpha / (number of looks x number of candidates) (Bonferroni): a gain is only claimed when it would
survive every look and every comparison.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass, field

from .patterns import Analysis, analyze
from .phases import phase_change
from .bench import BenchOptions, build_candidates, db, open_db, run_bench
from .bench.candidates import Candidate, unique_candidates
from .comm import CommMatrix
from .rounds import find_rounds, fold_rounds
from .errors import PinwiseError
from .numbers import say_duration
from .pinning.launcher import find_program
from .temporary import temporary_folder
from . import policies as registry
from .plan import Plan
from .vocabulary import ADAPT, AUTO_BACKEND, BACKENDS, Pattern
from .report import summarize
from .report.summary import ExperimentSummary, PolicyResult
from .stats import format_interval, format_level
from .topology import Topology

LOOKS = (15, 25, 35)
#: How much slower a program runs under Valgrind and pinwise's tool (docs/trace.md).
VALGRIND_SLOWDOWN = (5, 50)


def fewest_runs(alpha: float) -> int:
    """The fewest runs per placement with which a difference can reach significance at ``alpha``
    (the corrected level): with n and n runs the one-sided Wilcoxon-Mann-Whitney p is at least
    1 / C(2n, n), so at 95 % over 3 looks 4 runs suffice for one candidate, 5 for two to four, 6
    for five to fifteen. A bench the budget cuts makes that many, whatever the budget."""
    return next(n for n in itertools.count(2) if 1 / math.comb(2 * n, n) < alpha)


@dataclass
class AutoResult:
    comm: CommMatrix
    analysis: Analysis
    candidates: list[str]
    aliases: dict[str, list[str]]
    plans: dict[str, Plan | None]
    summary: ExperimentSummary
    winner: PolicyResult | None
    runs: int
    alpha: float
    lines: list[str] = field(default_factory=list)


def candidate_policies(analysis: Analysis) -> list[str]:
    """The cheap application-independent ones, what the metrics point at, and ``locality``
    whenever the threads communicate at all.

    The pattern is a reading of a matrix traced one thread at a time, and it can be wrong: the
    blog's pairs, whose workers also read a shared loop bound, came out "all-to-all" in some
    traces and "neighbour" in others, and without ``locality`` among the candidates auto told a
    program that runs 5x faster pinned not to pin. One more candidate costs runs; the bench
    decides. A weak reading (:func:`pinwise.patterns.weak_reading`) adds the policies it gives
    across a threshold: sysbench read "none" or "master/reduction" with the number of events; a
    trace that reads otherwise under the other sharing model, that model's policy (an ADI solver's
    halo: all-to-all under write, clustered under any). A
    trace that missed part of the program's work (``analysis.withheld``) points at nothing: only the
    placements that need no matrix are benched."""
    if analysis.withheld:
        return [registry.OS, registry.COMPACT, registry.SCATTER]
    policies = [registry.OS, registry.COMPACT, registry.SCATTER, analysis.policy]
    if analysis.pattern != Pattern.NONE or analysis.alternatives:
        policies.append(registry.LOCALITY)
    policies += [policy for _, policy in analysis.alternatives]  # a weak reading: what it reads across a threshold
    other = analysis.other_sharing
    if other and other["compared"] and not other["agrees"]:  # the other sharing model reads it otherwise
        policies += [registry.LOCALITY, other["policy"]] if other["pattern"] != Pattern.NONE else [other["policy"]]
    return list(dict.fromkeys(policies))


def creator_variants(candidates: list[Candidate], comm: CommMatrix, topology: Topology) -> list[Candidate]:
    """Where a communication-aware candidate put an idle creator beside the last worker, also the
    papers' placement of the same policy (the creator mapped like any thread), named NAME+main,
    when its CPUs differ: the bench decides which the program prefers."""
    from .mapping import compute_mapping

    variants = []
    for candidate in candidates:
        if candidate.plan is None or candidate.plan.creator is None:
            continue
        plan = compute_mapping(candidate.name, comm, topology, creator="policy")
        if plan.cpulist() != candidate.plan.cpulist():
            variants.append(Candidate(f"{candidate.name}+main", plan))
    return variants


def measure_sharing(argv: list[str], path: str, backend: str = AUTO_BACKEND, *, progress=None, say=print,
                    smaller_input: bool = False):
    """``auto``'s first step: the communication matrix of ``argv``, by the sampling tracer where
    the kernel permits it (at the program's own speed), else under Valgrind, saying which and why.
    A sample too thin to be sure of its pattern (:func:`pinwise.confidence.pattern_confidence`: too
    few traps, or a bootstrap that does not confirm it) is traced again under Valgrind. ``backend``:
    auto, sample or valgrind; ``smaller_input``: ``argv`` is already --trace-args' smaller input
    (not suggested again)."""
    from .sample import sampling_permitted

    if backend not in BACKENDS:
        raise PinwiseError(f"unknown backend {backend!r}: use {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]}")
    permitted, why = sampling_permitted()
    if backend == "sample" and not permitted:
        raise PinwiseError(f"cannot sample here: {why}; use --backend valgrind")
    if backend != "valgrind" and permitted:
        from .confidence import pattern_confidence
        from .sample import sample

        say(f"    sampling {' '.join(argv)} at its own speed ({why}) ...")
        comm = sample(argv, path, quiet=True, progress=progress, one_thread=True)
        if comm.threads < 2:
            say(f"    sampled: {argv[0]} ran one thread")
            return comm
        sureness = pattern_confidence(comm, analyze(comm))
        events = comm.info.sampling["events"]
        if backend == "sample" or (sureness is not None and sureness.sure):
            say(f"    sampled: {events:,} events in {comm.info.seconds:.2f} s; " + (sureness.reason if sureness else ""))
            return comm
        if sureness is not None and sureness.pattern_agreement is not None and phase_change(comm) is not None:
            # redraws that mix the phases' blocks disagree: the sample shows the phases, at the program's speed
            say(f"    sampled: {events:,} events in {comm.info.seconds:.2f} s; {sureness.reason}, as redraws mixing "
                "the phases' time blocks would: kept, since the sample's time blocks show the phases")
            return comm
        say(f"    the sample is too thin to be sure of ({events:,} events in {comm.info.seconds:.2f} s"
            + (f"; {sureness.reason}" if sureness else "") + "): tracing every access under Valgrind instead"
            + _valgrind_time(comm.info.seconds, smaller_input))
    elif backend == AUTO_BACKEND:
        say(f"    sampling is not possible here ({why}): tracing every access under Valgrind")
    from .trace import trace

    return trace(argv, path, quiet=True, progress=progress)


def _valgrind_time(seconds: float | None, smaller_input: bool = False) -> str:
    """What a Valgrind trace of a run that took ``seconds`` natively will take, for runs long enough
    that the wait matters (a user who sees nothing for minutes stops it); --trace-args suggested
    unless ``smaller_input`` says it was given."""
    if not seconds or seconds < 1:
        return ""
    low, high = (say_duration(factor * seconds, digits=2) for factor in VALGRIND_SLOWDOWN)
    return (f" (Valgrind runs a program {VALGRIND_SLOWDOWN[0]}-{VALGRIND_SLOWDOWN[1]}x slower: {low} to {high} for "
            "this run" + ("" if smaller_input else "; --trace-args traces a smaller input") + ")")


def simulated_auto(argv: list[str], target: Topology, *, trace_argv: list[str] | None = None,
                   placements: list[str] | None = None, say=print, tracer=None, quantum: int = 1,
                   backend: str = AUTO_BACKEND):
    """``auto`` for a machine one does not have: trace, analyze, choose the candidates as auto does
    (``os`` aside: it places nothing), plan them on ``target`` and rank them by cache simulation
    (:func:`pinwise.simulate.simulate`) instead of benchmarks. Returns the Simulation."""
    from .simulate import simulate

    find_program(argv)
    if placements:
        build_candidates([], placements, target, None)
    with temporary_folder("auto-run") as tmp:
        comm_path = os.path.join(tmp, "comm.json")
        say(f"1/2 measuring who shares data with whom in {' '.join(trace_argv or argv)}")
        if tracer is None:
            comm = measure_sharing(trace_argv or argv, comm_path, backend, say=say,
                                   smaller_input=trace_argv is not None)
        else:
            comm = tracer(trace_argv or argv, comm_path)
    rounds = find_rounds(comm)
    if rounds is not None:
        comm = fold_rounds(comm, rounds)
    analysis = analyze(comm, target)
    if analysis.withheld:
        raise PinwiseError(f"placements cannot be ranked by replaying this trace: {analysis.withheld}; trace the "
                           "program that does the work (not its launcher)")
    say(f"    {comm.threads} threads, pattern {analysis.pattern} ({analysis.pattern_reason})")
    say(f"    recommended on {target.source or 'the target'}: {analysis.policy} ({analysis.reason})")
    chosen = [name for name in candidate_policies(analysis) if name != registry.BASELINE]
    candidates = build_candidates(chosen, placements or [], target, None, comm)
    candidates += creator_variants(candidates, comm, target)
    unique, aliases = unique_candidates(candidates, target)
    say("2/2 simulating on " + (target.source or "the target") + ": " + ", ".join(
        c.name + (f" (= {', '.join(aliases[c.name])})" if c.name in aliases else "") + f" CPUs {c.plan.cpulist()}"
        for c in unique))
    return simulate(argv, target, [(" = ".join((c.name, *aliases.get(c.name, ()))),
                                    c.plan if not c.random_threads else c.plan_for_run(target, 0))
                                   for c in unique], quantum=quantum)


def run_auto(argv: list[str], topology: Topology, *, trace_argv: list[str] | None = None, budget_minutes: float = 5.0,
             confidence: float = 0.95, db_path: str | None = None, time_regex: str | None = None,
             progress: bool | None = None, say=print, tracer=None, runner=None,
             policies: list[str] | None = None, placements: list[str] | None = None,
             backend: str = AUTO_BACKEND) -> AutoResult:
    """Trace ``argv`` (or ``trace_argv``), choose candidates from the analysis, bench them against
    the OS with early stopping, and name the winner.

    ``tracer(argv, path) -> CommMatrix`` and ``runner`` (see :func:`pinwise.bench.run_bench`)
    default to the real trace (:func:`measure_sharing` with ``backend``) and the real runs; tests
    pass functions with known answers.
    ``policies`` replaces the candidates the analysis suggests (``os``, the baseline, is added);
    ``placements`` (NAME=SPEC, as ``bench --placement`` takes them) are benchmarked beside them.
    """
    if budget_minutes <= 0:
        raise PinwiseError(f"--budget must be positive, not {budget_minutes}")
    find_program(argv)
    named = [name.strip().lower() for name in policies or []]
    for name in named:  # before the long trace, not after it
        if name not in (registry.AUTO, ADAPT):
            registry.lookup(name, f"or {ADAPT} (placed while each run runs, as run --adapt places it)")
    if policies and not placements and all(name not in (registry.AUTO, ADAPT) and
                                           registry.lookup(name).name == registry.BASELINE for name in named):
        raise PinwiseError(f"--policies {','.join(policies)} leaves nothing to compare with the OS placement: name a "
                           "policy beside it (e.g. --policies locality) or a --placement")
    if placements:  # checked before the long trace too
        build_candidates([], placements, topology, None)
    with temporary_folder("auto-run") as tmp:
        comm_path = os.path.join(tmp, "comm.json")
        say(f"1/3 measuring who shares data with whom in {' '.join(trace_argv or argv)}")
        if tracer is None:
            comm = measure_sharing(trace_argv or argv, comm_path, backend, progress=progress, say=say,
                                   smaller_input=trace_argv is not None)
        else:
            comm = tracer(trace_argv or argv, comm_path)
        rounds = find_rounds(comm)
        if rounds is not None:
            say(f"    the program creates its workers in {rounds.count} rounds of {rounds.size}: "
                f"planning the creator and one round, every round's worker j on worker j's CPU")
            comm = fold_rounds(comm, rounds)
        analysis = analyze(comm)
        say(f"    {comm.threads} threads, pattern {analysis.pattern} ({analysis.pattern_reason})")
        if analysis.withheld:
            say(f"    no recommendation from the trace: {analysis.withheld}; benching the placements that need "
                "no matrix")
        else:
            say(f"    recommended: {analysis.policy} ({analysis.reason})")
        change = phase_change(comm)
        if change is not None:
            say(f"    phases: {change.text()}" + ("" if policies is None or ADAPT in named else
                                                   " (add adapt to --policies to bench it)"))
        chosen = (list(dict.fromkeys([registry.BASELINE, *policies])) if policies else
                  candidate_policies(analysis) + ([ADAPT] if change is not None else []))
        candidates = build_candidates(chosen, placements or [], topology, None, comm)
        candidates += creator_variants(candidates, comm, topology)
        unique, aliases = unique_candidates(candidates, topology)  # one placement under several names runs once
        names = [c.name for c in unique]
        say("2/3 candidates: " + ", ".join(
            f"{c.name}" + (f" (= {', '.join(aliases[c.name])})" if c.name in aliases else "")
            + (f" CPUs {c.plan.cpulist()}" if c.plan else " (placed while each run runs)" if c.adapt else
               " (a new random placement each run)" if c.random_threads else " (baseline: no pinning)")
            for c in unique))
        comparisons = max(1, len(unique) - 1)
        alpha = (1 - confidence) / (len(LOOKS) * comparisons)
        correction = (f"{format_level(confidence)} overall, Bonferroni over {len(LOOKS)} looks x {comparisons} "
                      f"candidate{'s' if comparisons > 1 else ''}")
        db_file = db_path or os.path.join(tmp, "auto.db")
        summary = None
        runs = 0
        bench_began = deadline = None
        for look in LOOKS:
            if runs:
                per_block = (time.monotonic() - bench_began) / runs
                if time.monotonic() + per_block * (look - runs) > deadline:
                    say(f"    stopping at {runs} runs per placement: {look} would pass the {budget_minutes:g}-minute "
                        "budget")
                    break
            else:  # the budget is the bench's: a long trace before it spends none of it
                bench_began = time.monotonic()
                deadline = bench_began + budget_minutes * 60
            say(f"3/3 benchmarking, {look} runs per placement (interleaved) ...")
            fresh = runs == 0 and db_path is not None and os.path.exists(db_path)
            experiment = run_bench(argv, unique, topology, db_file,
                                   BenchOptions(look, time_regex=time_regex, new=fresh, progress=progress,
                                                extra_config={"aliases": aliases}, stop_if_all_fail=True,
                                                continuing=runs > 0, deadline=deadline, fewest=fewest_runs(alpha)),
                                   runner=runner)
            connection = open_db(db_file, create=False)
            try:
                runs = sum(1 for run in db.runs(connection, experiment.id) if run.policy == registry.BASELINE)
                summary = summarize(connection, experiment, registry.BASELINE, 1 - alpha, correction=correction)
            finally:
                connection.close()
            base = summary.result(registry.BASELINE)
            if summary.winner() is not None or not len(base.times):
                break  # a winner; or a baseline that never ran well, which no further look can compare with
            if runs < look:
                say(f"    stopping at {runs} runs per placement: the {budget_minutes:g}-minute budget is spent"
                    + (f" (a round of the {len(unique)} placements took {(time.monotonic() - bench_began) / runs:.3g} s;"
                       f" the first look takes {LOOKS[0]}, and fewer runs can miss a real difference: a larger "
                       "--budget buys more)" if look == LOOKS[0] else ""))
                break
        assert summary is not None
    winner = summary.winner()
    result = AutoResult(comm, analysis, names, aliases, {c.name: c.plan for c in unique}, summary, winner, runs, alpha)
    result.lines = verdict_lines(result, argv, topology.nb_pus)
    return result


def verdict_lines(result: AutoResult, argv: list[str], hw_threads: int | None = None) -> list[str]:
    from .report.terminal import noise_lines

    summary, winner = result.summary, result.winner
    lines = noise_lines(summary)
    base = summary.result(registry.BASELINE)
    if base is None or len(base.times) < 2:
        lines.append(f"no verdict: the OS placement, the baseline, {_ran_well(base, result.runs)}: nothing to "
                     "compare the candidates with")
        return lines
    if winner is None:
        compared = [p for p in summary.policies if p.median]
        best = max(compared, key=lambda p: p.median.speedup, default=None)
        detail = (f" (best: {best.label}, {best.median.speedup:.2f}x, {best.verdict.text})" if best else "")
        untested = [p for p in summary.policies if p.verdict.kind == "no data"]
        unsure = [p for p in compared if p.verdict.kind in ("one test", "failed runs")]
        if untested:
            advice = ("no verdict on " + "; ".join(f"{p.label}, which {_ran_well(p, result.runs)}" for p in untested)
                      + (f"; of the others, none is significantly faster than the OS placement{detail}"
                         if compared else ""))
        elif unsure or result.runs < LOOKS[0]:
            # a bench the budget cut before the first look's runs cannot tell "no gain" from "too few runs"
            why = ("is established faster" if any(p.verdict.kind == "failed runs" for p in unsure) else
                   "is faster by both tests" if unsure else "is significantly faster")
            said = "not established" in detail  # the best's own verdict says it already
            advice = (f"no candidate {why} after {result.runs} runs each{detail}{'' if said else ': not established'}; "
                      "run auto again with a larger --budget, or keep the OS placement")
        else:
            advice = (f"no candidate is significantly faster than the OS placement after {result.runs} runs each"
                      f"{detail}: do not pin this program")
        lines.append(summary.no_gain_text(advice))
        return lines
    m, ci = winner.median, winner.median_ci
    mean = (f"mean {winner.mean.speedup:.2f}x, p={winner.mean.pvalue:.2g}" if winner.mean.concluded
            else "mean: no conclusion")
    base = summary.result(registry.BASELINE)
    variance = (f", variance {winner.spread.variance / base.spread.variance:.2g}x the OS's"
                if base and base.spread and base.spread.variance > 0 else "")
    lines.append(f"winner: {winner.label}")
    lines.append(f"  {m.speedup:.2f}x faster than the OS placement (median; CI {format_interval(ci)}, "
                 f"Wilcoxon-Mann-Whitney p={m.pvalue:.2g}; {mean}){variance}; {result.runs} runs each; "
                 f"{summary.level_text()}")
    program = " ".join(argv)
    lines.append("reuse it:")
    command_after = {"pinwise": f" -- {program}", "likwid-pin": f" {program}", "OpenMP": f" {program}"}
    plan = result.plans[winner.name]
    if winner.name == ADAPT:
        lines.append(f"  pinwise run --adapt -- {program}   (placed while it runs; for a process already running: "
                     "pinwise pin --pid PID --adapt)")
        return lines
    if plan is None:  # the random policy: a new placement every run, so no CPU list to hand on
        lines.append(f"  pinwise run --policy {winner.name} -- {program}   (a new random placement every run; "
                     "no fixed CPU list won)")
        return lines
    lines.extend(f"  ({line})" if name == "note" else f"  {name}: {line}" if line.startswith("(") else
                 f"  {line}{command_after.get(name, '')}"
                 for name, line in plan.job_script_lines(plan.traced_threads, hw_threads))
    return lines


def _ran_well(result: PolicyResult | None, runs: int) -> str:
    """How often a placement's runs ended well, and why the others did not: "ran well 0 times in
    15 (15 x exit status 1: ...)"."""
    good = len(result.times) if result is not None else 0
    reasons = "; ".join(f"{n} x {reason}" for reason, n in result.failures.items()) if result is not None else ""
    return f"ran well {good} time{'' if good == 1 else 's'} in {runs}" + (f" ({reasons})" if reasons else "")
