"""Capability 14: placing the threads while the program runs (pinwise run --adapt, pin --pid
--adapt): where the threads ran after each move, read back from /proc while it runs, the phase
change named in the log, a program's own pinning left alone, nothing left behind. How fast
anything ran is the benchmark's (benchmarks/adapt.py), never a test's."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PINWISE, assert_clean_failure, compile_program, eventually, run_pinwise

from pinwise.adapt import PLACED
from pinwise.adapt.decide import Move
from pinwise.adapt.run import AdaptResult, summary_lines
from pinwise.pinning.launcher import NATIVE_DIR
from pinwise.sample import SAMPLER

PATTERNS = str(NATIVE_DIR / "bin" / "patterns")
pytestmark = pytest.mark.skipif(not SAMPLER.exists() or len(os.sched_getaffinity(0)) < 2,
                                reason="the sampler was not built (libcapstone-dev), or one CPU: nothing to move")


def _records(log) -> list[dict]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return found


def _affinity(tid: int) -> set[int] | None:
    try:
        return set(os.sched_getaffinity(tid))
    except OSError:
        return None


def test_threads_follow_the_phases_of_the_program(tmp_path, build_dir):
    """Pairs that swap partners half way: a placement for each phase, each thread on the CPU of
    the last move (read back while it runs), partners of the phase together, and the log names
    the phase change within two intervals of when the program made it. The threads start with
    phase 1's partners apart (-A), as the OS starts them only by chance: partners it started
    together leave nothing to move in phase 1 (one CI run in many did so)."""
    exe = compile_program("phase_pairs.c", build_dir)
    log = tmp_path / "adapt.jsonl"
    process = subprocess.Popen([PINWISE, "run", "--adapt", "--log", str(log), "--", str(exe), "-A", "4", "150000000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checked = []
    while process.poll() is None:
        moves = [r for r in _records(log) if r.get("decision") in PLACED]
        for move in moves[len(checked):]:
            checked.append((move, {tid: _affinity(tid) for tid in move["tids"] if tid > 0}))
        time.sleep(0.05)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "sum 1200000000" in out
    assert len(checked) >= 2, err
    for move, affinities in checked:  # every thread still alive runs where the move put it
        for k, tid in enumerate(move["tids"]):
            if tid > 0 and affinities.get(tid) is not None:
                assert affinities[tid] == {move["cpus"][k]}, (move, affinities)
    # the last move of the four threads (not one made as the program ends, when threads have)
    first, last = checked[0][0]["cpus"], [m["cpus"] for m, _ in checked if min(m["tids"]) > 0][-1]
    assert first[0] == first[1] and first[2] == first[3] and first[0] != first[2]  # pairs {0,1} {2,3}
    assert last[0] == last[2] and last[1] == last[3] and last[0] != last[1]        # pairs {0,2} {1,3}
    began = int(next(line for line in err.splitlines() if line.startswith("phase 2 began at")).split()[4])
    phases = [r for r in _records(log) if r.get("event") == "phase"]
    second = next(r for r in phases if r["pattern"] != phases[0]["pattern"])
    assert abs(second["since_monotonic_ns"] - began) <= 2 * 0.2e9 + 0.05e9, (second, began)
    assert "phases seen: " in err and "placement(s) applied" in err
    # what it cost: the sampler's CPU time and pinwise's own, each read, not assumed
    cost = re.search(r"the sampler used (\d+\.\d\d) s of CPU, pinwise (\d+\.\d\d) s", err)
    assert cost and float(cost.group(2)) > 0, err


def test_a_program_with_nothing_to_gain_is_moved_once_at_most(tmp_path):
    log = tmp_path / "private.jsonl"
    result = run_pinwise("run", "--adapt", "--log", str(log), "--", PATTERNS, "private", "-n", "4", "-i", "400000",
                         timeout=300)
    assert result.returncode == 0, result.stderr
    assert len([r for r in _records(log) if r.get("decision") in PLACED]) <= 1
    # no thread touches another's data: quiet sampling, slower after 300 ms without a trap (a run of
    # 1.3 s on one guest: long enough on a host twice as fast)
    assert "sampling 4x to 16x less often" in result.stderr, result.stderr


def test_a_program_that_makes_thousands_of_threads_is_followed_up_to_a_bound_then_left_to_run(tmp_path):
    """4,001 threads in rounds of four (a thread per task): its windows are read as matrices of every thread made,
    so past MAX_THREADS_FOLLOWED an adaptive run stops, says so, and tells the sampler to stop
    sampling; the program runs on to its end, its output and exit status its own (12,001 threads
    took 25 s under --adapt against 1.2-1.5 s alone)."""
    from pinwise.adapt.limits import MAX_THREADS_FOLLOWED

    log = tmp_path / "many.jsonl"
    result = run_pinwise("run", "--adapt", "--log", str(log), "--", str(NATIVE_DIR / "bin" / "rounds"), "4", "1000",
                         "20000", timeout=300)
    assert result.returncode == 0 and "1000 rounds of 4 workers" in result.stdout, result.stderr
    stopped = [r for r in _records(log) if r.get("event") == "stopped"]
    assert len(stopped) == 1 and stopped[0]["threads"] > MAX_THREADS_FOLLOWED, stopped
    assert all(r["t"] <= stopped[0]["t"] for r in _records(log) if "decision" in r)
    assert f"more than --adapt follows ({MAX_THREADS_FOLLOWED:,}); from then on the threads ran where they were" \
        in result.stderr, result.stderr


def test_the_summary_says_whose_placement_held_while_the_watchpoints_were_spared():
    """A run that placed nothing spared the watchpoints while the OS's placement held, not
    pinwise's: the summary names whose."""
    spared = AdaptResult(0, steady_s=2.5, windows=1, ticks=4)
    assert summary_lines(spared)[0].startswith("adapted: 1 judgment of 4 windows in ")
    assert summary_lines(spared)[0].endswith("the sampler used 0.00 s of CPU, pinwise 0.00 s")
    assert "for 2.5 s, while the OS's placement held (no move would gain)" in "\n".join(summary_lines(spared))
    spared.moves.append(Move(0.1, "locality", (0, 0, 1, 1), 2, 10.0, 0.0))
    assert "for 2.5 s, while the placement held" in "\n".join(summary_lines(spared))
    spared.moves.append(Move(0.5, "locality", (0, 1, -1, 1), 1, 10.0, 0.0))  # thread 2 ended: not placed
    assert "  0.5 s: locality, CPUs 0,1,-,1 (1 moved; cost 10 -> 0)" in summary_lines(spared)


def test_work_in_child_processes_is_named_not_judged_as_nothing_to_gain():
    """A shell that starts the threaded program: its threads are in a child process, which
    --adapt does not place; the summary says so instead of a run that found nothing to move."""
    result = run_pinwise("run", "--adapt", "--", "sh", "-c", f"{PATTERNS} pairs -n 4 -i 100000; exit 4", timeout=120)
    assert result.returncode == 4 and "Time in seconds = " in result.stdout, result.stderr
    warning = next(line for line in result.stderr.splitlines() if line.startswith("warning: "))
    assert re.fullmatch(r"warning: (5[0-9]|[6-9][0-9]|100)% of the samples were in 1 child process\(es\), whose "
                        r"threads --adapt does not place: run it on the program that creates the threads \(not a "
                        r"shell or launcher around it\)", warning), warning


def test_a_programs_own_pinning_is_left_alone(tmp_path, build_dir):
    """The oracle pins its threads itself (and again when the phase changes): pinwise leaves every
    such thread alone from the first time it finds it so, and never moves it again. (A thread it
    placed in the instant before the program pinned it is the program's afterwards.)"""
    exe = compile_program("phase_pairs.c", build_dir)
    log = tmp_path / "hand.jsonl"
    result = run_pinwise("run", "--adapt", "--log", str(log), "--", str(exe), "-H", "4", "200000000", timeout=300)
    assert result.returncode == 0, result.stderr
    records = _records(log)
    alone = [i for i, r in enumerate(records) if r.get("decision") == "left alone"]
    assert len({records[i]["thread"] for i in alone}) == 4, result.stderr
    assert not [r for r in records[alone[-1]:] if r.get("decision") in PLACED]
    assert len(re.findall(r"^  thread \d: its affinity \[\d\] was (narrowed before --adapt placed it \(by the "
                          r"program, taskset or an earlier pinwise pin\)|set by the program or taskset after "
                          r"--adapt placed it): left alone$", result.stderr, re.M)) == 4, result.stderr


