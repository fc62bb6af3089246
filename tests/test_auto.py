"""Capability 10: auto's decisions on generated timings with known answers (candidates, early
stopping, verdict, reuse lines), and a real run that records every run and places every thread
as its plan says. No test here depends on a real speedup existing on the machine that runs it."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import time

import numpy as np
import pytest
from conftest import FakeProgram, assert_clean_failure, run_pinwise

from pinwise import stats
from pinwise.auto import LOOKS, fewest_runs, run_auto
from pinwise.bench import db
from pinwise.comm import CommMatrix
from pinwise.topology import load_topology
from pinwise.trace import TOOL
from pinwise.workloads import TIME_REGEX, workload_command

TOPOLOGY = load_topology("pack:1 core:2 pu:1")
PROGRAM = ["/bin/true"]


def contending_pairs() -> CommMatrix:
    """Main (thread 0) creates two pairs, (1, 2) and (3, 4), and only waits for them."""
    matrix = np.zeros((5, 5))
    matrix[1, 2] = matrix[2, 1] = matrix[3, 4] = matrix[4, 3] = 1e6
    matrix[0, 1:] = matrix[1:, 0] = 30
    return CommMatrix(matrix, np.array([1e2, 1e6, 1e6, 1e6, 1e6]), np.array([1e3, 1e7, 1e7, 1e7, 1e7]))


def auto(program: FakeProgram, tmp_path, comm: CommMatrix | None = None):
    said = []
    result = run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "auto.db"), progress=False, say=said.append,
                      tracer=lambda argv, path: comm or contending_pairs(), runner=program)
    return result, said


def sample(tmp_path, policy: str) -> np.ndarray:
    connection = db.open_db(tmp_path / "auto.db", create=False)
    try:
        rows = db.runs(connection, db.latest_experiment(connection).id)
    finally:
        connection.close()
    return np.array([r.wall for r in rows if r.policy == policy])


REUSE_TOGETHER = [
    "reuse it:",
    "  pinwise run --cpus 1,0,0,1,1 -- /bin/true",
    "  likwid-pin: (withheld: its list would have 4 CPUs, more than the machine's 2 hardware threads; likwid-pin "
    "keeps only the first 2 and wraps round them, so thread 2 onward would run elsewhere; use the pinwise line)",
    '  OMP_PLACES="{1},{0},{0},{1},{1}" OMP_PROC_BIND=close /bin/true',
    '  GOMP_CPU_AFFINITY="1 0 0 1 1"',
    '  KMP_AFFINITY="granularity=fine,explicit,proclist=[1,0,0,1,1]"',
    "  taskset -c 0,1   (whole process, no per-thread placement)",
]
LEVEL = "one-sided tests and intervals at 99.44% (95% overall, Bonferroni over 3 looks x 3 candidates)"


def test_candidates_put_an_idle_creator_beside_the_last_pair(tmp_path):
    result, said = auto(FakeProgram({"os": 1.0, "other": 1.0}, 0.05), tmp_path)
    # scatter gives compact's CPUs on one package, so it runs once under compact's name.
    assert result.candidates == ["os", "compact", "locality", "locality+main"]
    assert result.aliases == {"compact": ["scatter"]}
    plans = {name: plan.cpulist() if plan else None for name, plan in result.plans.items()}
    assert plans == {"os": None, "compact": "0,1,0,1,0", "locality": "1,0,0,1,1", "locality+main": "0,0,0,1,1"}
    assert said[3] == ("2/3 candidates: os (baseline: no pinning), compact (= scatter) CPUs 0,1,0,1,0, "
                       "locality CPUs 1,0,0,1,1, locality+main CPUs 0,0,0,1,1")


def test_a_clear_gain_stops_at_the_first_look_and_names_the_winner(tmp_path):
    # The program: pairs together with main beside the last pair 0.6 of the OS's time,
    # main beside the first pair no faster than the OS.
    program = FakeProgram({"os": 1.0, "1,0,0,1,1": 0.6, "0,0,0,1,1": 1.0, "other": 1.3}, 0.05)
    result, _ = auto(program, tmp_path)
    assert result.runs == LOOKS[0] and len(program.calls) == LOOKS[0] * 4
    assert result.winner.name == "locality"
    speedup = np.median(sample(tmp_path, "os")) / np.median(sample(tmp_path, "locality"))
    ci = result.winner.median_ci
    assert ci.low > 1 and ci.confidence == pytest.approx(1 - 0.05 / 9)
    assert result.lines[0] == "winner: locality"
    assert result.lines[1].startswith(f"  {speedup:.2f}x faster than the OS placement (median; "
                                      f"CI {stats.format_interval(ci)}, Wilcoxon-Mann-Whitney p=")
    assert result.lines[1].endswith(f"; {LOOKS[0]} runs each; {LEVEL}")
    assert result.lines[2:] == REUSE_TOGETHER


def test_no_gain_runs_every_look_and_advises_the_os(tmp_path):
    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.05)
    result, _ = auto(program, tmp_path)
    assert result.winner is None and result.runs == LOOKS[-1] and len(program.calls) == LOOKS[-1] * 4
    assert len(result.lines) == 1
    assert re.fullmatch(r"no candidate is significantly faster than the OS placement after 35 runs each "
                        r"\(best: [a-z+ =]+, [0-9.]+x, no significant difference \(median test p=[0-9.e-]+, "
                        r"mean test p=[0-9.e-]+\)\): do not pin this program",
                        result.lines[0]), result.lines[0]


class SlowProgram(FakeProgram):
    """A FakeProgram whose every run takes ``seconds`` of real time."""

    def __init__(self, medians, sigma, seconds):
        super().__init__(medians, sigma)
        self.seconds = seconds

    def __call__(self, *args):
        time.sleep(self.seconds)
        return super().__call__(*args)


def test_the_budget_cuts_the_first_look_short_and_the_verdict_says_so(tmp_path):
    # 4 placements of 0.02 s each: a round takes 0.08 s or more, 15 rounds 1.2 s or more, against a
    # budget of 0.6 s; the rounds a difference needs to be significant run whatever the budget
    program = SlowProgram({"os": 1.0, "other": 1.0}, 0.05, 0.02)
    said = []
    result = run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "auto.db"), progress=False, say=said.append,
                      tracer=lambda argv, path: contending_pairs(), runner=program, budget_minutes=0.01)
    assert fewest_runs(result.alpha) == 5 <= result.runs < LOOKS[0] and len(program.calls) == result.runs * 4
    assert len(sample(tmp_path, "os")) == result.runs
    stop = next(line for line in said if line.startswith("    stopping at"))
    assert stop.startswith(f"    stopping at {result.runs} runs per placement: the 0.01-minute budget is spent "
                           "(a round of the 4 placements took ")
    assert stop.endswith(f" s; the first look takes {LOOKS[0]}, and fewer runs can miss a real difference: a larger "
                         "--budget buys more)")
    # too few runs to tell no gain from too few runs: never "do not pin"
    assert result.winner is None and result.lines[-1].startswith(
        f"no candidate is significantly faster after {result.runs} runs each (best: ")
    assert result.lines[-1].endswith(": not established; run auto again with a larger --budget, or keep the OS "
                                     "placement")


def test_the_budget_is_the_benchs_not_the_traces(tmp_path, monkeypatch):
    # a trace that takes longer than the whole budget (the clocks moved on by 10 minutes) leaves the
    # bench every look: no winner here, and its runs take no time
    ahead = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda real=time.monotonic: real() + ahead[0])

    def slow_trace(argv, path):
        ahead[0] += 600
        return contending_pairs()

    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.05)
    result = run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "auto.db"), progress=False, say=lambda text: None,
                      tracer=slow_trace, runner=program, budget_minutes=1)
    assert result.runs == LOOKS[-1]  # no winner: every look, none cut by the trace's time


def test_a_noisy_tie_is_not_called_a_gain(tmp_path):
    # 7% faster under 40% noise: 35 runs cannot see it at the corrected level.
    program = FakeProgram({"os": 1.0, "1,0,0,1,1": 0.93, "other": 1.0}, 0.4)
    result, _ = auto(program, tmp_path)
    assert result.winner is None and result.runs == LOOKS[-1]
    assert result.lines[-1].startswith("no candidate is significantly faster")
    assert result.lines[-1].endswith("do not pin this program")


def test_a_busy_machine_gives_an_inconclusive_verdict(tmp_path):
    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.05, busy=0.5)
    result, _ = auto(program, tmp_path)
    assert result.winner is None
    assert result.lines[0].startswith("warning: the machine was busy during the bench (other processes used 50% "
                                      "of the CPU time, steal 0.0%, load average up to 3.0, CV ")
    assert result.lines[1].startswith("inconclusive: the machine was busy (other processes used 50% of the CPU time")
    assert result.lines[1].endswith("rerun on a quiet machine before deciding")
    assert "do not pin" not in " ".join(result.lines)


def test_a_busy_creator_is_mapped_like_any_thread(tmp_path):
    comm = contending_pairs()
    comm.instructions[0] = 1e7  # main works as much as the others: the papers' placement only
    result, _ = auto(FakeProgram({"os": 1.0, "other": 1.0}, 0.05), tmp_path, comm)
    assert result.candidates == ["os", "compact", "locality"]
    assert result.plans["locality"].cpulist() == "0,0,0,1,1"


needs_tracer = pytest.mark.skipif(shutil.which("valgrind") is None or not TOOL.exists(),
                                  reason="Valgrind or pinwise's Valgrind tool is missing")
needs_two_cpus = pytest.mark.skipif(sorted(os.sched_getaffinity(0))[:2] != [0, 1], reason="needs CPUs 0 and 1")


@needs_tracer
@needs_two_cpus
def test_auto_on_a_real_program_records_every_run_where_its_plan_says(tmp_path):
    db_path = tmp_path / "auto.db"
    command = workload_command("pairs", threads=4, iterations=200, shared_ratio=1.0)
    result = run_pinwise("auto", "--db", str(db_path), "--time-regex", TIME_REGEX, "--", *command, timeout=600)
    assert result.returncode == 0, result.stderr
    verdicts = [line for line in result.stdout.splitlines()  # every conclusion auto draws (auto.verdict_lines)
                if line.startswith(("winner:", "no candidate is significantly faster", "no candidate is faster by both",
                                    "no candidate is established faster", "no verdict", "inconclusive:"))]
    assert len(verdicts) == 1, result.stdout
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    rows = [dict(r) for r in connection.execute("SELECT * FROM runs WHERE warmup = 0")]
    config = db.latest_experiment(connection).config
    connection.close()
    counts = {name: sum(1 for r in rows if r["policy"] == name) for name in config.candidates}
    assert len(set(counts.values())) == 1 and next(iter(counts.values())) in LOOKS, counts
    assert all(r["failure"] is None and r["misplaced"] == 0 for r in rows)
    for row in rows:  # every run ran under its candidate's plan, threads read back where asked
        assert row["placement"] == (config.plans[row["policy"]] or "os")
    assert config.plans["os"] is None and len(config.plans) >= 2


def test_locality_is_benched_whenever_threads_communicate(tmp_path):
    """Even when the pattern reads "all-to-all" (a trace can misread pairs that also share a
    read-only line), the bench, not the classifier, decides whether locality pays."""
    comm = contending_pairs()
    comm.matrix[:, :] = 1e6  # everyone with everyone
    np.fill_diagonal(comm.matrix, 0)
    result, _ = auto(FakeProgram({"os": 1.0, "other": 1.0}, 0.05), tmp_path, comm)
    assert result.analysis.pattern == "all-to-all"
    assert "locality" in result.candidates or "locality" in sum(result.aliases.values(), [])


def test_auto_never_calls_a_gain_significant_beside_an_interval_containing_one(tmp_path):
    """Near the boundary (3% faster under 3% noise) over many generated samples: whenever auto
    names a winner, the interval it prints lies above 1."""
    winners = 0
    for seed in range(12):
        program = FakeProgram({"os": 1.0, "1,0,0,1,1": 0.97, "other": 1.0}, 0.03, seed=seed)
        (tmp_path / str(seed)).mkdir()
        result, _ = auto(program, tmp_path / str(seed))
        for line in result.lines:
            interval = re.search(r"CI \[([0-9.]+), ([0-9.]+)\]", line)
            if interval:
                winners += 1
                assert float(interval.group(1)) > 1, line
        if result.winner is None:
            assert not any("faster than the OS placement (median" in line for line in result.lines)
    assert winners >= 1  # the boundary was reached, so the rule was exercised


def test_a_random_winner_is_reported_without_a_cpu_list(tmp_path):
    """Found by a flaky run: when `random` (a new placement every run) came out significantly
    faster, auto had no plan to print and raised AttributeError."""
    program = FakeProgram({"os": 1.0, "other": 0.5}, 0.01)  # every random placement beats the OS
    result = run_auto(["/bin/true"], load_topology(None), db_path=str(tmp_path / "r.db"), progress=False,
                      say=lambda text: None, tracer=lambda argv, path: contending_pairs(), runner=program,
                      policies=["random"])
    assert result.winner is not None and result.winner.name == "random"
    assert result.lines[-1] == ("  pinwise run --policy random -- /bin/true   (a new random placement every run; "
                                "no fixed CPU list won)")


def test_adapt_is_a_candidate_benched_under_its_name_and_reused_as_run_adapt(tmp_path):
    """--policies takes adapt as bench does (auto refused it as an unknown policy): the candidates
    line says how it places, its runs are the database's under its name, and as the winner it is
    reused as `pinwise run --adapt`, not as a CPU list or a random placement."""
    from dataclasses import replace

    from pinwise.auto import verdict_lines

    said = []
    program = FakeProgram({"os": 1.0, "other": 0.5}, 0.01)  # the fake runs adapt as the OS (no plan): compact wins
    result = run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "auto.db"), progress=False, say=said.append,
                      tracer=lambda argv, path: contending_pairs(), runner=program, policies=["compact", "adapt"])
    assert result.candidates == ["os", "compact", "adapt"] and result.plans["adapt"] is None
    assert said[3] == ("2/3 candidates: os (baseline: no pinning), compact CPUs 0,1,0,1,0, adapt (placed while each "
                       "run runs)")
    assert len(sample(tmp_path, "adapt")) == len(sample(tmp_path, "os")) == result.runs
    assert result.winner is not None and result.winner.name == "compact"
    won = replace(result, winner=replace(result.winner, name="adapt"))
    assert verdict_lines(won, PROGRAM)[-2:] == [
        "reuse it:", "  pinwise run --adapt -- /bin/true   (placed while it runs; for a process already running: "
        "pinwise pin --pid PID --adapt)"]


def test_auto_benches_adapt_on_a_real_program(tmp_path):
    """`pinwise auto --policies adapt` as a user types it: every adapt run ran under the sampler and
    is recorded as adapt, beside the OS's."""
    db_path = tmp_path / "auto.db"
    command = workload_command("pairs", threads=4, iterations=200, shared_ratio=1.0)
    result = run_pinwise("auto", "--db", str(db_path), "--policies", "adapt", "--budget", "0.5", "--time-regex",
                         TIME_REGEX, "--", *command, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "adapt (placed while each run runs)" in result.stderr, result.stderr
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    rows = [dict(r) for r in connection.execute("SELECT * FROM runs WHERE warmup = 0")]
    connection.close()
    adapted = [r for r in rows if r["policy"] == "adapt"]
    assert adapted and len(adapted) == sum(r["policy"] == "os" for r in rows), rows
    assert all(r["placement"] == "adapt" and r["failure"] is None for r in adapted), adapted


def test_a_placement_of_the_users_is_benched_beside_the_candidates(tmp_path):
    """--placement NAME=SPEC as bench takes it (an expression here); a bad one is refused before
    the trace."""
    program = FakeProgram({"os": 1.0, "1,0,0,1,1": 0.6, "0,0,0,1,1": 1.0, "other": 1.3}, 0.05)
    traced = []
    result = run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "auto.db"), progress=False, say=lambda _: None,
                      tracer=lambda argv, path: traced.append(argv) or contending_pairs(), runner=program,
                      placements=["mine=S0:1@S0:0"])
    assert "mine" in [p.name for p in result.summary.policies]
    assert result.summary.result("mine").placement == "1,0"
    traced.clear()
    with pytest.raises(Exception, match="affinity domain 'S7' does not exist"):
        run_auto(PROGRAM, TOPOLOGY, db_path=str(tmp_path / "bad.db"), progress=False, say=lambda _: None,
                 tracer=lambda argv, path: traced.append(argv) or contending_pairs(), runner=program,
                 placements=["bad=S7:0"])
    assert traced == []  # refused before tracing