def _second_round(stdout: str, when: str) -> dict[int, set[int]]:
    """pair_rounds.c's report: the CPUs each worker of the second round had at ``when`` (start, later)."""
    found = re.findall(r"^worker 2 (\d) start (\S+) later (\S+)$", stdout, re.M)
    return {int(j): {int(c) for c in (start if when == "start" else later).split(",")} for j, start, later in found}


def _template(records: list[dict], allowed: set[int]) -> dict[int, set[int]]:
    """Where the last move made while the first round ran (threads 0-4) put its worker j."""
    first = [r for r in records if r.get("decision") in PLACED and len(r["tids"]) <= 5]
    assert first, records
    last = first[-1]
    return {j: {last["cpus"][1 + j]} if last["tids"][1 + j] > 0 and last["cpus"][1 + j] >= 0 else allowed
            for j in range(4)}


def test_threads_made_after_a_move_start_on_their_slot_not_on_their_creators_cpu(tmp_path, build_dir):
    """A thread inherits its creator's affinity: once pinwise had pinned the main thread, each
    worker it made next started on its one CPU and was taken for the program's own pinning, left
    there for the rest of the run. The preload library starts each worker of the second round
    where the last move put the first round's worker of its position (pinwise.adapt.newcomers),
    and they join the adaptation."""
    exe = compile_program("pair_rounds.c", build_dir)
    log = tmp_path / "rounds.jsonl"
    result = run_pinwise("run", "--adapt", "--log", str(log), "--", str(exe), "2", "0.3", "0.6", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "left alone" not in result.stderr
    allowed = set(os.sched_getaffinity(0))
    template = _template(_records(log), allowed)
    assert _second_round(result.stdout, "start") == template, result.stderr
    slotted = sum(cpus != allowed for cpus in template.values())
    assert re.search(rf"^  {slotted} thread\(s\) made after a move started on their slots$", result.stderr, re.M) \
        or slotted == 0, result.stderr


def test_threads_made_after_a_move_in_a_process_attached_to_are_placed_at_the_next_window(tmp_path, build_dir):
    """Attached (no preload library), a new thread that inherited a CPU pinwise pinned its creator
    to is moved to its slot at the next window: half a second in, each worker of the second round
    is where pinwise put it (its slot, or a later move), none left alone on its creator's CPU."""
    exe = compile_program("pair_rounds.c", build_dir)
    program = subprocess.Popen([str(exe), "3", "0.3", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = tmp_path / "attached.jsonl"
        result = _adapt_attached(program, 5, "5s", log)
        out, _ = program.communicate(timeout=60)
    finally:
        program.kill()
        program.wait()
    assert "left alone" not in result.stderr
    _second_round_placed_by_pinwise(out, _records(log))


def _adapt_attached(program: subprocess.Popen, threads: int, duration: str, log: Path):
    """``pin --pid --adapt`` on ``program`` for ``duration``, once it runs ``threads`` threads."""
    assert eventually(lambda: len(os.listdir(f"/proc/{program.pid}/task")) == threads, timeout=30)
    result = run_pinwise("pin", "--pid", str(program.pid), "--adapt", "--duration", duration, "--log", str(log),
                         timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def _second_round_placed_by_pinwise(out: str, records: list[dict]) -> None:
    """Half a second in, each worker of pair_rounds.c's second round is where pinwise put it: its
    slot from the first round's last move, the CPUs the log's `new threads` record says pinwise gave
    it at its first window (the template the adapter holds then, which a release at the round's end
    remakes too), or a later move's CPU."""
    template = _template(records, set(os.sched_getaffinity(0)))
    later = _second_round(out, "later")
    assert sorted(later) == [0, 1, 2, 3], out
    moves = [{k: r[k] for k in ("t", "decision", "event", "cpus", "tids", "threads") if k in r}
             for r in records if r.get("decision") in (*PLACED, "released") or r.get("event") == "new threads"]
    for j, cpus in later.items():
        placed = [{r["cpus"][5 + j]} for r in records if r.get("decision") in PLACED and len(r["tids"]) > 5 + j]
        placed += [set(given) for r in records if r.get("event") == "new threads"
                   for k, given in zip(r["threads"], r["cpus"]) if k == 5 + j]
        assert cpus == template[j] or cpus in placed, (j, cpus, template, moves)


def test_threads_made_after_a_move_in_a_statically_linked_program_are_placed_at_the_next_window(tmp_path, build_dir):
    """A statically linked program loads no preload library: its new threads are placed from
    outside, as in a process pinwise attached to."""
    try:
        exe = compile_program("pair_rounds.c", build_dir, "-static", name="pair_rounds_static")
    except subprocess.CalledProcessError:
        pytest.skip("no static C library to link with")
    log = tmp_path / "static.jsonl"
    result = run_pinwise("run", "--adapt", "--log", str(log), "--", str(exe), "2", "0.3", "1", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "left alone" not in result.stderr
    _second_round_placed_by_pinwise(result.stdout, _records(log))


def test_ctrl_c_ends_the_program_and_leaves_nothing(tmp_path, build_dir):
    exe = compile_program("phase_pairs.c", build_dir)
    process = subprocess.Popen([PINWISE, "run", "--adapt", "--", str(exe), "4", "2000000000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert eventually(lambda: _running(f"^{exe} 4 2000000000"), timeout=30)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and "Traceback" not in err
    assert eventually(lambda: not _running(f"^{exe} 4 2000000000"))
    assert eventually(lambda: not _running(f"^{SAMPLER}"))


def test_one_ctrl_c_reaches_the_program_once(build_dir):
    """count_stops exits with the number of stop signals it got: pinwise passes Ctrl-C to the
    program's process group, and the sampler passed it on again."""
    exe = compile_program("count_stops.c", build_dir)
    process = subprocess.Popen([PINWISE, "run", "--adapt", "--", str(exe), "adapted"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert eventually(lambda: _running(f"^{exe} adapted"), timeout=30)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err  # the program's status, as it would end alone


def test_a_program_killed_by_a_signal_is_said_so(build_dir):
    crash = compile_program("crash.c", build_dir)
    result = run_pinwise("run", "--adapt", "--", str(crash), timeout=120)
    assert result.returncode == 128 + signal.SIGSEGV, result.stderr
    assert f"pinwise: error: {crash} was killed by SIGSEGV" in result.stderr.splitlines(), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["run", "--adapt"], ["run", "--verify", "-p", "os"]])
def test_nohup_keeps_the_program_through_a_hangup(command):
    """Under nohup (SIGHUP ignored) a hangup stops neither pinwise nor the program, which inherits
    the ignored signal as it would from nohup alone: pinwise put its own handler over it, and the
    program got SIGHUP's default (death)."""
    program = "kill -HUP $$; sleep 0.8; echo survived"
    process = subprocess.Popen([PINWISE, *command, "--", "sh", "-c", program], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert eventually(lambda: _running("^sleep 0.8"), timeout=30)
    process.send_signal(signal.SIGHUP)  # the session's hangup, to pinwise too
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0 and "survived" in out, (process.returncode, out, err)


def _running(pattern: str) -> bool:
    found = subprocess.run(["pgrep", "-fa", pattern], capture_output=True, text=True).stdout.splitlines()
    return any("pgrep" not in line for line in found)


def test_a_running_process_is_adapted_then_left_running(tmp_path, build_dir):
    exe = compile_program("phase_pairs.c", build_dir)
    # far longer than the 3 s attached on any host (400 M rounds a phase ended within them on a
    # fast host); killed at the end
    program = subprocess.Popen([str(exe), "4", "4000000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        log = tmp_path / "pid.jsonl"
        result = _adapt_attached(program, 4, "3s", log)
        assert program.poll() is None  # it runs on
        moves = [r for r in _records(log) if r.get("decision") in PLACED]
        assert moves, result.stderr
        last = moves[-1]
        for k, tid in enumerate(last["tids"]):
            if tid > 0:
                assert _affinity(tid) == {last["cpus"][k]}  # left where the last move put it
    finally:
        program.kill()
        program.wait()


def test_threads_an_earlier_pin_narrowed_are_left_alone_and_the_note_s_taskset_hands_them_back(tmp_path):
    """`pin --pid` then `pin --pid --adapt`: every thread's affinity was narrowed before the attach,
    so --adapt leaves each alone, naming an earlier pinwise pin among the causes, and its note's
    taskset line, run as printed, gives them back every CPU, after which --adapt leaves none alone."""
    program = subprocess.Popen([PATTERNS, "pairs", "-n", "4", "-i", "4000000000"], stdout=subprocess.DEVNULL)
    try:
        assert eventually(lambda: len(os.listdir(f"/proc/{program.pid}/task")) == 4, timeout=30)
        pinned = run_pinwise("pin", "--pid", str(program.pid), "-p", "compact", timeout=60)
        assert pinned.returncode == 0, pinned.stderr
        result = _adapt_attached(program, 4, "1s", tmp_path / "first.jsonl")
        assert result.stderr.count("was narrowed before --adapt placed it (by the program, taskset or an earlier "
                                   "pinwise pin): left alone") == 4, result.stderr
        note = next(line for line in result.stderr.splitlines() if line.startswith("pinwise: note: threads pinned"))
        command = note.split(": ")[-1]
        assert command.startswith("taskset -a -p -c "), note
        subprocess.run(shlex.split(command), check=True, capture_output=True)
        allowed = set(os.sched_getaffinity(0))
        assert all(_affinity(int(tid)) == allowed for tid in os.listdir(f"/proc/{program.pid}/task"))
        result = _adapt_attached(program, 4, "1s", tmp_path / "second.jsonl")
        assert "left alone" not in result.stderr and "threads pinned" not in result.stderr, result.stderr
    finally:
        program.kill()
        program.wait()


def test_adapt_options_are_checked(tmp_path):
    assert_clean_failure(run_pinwise("run", "--adapt", "--cpus", "0,1", "--", "true"), "--adapt", "--cpus")
    assert_clean_failure(run_pinwise("run", "--log", str(tmp_path / "l"), "--cpus", "0", "--", "true"), "--adapt")
    assert_clean_failure(run_pinwise("run", "--adapt", "--duration", "1s", "--", "true"), "--duration")
    assert_clean_failure(run_pinwise("run", "--adapt", "--policy", "nonsense", "--", "true"), "nonsense")
    # a log that cannot be made: refused before the program starts
    assert_clean_failure(run_pinwise("run", "--adapt", "--log", "/sys/kernel/pinwise.jsonl", "--", "true"),
                         "--log: output file '/sys/kernel/pinwise.jsonl': no file can be made in '/sys/kernel'")


def test_a_log_that_fails_mid_run_ends_the_log_not_the_program():
    """--log /dev/full: the first line fails to write (no space left); pinwise says so once and
    goes on placing, and the program ends as it would alone, its output and status its own."""
    result = run_pinwise("run", "--adapt", "--log", "/dev/full", "--", PATTERNS, "pairs", "-n", "4", "-i", "200000",
                         timeout=120)
    assert result.returncode == 0 and "Time in seconds = " in result.stdout, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "--log /dev/full" in line]
    assert warnings == ["pinwise: warning: --log /dev/full: No space left on device; the log stops here, the placing "
                        "goes on"], result.stderr
    assert "Traceback" not in result.stderr


def _window(end_s: float, tids: list[int], hits: dict[tuple[int, int], float], idle: tuple[int, ...] = (),
            samples: float = 100.0):
    """A window record in which every thread but the ``idle`` ones made ``samples`` address samples,
    all watchable, and each ordered pair (a, b) of ``hits`` saw that many of a's samples touched by
    b (all armed)."""
    import numpy as np

    from pinwise.adapt import Window

    t = len(tids)
    pairs = [(a, b, samples, samples, float(hits.get((a, b), 0.0))) for a in range(t) for b in range(t) if a != b]
    accesses = np.array([0.0 if k in idle else samples for k in range(t)])
    return Window(end_s, tids, accesses, np.maximum(accesses, 1.0), pairs)


def _rationed(end_s: float, tids: list[int], pairs: list[tuple[int, int]], nth: int):
    """The ``nth`` tick (a quarter interval) of a sampler whose token bucket arms few watchpoints:
    every thread made 25 address samples, each ordered pair of ``pairs`` was offered all of them
    and armed 16 of them in the even ticks, whose hits came in the tick after (their traps a moment
    later): every watched sample was touched by the partner."""
    import numpy as np

    from pinwise.adapt import Window

    rows = [(a, b, 25.0, 16.0 if nth % 2 == 0 else 0.0, 16.0 if nth % 2 else 0.0) for a, b in pairs]
    return Window(end_s, tids, np.full(len(tids), 25.0), np.full(len(tids), 25.0), rows)


@pytest.mark.parametrize("rationed", [False, True])
def test_contending_pairs_share_a_cpu_until_they_stop_contending(rationed):
    """A pair that spends most of its accesses on one line (two threads hammering one counter),
    on a machine with a core for each: the pair is put on one CPU, where its threads take turns
    instead of bouncing the line (read back from /proc); when they stop contending, they are given
    back to the OS. Threads here are processes that sleep, each last run on CPU k, where the OS
    left them (sched_setaffinity treats a thread id and a process id alike). ``rationed``: the
    watchpoints armed in every other tick, each hit in the tick after its arm (the token bucket arms
    a pair a few times an interval), which summed tick by tick showed no event at all."""
    from pinwise.adapt import Adapter
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")  # CPUs 0 and 1, which this machine has
    sleepers = [subprocess.Popen(["taskset", "-c", str(k), "sleep", "60"]) for k in range(2)]
    try:
        tids = [p.pid for p in sleepers]
        assert eventually(lambda: all(_asleep_in_sleep(tid) for tid in tids))
        for tid in tids:  # asleep where taskset put them, free to run anywhere: as the OS places threads
            os.sched_setaffinity(tid, {0, 1})
        contend = {(0, 1): 80, (1, 0): 80}
        said = []
        adapter = Adapter(machine, None, None, say=said.append)
        if rationed:
            for k in range(8):
                adapter.feed(_rationed(0.05 * (k + 1), tids, list(contend), k))
        else:
            for k in range(4):
                adapter.feed(_window(0.2 * (k + 1), tids, contend))
        placed = [_affinity(tid) for tid in tids]
        assert placed[0] == placed[1] and len(placed[0]) == 1, placed
        assert said and "1 contending pair(s) sharing a CPU each" in said[0]
        for k in range(4, 8):  # no line shared any more: the pair would take turns at one CPU
            adapter.feed(_window(0.2 * (k + 1), tids, {}))
        assert _affinity(tids[0]) == _affinity(tids[1]) == {0, 1}
        assert any("given back to the OS" in line for line in said)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_the_held_out_halves_split_the_watched_samples_with_what_became_of_them():
    """Each half of a judgment's events (the held-out check) gets some of a pair's watched samples
    and the traps among them: a pair whose every watchpoint trapped shows it in both halves, and
    the halves add up to the whole. (Halving the arms and dealing only the hits made a pair that
    trapped 10 times in 10 look contended in one half and not in the other.)"""
    import numpy as np

    from pinwise.adapt import Window
    from pinwise.adapt.windows import split_window

    window = Window(1.0, [11, 12, 13], np.array([0.0, 40.0, 40.0]), np.array([1.0, 40.0, 40.0]),
                    [(1, 2, 40.0, 10.0, 10.0), (2, 1, 40.0, 10.0, 4.0), (1, 0, 20.0, 0.0, 1.0), (2, 0, 20.0, 6.0, 0.0)])
    rng = np.random.default_rng(7)
    for _ in range(50):
        halves = split_window(window, rng)
        for k, (a, b, offered, armed, hits) in enumerate(window.pairs):
            parts = [half.pairs[k] for half in halves]
            assert sum(p[3] for p in parts) == armed and sum(p[4] for p in parts) == hits
            assert all(p[4] <= p[3] for p in parts if armed)
            if hits == armed:
                assert all(p[4] == p[3] for p in parts)
        for half in halves:
            d = half.directed()
            if half.pairs[0][3]:
                assert d[1, 2] == pytest.approx(20.0)  # every watched sample of 1 trapped in 2


def _stat(tid: int) -> list[str]:
    return Path(f"/proc/{tid}/stat").read_text().rsplit(")", 1)[1].split()


def _asleep_in_sleep(tid: int) -> bool:
    return Path(f"/proc/{tid}/comm").read_text().strip() == "sleep" and _stat(tid)[0] == "S"


def _last_cpu(tid: int) -> int:
    return int(_stat(tid)[36])


@pytest.mark.parametrize("rehearsed", [False, True])
def test_threads_the_os_placed_well_by_chance_are_pinned_where_they_run(rehearsed):
    """Pairs the OS happens to run together (its placement is chance, and it may part them at any
    moment) are pinned where they run, none moved; threads that all talk alike, which no placement
    helps, are left to the OS. Threads here are processes asleep where taskset put them. The
    rehearsal pinwise run --adapt makes before the program starts changes none of it."""
    from pinwise.adapt import Adapter
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")  # CPUs 0 and 1, which this machine has
    sleepers = [subprocess.Popen(["taskset", "-c", str(cpu), "sleep", "60"]) for cpu in (0, 0, 1, 1)]
    try:
        tids = [p.pid for p in sleepers]
        # asleep (not only exec'd: a runnable one given both CPUs may be moved before it sleeps),
        # then free to run anywhere, where the OS left them: 0, 0, 1, 1
        assert eventually(lambda: all(_asleep_in_sleep(tid) for tid in tids))
        for tid in tids:
            os.sched_setaffinity(tid, {0, 1})
        assert [_last_cpu(tid) for tid in tids] == [0, 0, 1, 1]
        flat = {(a, b): 30 for a in range(4) for b in range(4) if a != b}
        said = []
        adapter = Adapter(machine, None, None, say=said.append)
        if rehearsed:
            adapter.rehearse()
            assert not said and not adapter.moves and not adapter.windows and not adapter.phases
        for k in range(3):
            adapter.feed(_window(0.2 * (k + 1), tids, flat))
        assert not said and [_affinity(tid) for tid in tids] == [{0, 1}] * 4
        pairs = {(0, 1): 30, (1, 0): 30, (2, 3): 30, (3, 2): 30}  # under half their accesses: not contending
        for k in range(3, 6):
            adapter.feed(_window(0.2 * (k + 1), tids, pairs))
        assert [_affinity(tid) for tid in tids] == [{0}, {0}, {1}, {1}], said
        assert len(said) == 1 and "0 thread(s) moved, 4 pinned where the OS had them" in said[0], said
        assert [m.moved for m in adapter.moves] == [0]
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_contending_pairs_are_every_busy_thread_with_a_partner():
    """A creator waiting in join has no say; partners must carry most of each other's
    communication and most of each other's accesses."""
    from pinwise.adapt import contending_pairs

    tids = [1, 2, 3]
    window = _window(0, tids, {(1, 2): 80, (2, 1): 80}, idle=(0,))
    assert contending_pairs(window.directed(), window.accesses, [0, 1, 2]) == [(1, 2)]
    window = _window(0, tids, {(1, 2): 20, (2, 1): 20}, idle=(0,))  # a fifth of their accesses
    assert contending_pairs(window.directed(), window.accesses, [0, 1, 2]) is None
    window = _window(0, [1, 2, 3, 4], {(0, 1): 80, (1, 0): 80, (2, 3): 40, (3, 2): 40, (2, 0): 40, (3, 1): 40})
    assert contending_pairs(window.directed(), window.accesses, [0, 1, 2, 3]) is None  # 2 and 3 split


class _OnPaper:
    """The OS side of an :class:`~pinwise.adapt.Adapter` kept in a dictionary: thread k runs where
    ``cpus[k]`` says and a pinning moves it there, so that a decision on a machine this one is not
    (four cores) is checked by where it puts the threads."""

    def __init__(self, cpus: list[int]):
        self.cpus = list(cpus)

    def adapter(self, topology, said: list[str]):
        from pinwise.adapt import Adapter

        paper = self

        class Adapter_(Adapter):
            def _where_now(self, tids):
                return list(paper.cpus)

            def _own_pinning(self, k, tid):
                return self.pinned.get(k, set(self.allowed))

            def _apply(self, tids, cpus):
                moved = sum(cpu is not None and cpu != paper.cpus[k] for k, cpu in enumerate(cpus))
                for k, cpu in enumerate(cpus):
                    if cpu is not None:
                        paper.cpus[k] = cpu
                        self.pinned[k] = {cpu}
                return moved, len(cpus)

        return Adapter_(topology, None, None, say=said.append)


def test_pairs_sharing_a_cpu_that_swap_partners_are_moved_in_the_first_window_that_shows_it():
    """Contending pairs pinwise put on one CPU each (four threads on two of four cores: crowded,
    but by pinwise's own choice) that swap partners: the new partners apart cost hops, at a
    fraction of which the new placement puts them, so the first window of the new phase moves
    them, not the one after (the phase lasts as long as the old one; each window it waits runs it
    at the wrong placement)."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:4 pu:1")
    paper, said = _OnPaper([0, 1, 2, 3]), []
    adapter = paper.adapter(machine, said)
    tids = [101, 102, 103, 104]
    first = {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}
    adapter.feed(_window(0.2, tids, first))
    assert paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3], said
    adapter.feed(_window(0.4, tids, first))
    assert len(adapter.moves) == 1
    swapped = {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}
    adapter.feed(_window(0.6, tids, swapped))
    assert len(adapter.moves) == 2, said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3], said


def test_a_judgment_that_read_the_new_phase_with_the_old_one_does_not_hide_the_change():
    """A due judgment whose own ticks hold few events (the watchpoint budget a quarter while the
    placement held) reads them with the span before it, of the phase that ended, and stays. The
    placement looks stale on the next ticks against what that judgment read, not against its
    ticks alone: those were of the new phase already, and against them nothing looked stale
    until the next due judgment (the two-phase program on 2 CPUs moved 0.39 s after its change,
    0.23 s with this, replayed from the sampler's windows)."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")
    paper, said = _OnPaper([0, 1, 0, 1]), []
    adapter = paper.adapter(machine, said)
    tids = [101, 102, 103, 104]
    at = 0.0
    for _ in range(13):  # pairs 0-1 and 2-3, placed on a CPU each, then judged steady
        at += 0.05
        adapter.feed(_window(at, tids, {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}))
    assert paper.cpus == [0, 0, 1, 1] and len(adapter.moves) == 1, said
    judged, few = len(adapter.windows), {(0, 2): 5, (2, 0): 5, (1, 3): 5, (3, 1): 5}
    for hits in ({}, {}, few, few):  # the new partners' first few traps, up to a due judgment
        at += 0.05
        adapter.feed(_window(at, tids, hits))
    assert len(adapter.windows) == judged + 1 and len(adapter.moves) == 1, said  # one judgment, which stayed
    at += 0.05
    adapter.feed(_window(at, tids, {(0, 2): 20, (2, 0): 20, (1, 3): 20, (3, 1): 20}))
    assert len(adapter.moves) == 2 and paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3], said


def test_threads_placed_where_they_cost_nothing_are_judged_without_a_plan(monkeypatch):
    """A steady program whose placement costs no hops (each contending pair on one CPU): no plan can
    beat it, so its judgments make none (the mapping and the weak-reading check were most of
    pinwise's CPU time, taken from the program on a machine it fills); the pattern is still read,
    and a phase change still moves the threads."""

    import pinwise.mapping
    import pinwise.patterns
    from pinwise.topology import load_topology

    calls = {"plans": 0, "weak": 0}
    plan, weak = pinwise.mapping.compute_mapping, pinwise.patterns.weak_reading

    def counted_plan(*args, **kwargs):
        calls["plans"] += 1
        return plan(*args, **kwargs)

    def counted_weak(*args, **kwargs):
        calls["weak"] += 1
        return weak(*args, **kwargs)

    monkeypatch.setattr(pinwise.mapping, "compute_mapping", counted_plan)
    monkeypatch.setattr(pinwise.patterns, "weak_reading", counted_weak)
    paper, said = _OnPaper([0, 1, 2, 3]), []
    adapter = paper.adapter(load_topology("pack:1 core:4 pu:1"), said)
    adapter.log = io.StringIO()
    tids = [101, 102, 103, 104]
    first = {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}
    adapter.feed(_window(0.2, tids, first))
    assert len(adapter.moves) == 1 and calls["weak"] == 1, said  # asked for the move's record only
    plans = calls["plans"]
    for k in range(2, 6):
        adapter.feed(_window(0.2 * k, tids, first))
    steady = [json.loads(line) for line in adapter.log.getvalue().splitlines()][-4:]
    assert calls["plans"] == plans and calls["weak"] == 1, calls
    assert all(r["decision"] == "stay" and r["cost_now"] == r["cost_new"] == 0 and r["pattern"] == "pairs"
               for r in steady), steady
    adapter.feed(_window(1.2, tids, {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}))
    assert len(adapter.moves) == 2 and calls["plans"] > plans, said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3], said


def test_a_phase_change_is_judged_in_the_first_ticks_that_show_it_and_a_steady_program_once_an_interval():
    """The sampler's windows are a quarter of the interval: a program that keeps its pattern is
    judged once an interval (the deciding costs pinwise's CPU time, which the program may need),
    and the ticks in which the threads that talk are far apart under the current placement are
    judged as soon as they hold enough events, not when the interval is over."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:4 pu:1")
    paper, said = _OnPaper([0, 1, 2, 3]), []
    adapter = paper.adapter(machine, said)
    tids = [101, 102, 103, 104]
    first = {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}  # contending: 80 of 100 accesses
    for k in range(16):  # 0.8 s at 0.05 s a tick
        adapter.feed(_window(0.05 * (k + 1), tids, first))
    assert len(adapter.moves) == 1 and paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3]
    assert len(adapter.windows) <= 5, [w.end_s for w in adapter.windows]  # the first judged early, then 1 per 0.2 s
    swapped = {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}
    adapter.feed(_window(0.85, tids, swapped))
    assert len(adapter.moves) == 2, said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]
    assert adapter.moves[1].at_s == 0.85


def _sparse(end_s: float, tids: list[int], partners: list[tuple[int, int]], arms: float,
            trapped: dict[tuple[int, int], float] | None = None):
    """A tick of a sampler whose watchpoints are rationed: every thread made 40 address samples,
    offered 30 to each partner and 5 to each other thread; ``arms`` of those offered to the partners
    were watched and all trapped (or as many as ``trapped`` says for a pair), one of those offered
    to each other thread, which did not."""
    import numpy as np

    from pinwise.adapt import Window

    t = len(tids)
    together = {(a, b): pair for pair in partners for a, b in (pair, pair[::-1])}
    traps = trapped or {}
    rows = [(a, b, 30.0, arms, traps.get(together[a, b], arms)) if (a, b) in together else (a, b, 5.0, 1.0, 0.0)
            for a in range(t) for b in range(t) if a != b]
    return Window(end_s, tids, np.full(t, 40.0), np.full(t, 40.0), rows)


def _pairs_placed_on_two_cpus(ticks: int):
    """An adapter on two CPUs fed ``ticks`` rationed ticks (:func:`_sparse`) of pairs 0-1 and 2-3,
    which the OS had apart: (paper, said, adapter, tids)."""
    from pinwise.topology import load_topology

    tids = [101, 102, 103, 104]
    paper, said = _OnPaper([0, 1, 0, 1]), []
    adapter = paper.adapter(load_topology("pack:1 core:2 pu:1"), said)
    for k in range(ticks):
        adapter.feed(_sparse(0.05 * (k + 1), tids, [(0, 1), (2, 3)], 4.0))
    return paper, said, adapter, tids


def test_a_phase_change_seen_on_few_watched_samples_moves_the_threads_in_its_first_ticks():
    """Rationed watchpoints (2 CPUs: 100 traps a second, a handful a tick): the ticks in which the
    placement looks stale are judged alone, not with the span of the phase that ended, and pairs
    that swapped partners move on fewer than MIN_WATCHED watched samples, because the new plan
    costs nothing on them and on the held-out half (the two-phase program waited 0.25-0.6 s for
    32); an all-to-all tick on as few samples moves nothing."""
    from pinwise.adapt.limits import MIN_WATCHED
    paper, said, adapter, tids = _pairs_placed_on_two_cpus(12)
    assert len(adapter.moves) == 1 and paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3], said
    swapped = _sparse(0.65, tids, [(0, 2), (1, 3)], 2.0)
    assert swapped.watched() < MIN_WATCHED
    adapter.feed(swapped)
    adapter.feed(_sparse(0.7, tids, [(0, 2), (1, 3)], 2.0))
    assert len(adapter.moves) == 2 and adapter.moves[1].at_s <= 0.7, said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]
    every = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    for k in range(8):  # every pair alike: no plan costs a tenth of the placement
        adapter.feed(_sparse(0.75 + 0.05 * k, tids, every, 1.0))
    assert len(adapter.moves) == 2, said


def test_few_traps_that_fall_on_one_matching_by_chance_move_nothing_where_every_pair_talked():
    """The FEW_SHARE rule lets pairs that swap partners move on few watched samples. All-to-all
    threads on 2 CPUs, placed once, show now and then an interval whose few traps all fall on the
    two pairs of one matching (a new plan at 0.0 of the cost on both halves; half the traps of the
    pairs apart were theirs before: 12 of 12 is a chance of 2.4e-4). Such an interval moves
    nothing where every pair apart trapped alike since the placement; the chance is logged."""
    import io

    import numpy as np

    from pinwise.adapt import Window
    from pinwise.adapt.limits import MIN_WATCHED

    def tick(end_s: float, trapping: list[tuple[int, int]]):  # one watched sample per ordered pair named, trapped
        rows = [(a, b, 10.0, 1.0, 1.0) for x, y in trapping for a, b in ((x, y), (y, x))]
        return Window(end_s, tids, np.full(4, 40.0), np.full(4, 40.0), rows)

    paper, said, adapter, tids = _pairs_placed_on_two_cpus(12)
    adapter.log = io.StringIO()
    assert len(adapter.moves) == 1 and paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3], said
    for k in range(13):  # every pair traps alike (the pairs on one CPU take turns: seen a quarter as often)
        adapter.feed(tick(0.65 + 0.05 * k, [(0, 2), (0, 3), (1, 2), (1, 3)] + ([(0, 1), (2, 3)] if k % 4 == 0 else [])))
    assert len(adapter.moves) == 1, said
    span = [tick(1.3 + 0.05 * k, [(0, 2), (1, 3)]) for k in range(3)] + [tick(1.45, [])]
    assert sum(window.watched() for window in span) < MIN_WATCHED
    for window in span:
        adapter.feed(window)
    judged = [json.loads(line) for line in adapter.log.getvalue().splitlines()]
    assert judged[-1]["cost_new"] == 0 and judged[-1]["held_out"] == 0 and judged[-1]["watched"] == 12, judged[-1]
    assert len(adapter.moves) == 1, said
    assert judged[-1]["chance"] == 0.00024, judged[-1]  # 0.5 ** 12: half the pairs apart


def test_a_phase_change_read_on_few_traps_is_not_called_imbalanced_by_their_noise():
    """Pairs that swap partners, seen on a handful of traps, one new pair trapping three times as
    often as the other: as observed, BComm reads 50 % (balanced-locality, whose plans made from
    the held-out halves, one of them a single pair, split that pair: the two-phase program's move
    waited 0.1-0.3 s for more traps); read as the estimate it is, corrected for the noise of so
    few traps, it is locality, and the threads move in the first ticks."""
    from pinwise.adapt.limits import MIN_WATCHED
    paper, said, adapter, tids = _pairs_placed_on_two_cpus(12)
    assert len(adapter.moves) == 1, said
    uneven = {(0, 2): 3.0, (1, 3): 1.0}
    for k in range(3):  # the first two, 80 events each, are judged together at the third
        tick = _sparse(0.65 + 0.05 * k, tids, [(0, 2), (1, 3)], 3.0, uneven)
        assert tick.watched() < MIN_WATCHED
        adapter.feed(tick)
    assert len(adapter.moves) == 2 and adapter.moves[1].policy == "locality", said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]


def test_a_tick_of_the_new_phase_is_judged_alone_not_with_the_tick_the_change_began_in():
    """The tick in which the phase changed shows the old pairs; the next, at the whole budget, the
    new ones on 60 weighted events, under the ALONE_EVENTS a span is judged on: summed with the tick
    before, it read as the old phase and the threads stayed a tick more; alone it moves them."""
    paper, said, adapter, tids = _pairs_placed_on_two_cpus(9)
    assert len(adapter.moves) == 1, said
    began = _sparse(0.5, tids, [(0, 1), (2, 3), (0, 2), (1, 3)], 1.0, {(0, 2): 0.0, (1, 3): 0.0})
    adapter.feed(began)
    new = _sparse(0.55, tids, [(0, 2), (1, 3)], 2.0, {(0, 2): 1.0, (1, 3): 1.0})
    assert new.directed().sum() == 60
    adapter.feed(new)
    assert [move.at_s for move in adapter.moves] == [0.05, 0.55], said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]


TIDS = [101, 102, 103, 104]
PAIRS_01_23 = {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}


def _held_until_steady(meets: list | None = None):
    """An adapter on four cores fed ticks of pairs 0-1 and 2-3 (with ``meets``, those meetings
    too) until it tells the sampler the placement holds: (adapter, said, told, ticks fed)."""
    import dataclasses

    from pinwise.topology import load_topology

    paper, said, told = _OnPaper([0, 1, 2, 3]), [], []
    adapter = paper.adapter(load_topology("pack:1 core:4 pu:1"), said)
    adapter.steer = told.append
    k = 0
    while not told and k < 40:
        k += 1
        tick = _window(0.05 * k, TIDS, PAIRS_01_23)
        adapter.feed(tick if meets is None else dataclasses.replace(tick, meets=meets))
    assert told == ["steady"] and len(adapter.moves) == 1, (told, said)
    return adapter, said, told, k


def test_the_steady_budget_comes_back_on_the_newest_ticks_not_on_the_phase_that_ended():
    """A phase change in the middle of a judgment's span: the ticks before it (the placement fits)
    hold many events, the first tick after it a few that cover distance. Read together they look
    as before; the newest tick alone gives the watchpoint budget back."""
    adapter, said, told, k = _held_until_steady()
    adapter.feed(_window(0.05 * (k + 1), TIDS, PAIRS_01_23))
    assert told == ["steady"]
    adapter.feed(_window(0.05 * (k + 2), TIDS, {(0, 2): 8, (2, 0): 8, (1, 3): 8, (3, 1): 8}))
    assert told == ["steady", "burst"], said


def test_threads_placed_once_move_again_only_when_their_meetings_agree():
    """On fewer CPUs than threads, the watched samples of threads that take turns on one CPU trap
    less than those of threads running at once, so after a placement the threads it put apart look
    like the closest partners (all-to-all on 2 CPUs was placed three times in a 4 s run). The
    meetings (samples on one line within 200 ms, no watchpoint) rest on other samples: a
    re-placement must lower their cost too. Meetings alike for every pair keep the threads where
    they are; meetings of the new partners let them move."""
    import dataclasses

    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")
    tids = [101, 102, 103, 104]
    paper, said = _OnPaper([0, 1, 0, 1]), []
    adapter = paper.adapter(machine, said)
    adapter.log = io.StringIO()
    for k in range(12):
        adapter.feed(_sparse(0.05 * (k + 1), tids, [(0, 1), (2, 3)], 4.0))
    assert len(adapter.moves) == 1 and paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3], said
    apart = {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}
    alike = [(a, b, 20.0) for a in range(4) for b in range(4) if a != b]
    for k in range(16):
        adapter.feed(dataclasses.replace(_window(0.65 + 0.05 * k, tids, apart), meets=alike))
    judged = [json.loads(line) for line in adapter.log.getvalue().splitlines()]
    assert len(adapter.moves) == 1, said
    assert any(record.get("meetings") == 1.0 for record in judged), judged[-3:]
    new = [(a, b, 40.0) for a, b in ((0, 2), (2, 0), (1, 3), (3, 1))]
    for k in range(16):
        adapter.feed(dataclasses.replace(_window(1.5 + 0.05 * k, tids, apart), meets=new))
    assert len(adapter.moves) == 2, said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]


def test_a_placement_that_holds_lowers_the_watchpoint_budget_until_it_may_be_stale():
    """Three due judgments in a row that change nothing: the sampler is told the placement holds
    (it arms at a quarter of its budget, each trap costing the program); the first tick on which
    the placement looks stale gives it the budget back in a burst, before that tick is judged."""
    adapter, said, told, k = _held_until_steady()
    assert k * 0.05 >= 3 * adapter.interval  # three due judgments after the move
    moved = []
    adapter._apply = lambda tids_, cpus, apply=adapter._apply: moved.append(list(told)) or apply(tids_, cpus)
    adapter.feed(_window(0.05 * (k + 1), TIDS, {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}))
    assert told == ["steady", "burst"] and moved == [["steady", "burst"]], (told, moved, said)


def test_meetings_that_look_stale_give_the_watchpoint_budget_back_before_any_trap_does():
    """With a quarter of the budget, the new partners of a phase change trap a tenth of a second
    after it (the two-phase program on 2 CPUs: 0.1 s median); the samples that meet on their new
    lines (Window.met, at the clock's rate) show it in the first tick, and the whole budget comes
    back then. Meetings that look as before change nothing."""
    import dataclasses

    def met(pairs):
        return [(a, b, 30.0) for a, b in pairs] + [(b, a, 30.0) for a, b in pairs]

    adapter, said, told, k = _held_until_steady(met([(0, 1), (2, 3)]))
    quiet = _window(0.05 * (k + 1), TIDS, {})  # no trap in this tick
    adapter.feed(dataclasses.replace(quiet, meets=met([(0, 1), (2, 3)])))
    assert told == ["steady"]
    adapter.feed(dataclasses.replace(_window(0.05 * (k + 2), TIDS, {}), meets=met([(0, 2), (1, 3)])))
    assert told == ["steady", "burst"], said


def test_before_the_first_move_each_tick_with_enough_events_is_judged():
    """The blog's program: the thread that creates the pairs is busy in the first tick (no pair
    looks contended among five busy threads), idle in join from the second; the pairs are put on
    one CPU each at the second tick, not an interval later."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:8 pu:1")
    paper, said = _OnPaper([0, 1, 2, 3, 4]), []
    adapter = paper.adapter(machine, said)
    tids = [100, 101, 102, 103, 104]
    pairs = {(1, 2): 80, (2, 1): 80, (3, 4): 80, (4, 3): 80}
    adapter.feed(_window(0.05, tids, {**pairs, (0, 1): 10, (1, 0): 10}))
    assert not adapter.moves
    adapter.feed(_window(0.1, tids, pairs, idle=(0,)))
    assert [m.at_s for m in adapter.moves] == [0.1], said
    assert paper.cpus[1] == paper.cpus[2] != paper.cpus[3] == paper.cpus[4]


def test_before_the_first_move_a_tick_of_few_events_but_enough_traps_is_judged():
    """At a program's start each trap weighs about one event (the watchpoints are not rationed
    yet): a tick of 24 traps (10 samples a thread, 6 of them touched by its partner) holds 24
    weighted events, under STRONG_EVENTS, but its noise is that of 24 traps, and the contending
    pairs are put on one CPU each at once, not a tick or two later."""
    from pinwise.adapt.limits import STRONG_EVENTS, STRONG_TRAPS
    from pinwise.topology import load_topology

    paper, said = _OnPaper([0, 1, 2, 3, 4]), []
    adapter = paper.adapter(load_topology("pack:1 core:8 pu:1"), said)
    pairs = {(1, 2): 6, (2, 1): 6, (3, 4): 6, (4, 3): 6}
    assert STRONG_TRAPS <= sum(pairs.values()) < STRONG_EVENTS
    adapter.feed(_window(0.03, [100, 101, 102, 103, 104], pairs, idle=(0,), samples=10))
    assert [m.at_s for m in adapter.moves] == [0.03], said
    assert paper.cpus[1] == paper.cpus[2] != paper.cpus[3] == paper.cpus[4]


def test_threads_that_share_data_and_pin_themselves_leave_nothing_to_plan(monkeypatch):
    """The blog's program pinned by hand: every worker pins itself (left alone), the thread that
    created them shares nothing. No plan can place it better than where it is, so none is made,
    and it is not pinned (each judgment's plan and held-out halves took CPU time from the pairs)."""
    import pinwise.mapping
    from pinwise.topology import load_topology

    plans = []
    plan = pinwise.mapping.compute_mapping
    monkeypatch.setattr(pinwise.mapping, "compute_mapping", lambda *a, **k: plans.append(1) or plan(*a, **k))
    paper, said = _OnPaper([1, 0, 0, 1, 1]), []
    adapter = paper.adapter(load_topology("pack:1 core:2 pu:1"), said)
    own = adapter._own_pinning

    def pinned_by_the_program(k, tid):
        if k > 0:
            adapter.left_alone[k] = "its own"
            return None
        return own(k, tid)

    adapter._own_pinning = pinned_by_the_program
    adapter.log = io.StringIO()
    for k in range(1, 5):
        adapter.feed(_window(0.05 * k, [100, 101, 102, 103, 104], {(1, 2): 80, (2, 1): 80, (3, 4): 80, (4, 3): 80},
                             idle=(0,)))
    judged = [r for r in map(json.loads, adapter.log.getvalue().splitlines()) if "decision" in r]
    assert judged and all(r["decision"] == "stay" and r["why"] == "the threads that share data pin themselves"
                          for r in judged), judged
    assert not adapter.moves and not plans and paper.cpus == [1, 0, 0, 1, 1], said


def test_a_stale_placement_is_judged_at_each_tick_until_the_new_phase_shows_clearly():
    """Seen on a machine with a core for every thread: the first ticks after pairs swap partners
    show the new partners apart, but not yet contending (the barrier between the phases, the first
    samples of the new lines); the judgment keeps the threads where they are. The ticks after it are judged early
    too, and the first in which the new pairs contend moves them, without first giving the old
    pairs back to the OS."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:4 pu:1")
    paper, said = _OnPaper([0, 1, 2, 3]), []
    adapter = paper.adapter(machine, said)
    tids = [101, 102, 103, 104]
    for k in range(6):  # judged at 0.05 (moved) and 0.25 (an interval later)
        adapter.feed(_window(0.05 * (k + 1), tids, {(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}))
    assert [w.end_s for w in adapter.windows] == [0.05, 0.25] and len(adapter.moves) == 1
    adapter.feed(_window(0.325, tids, {(0, 2): 30, (2, 0): 30, (1, 3): 30, (3, 1): 30}))  # apart, not contending
    assert [w.end_s for w in adapter.windows][2:] == [0.325] and len(adapter.moves) == 1
    adapter.feed(_window(0.35, tids, {(0, 2): 80, (2, 0): 80, (1, 3): 80, (3, 1): 80}))  # before 0.45, when due
    assert [m.at_s for m in adapter.moves][1:] == [0.35], said
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3]
    assert not any("no longer contend" in line for line in said)


def _all_talk_alike(seen_on_one_cpu: float):
    """Four threads that all talk alike on two CPUs, fed 2 s of ticks in which the sampler sees
    the pairs sharing a CPU at ``seen_on_one_cpu`` of the events of those apart, wherever the
    adapter has put them (the OS first put them 0,0,1,1): the adapter (its log kept), and what
    it said."""

    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")
    paper, said = _OnPaper([0, 0, 1, 1]), []
    adapter = paper.adapter(machine, said)
    adapter.log = io.StringIO()
    tids = [101, 102, 103, 104]
    for k in range(40):
        seen = {(a, b): 12.0 * (seen_on_one_cpu if paper.cpus[a] == paper.cpus[b] else 1.0)
                for a in range(4) for b in range(4) if a != b}
        adapter.feed(_window(0.05 * (k + 1), tids, seen))
    return adapter, said


def test_when_what_is_seen_follows_the_placement_the_threads_are_moved_once_at_most():
    """Four threads that all talk alike on two CPUs, the pairs on one CPU seen at a sixth of the
    events of those apart (more than the correction for it makes up): every placement makes the
    threads it puts apart look the closest partners. One move may follow what is seen; it does
    not lower the distance per event, and no further move follows it."""
    adapter, said = _all_talk_alike(2.0 / 12.0)
    assert len(adapter.moves) <= 1, said
    if adapter.moves:
        assert "futile" in adapter.log.getvalue()
    if adapter.moves:
        assert "futile" in adapter.log.getvalue()


def test_threads_pinned_on_one_cpu_are_seen_as_if_apart():
    """The sampler's clock samples time, so of two threads on one CPU it sees a quarter to a third
    of the events it sees of them apart (an access to a line the same CPU wrote last is cheap). Four
    threads that all talk alike on two CPUs, seen so wherever they run: the first placement may
    follow what the OS's placement made look different, and from the second tick after it (the
    first ran partly before it) the pairs it pinned on one CPU are counted as if apart, so no
    judgment finds a placement that looks better than it (none is)."""
    from pinwise.adapt.limits import HYSTERESIS
    from pinwise.adapt.scoring import SEEN_ON_ONE_CPU

    adapter, said = _all_talk_alike(SEEN_ON_ONE_CPU)
    assert len(adapter.moves) <= 1, said
    judged = [json.loads(line) for line in adapter.log.getvalue().splitlines()]
    after = [r for r in judged if adapter.moves and r["t"] > adapter.moves[0].at_s and "cost_new" in r]
    tempting = [r for r in after if r.get("crowded") or r["cost_new"] < (1 - HYSTERESIS) * r["cost_now"]]
    assert after and len(tempting) <= 1, tempting


def test_contending_pairs_where_cores_share_only_an_l3_move_at_the_first_judgment():
    """A creator and two contending pairs that the OS spread over a machine whose 16 cores share
    one L3 (a synthetic topology): sharing a CPU is each pair's only gain there. Seen on a few watchpoints a
    tick (3 armed per direction, 2 trapped), the span shows the pairs contending but a held-out half
    of it seldom does on its own; the half's plan must still put the pairs it bears out on one CPU,
    or it costs what the OS's placement does and reads 1.0 (before: no move in 6 ticks)."""
    import numpy as np

    from pinwise.adapt import Window
    from pinwise.topology import load_topology

    tids, partners = [101, 102, 103, 104, 105], {(1, 2), (2, 1), (3, 4), (4, 3)}
    accesses = np.array([1.0] + [40.0] * 4)  # the creator waits in join
    rows = [(a, b, 36.0, 3.0, 2.0) if (a, b) in partners else (a, b, 1.0, 1.0, 0.0)
            for a in range(1, 5) for b in range(5) if a != b]
    paper, said = _OnPaper([0, 5, 9, 2, 12]), []
    adapter = paper.adapter(load_topology("pack:1 l3:1 core:16 pu:1"), said)
    adapter.feed(Window(0.025, tids, accesses, accesses, rows))
    assert [move.at_s for move in adapter.moves] == [0.025], said
    assert paper.cpus[1] == paper.cpus[2] != paper.cpus[3] == paper.cpus[4], paper.cpus


def test_threads_the_os_crowded_on_a_cpu_move_at_the_first_judgment_that_is_no_noise():
    """Two pairs on two CPUs, three of them crowded on one by the OS: in the first tick with
    STRONG_EVENTS, a plan under half of what its CPUs cost with the threads dealt at random, on
    held-out events too, moves them at once (each tick it waits, a pair runs apart)."""
    from pinwise.topology import load_topology

    machine = load_topology("pack:1 core:2 pu:1")
    paper, said = _OnPaper([0, 0, 0, 1]), []
    adapter = paper.adapter(machine, said)
    adapter.feed(_window(0.05, [101, 102, 103, 104], {(0, 1): 20, (1, 0): 20, (2, 3): 20, (3, 2): 20}))
    assert len(adapter.moves) == 1, said
    assert paper.cpus[0] == paper.cpus[1] != paper.cpus[2] == paper.cpus[3]


def test_a_pair_left_on_one_cpu_when_the_other_pair_ended_is_not_moved_to_another():
    """Two pairs that swap partners on two CPUs, a pair on each; then one pair ends. The pair that
    runs on looks crowded (two threads on one CPU of two), but a plan that puts it on one CPU again
    (the other one) cures nothing: it stays where it is. (A run of the two-phase program moved it
    at its end, and the log's last move read CPUs 0,0,0,0.)"""
    from pinwise.topology import load_topology

    paper, said = _OnPaper([0, 0, 1, 1]), []
    adapter = paper.adapter(load_topology("pack:1 core:2 pu:1"), said)
    tids, at = [101, 102, 103, 104], 0.0
    # the heavier second pair is planned first, on CPU 0: the first pair runs on on CPU 1
    for hits in ({(0, 1): 80, (1, 0): 80, (2, 3): 80, (3, 2): 80}, {(0, 2): 40, (2, 0): 40, (1, 3): 120, (3, 1): 120}):
        for _ in range(4):
            at += 0.2
            adapter.feed(_window(at, tids, hits))
    assert paper.cpus[0] == paper.cpus[2] != paper.cpus[1] == paper.cpus[3], said
    where, moves = list(paper.cpus), len(adapter.moves)
    for _ in range(6):  # threads 1 and 3 ended
        at += 0.2
        adapter.feed(_window(at, [101, -1, 103, -1], {(0, 2): 40, (2, 0): 40}, idle=(1, 3)))
    assert len(adapter.moves) == moves and paper.cpus == where, said


@pytest.mark.parametrize("spec", ["pack:1 core:2 pu:1", "pack:2 core:4 pu:2", "pack:4 l3:2 core:4 pu:2"])
def test_the_scorers_costs_are_the_cost_models(spec):
    """What a judgment scores placements by (from distances kept per set of CPUs) is the cost
    model's hops, and what chance gives is the mean of its distance over the pairs, on random
    matrices and placements (threads stacked on a CPU included)."""
    import numpy as np

    from pinwise.adapt.scoring import Scorer
    from pinwise.mapping.cost import mapping_cost
    from pinwise.topology import load_topology

    topology, rng = load_topology(spec), np.random.default_rng(7)
    scorer, cpus = Scorer(topology), sorted(topology.allowed)
    for _ in range(100):
        n = int(rng.integers(2, 12))
        matrix = rng.random((n, n))
        matrix = matrix + matrix.T
        np.fill_diagonal(matrix, 0)
        placed = [int(rng.choice(cpus)) for _ in range(n)]
        assert scorer.cost(matrix, placed) == pytest.approx(mapping_cost(matrix, topology, placed).hops)
        every = mapping_cost(np.ones((n, n)), topology, placed).hops / (n * (n - 1) / 2)
        assert scorer.by_chance(matrix, placed) == pytest.approx(matrix[np.triu_indices(n, 1)].sum() * every)


def test_the_slots_of_threads_not_made_yet_come_from_the_last_move(tmp_path):
    """The file the preload library reads (pinwise.adapt.newcomers): the threads pinned, and the
    workers alive at the last move as the template, wrapping round past its end as a static plan
    does; threads that end change the pinned line, not the template, until the next move."""
    from pinwise.adapt.newcomers import Newcomers

    first, second = sorted(os.sched_getaffinity(0))[:2]
    path = tmp_path / "slots"
    newcomers = Newcomers(os.sched_getaffinity(0), path)
    # thread 3 was pinwise's, then the program pinned it again: its own, and so are the threads it makes
    newcomers.publish([100, 101, 102, 103, -1], {0: {first}, 1: {second}, 2: {first}, 3: {second}},
                      own={3: "its own"}, remake=True)
    assert path.read_text() == f"pinned 100 101 102\nslots 1 2 {second};{first}\n"
    assert [newcomers.slot(k) for k in (0, 1, 2, 3, 4)] == [None, {second}, {first}, {second}, {first}]
    newcomers.publish([100, -1, 102, 103, 104], {0: {first}, 1: {second}, 2: {first}}, own={}, remake=False)
    assert path.read_text() == f"pinned 100 102\nslots 1 2 {second};{first}\n"
    newcomers.publish([100, -1, 102, -1, 104], {0: {first}, 2: {first}, 4: {second}}, own={}, remake=True)
    assert path.read_text() == f"pinned 100 102 104\nslots 2 3 {first};-;{second}\n"
    assert [newcomers.slot(k) for k in (5, 6, 7)] == [{first}, None, {second}]


def test_a_thread_that_inherited_a_pin_of_pinwises_is_moved_to_its_slot_and_the_programs_own_is_not():
    """Attached (no file), at the next window: a new thread on a CPU pinwise pinned another thread
    to goes to its slot, and becomes pinwise's; one on CPUs pinwise never handed out stays."""
    import threading

    from pinwise.adapt.newcomers import Newcomers

    allowed = sorted(os.sched_getaffinity(0))
    first, second = allowed[:2]
    done, started = threading.Event(), []
    workers = [threading.Thread(target=lambda: (started.append(threading.get_native_id()), done.wait()))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        assert eventually(lambda: len(started) == 2)
        inherited, own = started
        os.sched_setaffinity(inherited, {first})   # as if made by a creator pinwise pinned to `first`
        if len(allowed) > 2:
            os.sched_setaffinity(own, set(allowed[:2]))   # the program's own choice, not pinwise's
        newcomers, pinned = Newcomers(allowed), {0: {first}, 1: {second}}
        newcomers.publish([os.getpid(), 1, -1, -1], pinned, own={}, remake=True)
        placed = newcomers.settle([os.getpid(), 1, inherited, own], pinned)
        assert os.sched_getaffinity(inherited) == {second} and pinned[2] == {second}
        assert placed == {2: [second]} and 3 not in pinned
    finally:
        done.set()
        for worker in workers:
            worker.join()
        os.sched_setaffinity(0, set(allowed))


def test_with_the_library_a_new_thread_is_settled_at_its_second_window(tmp_path):
    """The library moves a new thread when it first runs, which on a busy machine comes after the
    window that shows it, so its creator's affinity (maybe a slot too) is not read as its slot:
    with the library a thread is settled at the window after the one that first shows it, and
    until then a judgment neither places it nor calls it the program's own."""
    import threading

    from pinwise.adapt.newcomers import WAIT_WINDOWS, Newcomers

    allowed = sorted(os.sched_getaffinity(0))
    first, second = allowed[:2]
    done, started = threading.Event(), []
    worker = threading.Thread(target=lambda: (started.append(threading.get_native_id()), done.wait()))
    worker.start()
    try:
        assert eventually(lambda: started)
        os.sched_setaffinity(started[0], {second})   # where the library started it: its slot
        newcomers, pinned = Newcomers(allowed, tmp_path / "slots"), {0: {first}, 1: {second}}
        newcomers.library = True
        newcomers.publish([os.getpid(), 1], pinned, own={}, remake=True)
        tids = [os.getpid(), 1, started[0]]
        assert newcomers.settle(tids, pinned, 0.1) == {} and newcomers.starting(2)
        assert newcomers.settle(tids, pinned, 0.2) == {2: [second]} and pinned[2] == {second}
        assert not newcomers.starting(2) and newcomers.young(0.15) == {2} and newcomers.young(0.25) == set()
        # one that has not run yet keeps its creator's pin (the main thread's: `first`, not its slot):
        # it waits WAIT_WINDOWS windows past its second before a judgment may call it the program's own
        del pinned[2]
        os.sched_setaffinity(started[0], {first})
        newcomers.ready = newcomers.seen = 2
        waits = []
        for at in (0.3, 0.4, 0.5, 0.6, 0.7):
            assert newcomers.settle(tids, pinned, at) == {} and 2 not in pinned
            waits.append(newcomers.starting(2))
        assert waits == [True] * (1 + WAIT_WINDOWS) + [False] * (4 - WAIT_WINDOWS), waits
    finally:
        done.set()
        worker.join()
        os.sched_setaffinity(0, set(allowed))