def test_mirror_images_on_identical_cores_are_benched_once(tmp_path):
    """Main (thread 0) idle, threads 1 and 2 a contending pair: locality puts the pair on one core
    (1,0,1: main alone on CPU 1), compact 0,1,0. On two identical cores that is one placement
    mirrored: benched once, reported under every name, one verdict for all of them."""
    matrix = np.array([[0, 30, 30], [30, 0, 1e6], [30, 1e6, 0]], dtype=float)
    comm = CommMatrix(matrix, np.ones(3), np.array([1e3, 1e7, 1e7]))
    program = FakeProgram({"os": 1.0, "other": 1.0}, 0.05)
    result, said = auto(program, tmp_path, comm)
    recommended = result.analysis.policy  # a locality policy, whose plan here is 1,0,1
    assert result.plans["compact"].cpulist() == "0,1,0"
    assert {"scatter", "locality", recommended} <= set(result.aliases["compact"])
    assert "locality" not in result.candidates and recommended not in result.candidates
    assert "0,1,0" in program.calls and "1,0,1" not in program.calls  # the mirror image never ran
    assert said[3].startswith(f"2/3 candidates: os (baseline: no pinning), compact (= "
                              f"{', '.join(result.aliases['compact'])}) CPUs 0,1,0, ")
    row = result.summary.result("locality")
    assert row is result.summary.result("compact") and row.label.startswith("compact = scatter = ")
    assert len({p.name for p in result.summary.policies}) == len(result.candidates)  # one verdict each
    assert "runs already recorded" not in " ".join(said)  # auto's own later looks are no resume


def test_a_program_that_fails_every_run_gets_no_verdict(tmp_path):
    """The issue's case: the program exits 1 for its input. auto stops after the first block and
    says why, with the program's last line on standard error; it never concludes "do not pin"."""
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/sh\necho 'reading the input' >&2\necho 'fails: no such file: input.dat' >&2\nexit 1\n")
    script.chmod(0o755)
    result = run_pinwise("auto", "--db", str(tmp_path / "auto.db"), "--policies", "compact", "--", str(script),
                         timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("pinwise: error: no verdict: every run of the first block failed (every placement: "
                            "exit status 1: fails: no such file: input.dat)"), error
    assert "do not pin" not in result.stdout + result.stderr
    connection = sqlite3.connect(tmp_path / "auto.db")
    assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2  # one block: os and compact
    connection.close()


def test_the_os_placement_alone_is_refused_before_the_trace(tmp_path):
    """--policies os (under any of its names) leaves nothing to compare: refused at once, nothing
    traced, no database written."""
    result = run_pinwise("auto", "--db", str(tmp_path / "auto.db"), "--policies", "os,OS", "--", "sleep", "60",
                         timeout=60)
    assert_clean_failure(result, "--policies os,OS leaves nothing to compare with the OS placement")
    assert not (tmp_path / "auto.db").exists()


def test_a_baseline_that_never_ran_well_is_no_verdict(tmp_path):
    """The OS placement fails every run while the candidates run: nothing to compare them with."""
    from pinwise.bench.db import Run

    program = FakeProgram({"os": 1.0, "other": 0.5}, 0.05)

    def runner(argv, plan, pattern, timeout, counters):
        run = program(argv, plan, pattern, timeout, counters)
        if plan is None:
            from dataclasses import replace
            return replace(run, exit_status=3, failure="exit status 3: out of memory")
        return run

    result, _ = auto(runner, tmp_path)
    assert result.winner is None and result.runs == LOOKS[0]  # no look can change that: it stops at the first
    assert result.lines[-1] == (f"no verdict: the OS placement, the baseline, ran well 0 times in {LOOKS[0]} "
                                f"({LOOKS[0]} x exit status 3: out of memory): nothing to compare the candidates with")
    assert isinstance(runner(PROGRAM, None, None, None, None), Run)


def test_a_weak_reading_benches_what_it_reads_across_its_threshold(tmp_path):
    """0.62% of accesses communicate, near the 1% that separates none from master/reduction:
    auto benches balance (master/reduction's policy) and locality beside scatter."""
    matrix = np.zeros((4, 4))
    matrix[0, 1:] = matrix[1:, 0] = 100
    comm = CommMatrix(matrix, np.full(4, 1.2e4), np.full(4, 1e6))
    result, said = auto(FakeProgram({"os": 1.0, "other": 1.0}, 0.05), tmp_path, comm)
    assert result.analysis.pattern == "none" and result.analysis.alternatives == (("master/reduction", "balance"),)
    benched = set(result.candidates) | {n for same in result.aliases.values() for n in same}
    assert {"scatter", "balance", "locality"} <= benched
    assert said[2].startswith("    recommended: scatter (threads hardly communicate") and "weak: 0.62%" in said[2]


def test_a_trace_that_missed_work_benches_only_what_needs_no_matrix(tmp_path):
    """A trace that missed part of the program's work (here: its forked workers) points at no
    policy: auto says so and benches the placements that need no matrix; its simulation refuses."""
    from dataclasses import replace

    from pinwise import PinwiseError
    from pinwise.auto import simulated_auto

    missed = "the tracer follows prog's first process only, and natively 2 forked processes ran 2 threads"
    comm = contending_pairs()
    comm = replace(comm, info=replace(comm.info, unseen=missed))
    result, said = auto(FakeProgram({"os": 1.0, "other": 1.0}, 0.05), tmp_path, comm)
    assert result.candidates == ["os", "compact"] and result.aliases == {"compact": ["scatter"]}
    assert f"    no recommendation from the trace: {missed}; benching the placements that need no matrix" in said
    with pytest.raises(PinwiseError, match="placements cannot be ranked by replaying this trace: the tracer follows"):
        simulated_auto(PROGRAM, TOPOLOGY, say=lambda _: None, tracer=lambda argv, path: comm)


def test_a_long_run_sent_to_valgrind_is_told_how_long_the_trace_may_take():
    from pinwise.auto import _valgrind_time

    assert _valgrind_time(None) == _valgrind_time(0.4) == ""  # a short wait needs no warning
    assert _valgrind_time(5.35) == (" (Valgrind runs a program 5-50x slower: 27s to 4.5m for this run; --trace-args "
                                    "traces a smaller input)")
    assert "3.3m to 33m" in _valgrind_time(40) and "33m to 5.6h" in _valgrind_time(400)
    # given a smaller input with --trace-args already, it is not suggested again
    assert _valgrind_time(5.35, smaller_input=True) == " (Valgrind runs a program 5-50x slower: 27s to 4.5m for this run)"
    assert "1m to 10m" in _valgrind_time(11.995)  # rounded before the unit is chosen: not "60s to 10m"


@pytest.mark.parametrize("candidates", [1, 2, 4, 5, 15, 16])
def test_the_fewest_runs_a_budget_leaves_are_the_fewest_that_can_be_significant(candidates):
    """Brute force against scipy: n runs each of two placements that never overlap give the smallest
    one-sided Mann-Whitney p there is; with fewest_runs it passes the corrected level, with one less
    it cannot."""
    from scipy.stats import mannwhitneyu

    alpha = 0.05 / (len(LOOKS) * candidates)
    n = fewest_runs(alpha)
    smallest = [mannwhitneyu(range(k), range(k, 2 * k), alternative="less", method="exact").pvalue for k in (n - 1, n)]
    assert smallest[0] >= alpha > smallest[1]
    assert n == (4 if candidates == 1 else 5 if candidates <= 4 else 6 if candidates <= 15 else 7)
