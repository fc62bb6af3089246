"""Capability 2: real programs pinned by the preload library, read back from /proc while they run."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import (
    PINWISE,
    PROGRAMS,
    assert_clean_failure,
    compile_program,
    eventually,
    need,
    run_pinwise,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from pinwise import PinwiseError
from pinwise.cpulist import parse_cpulist
from pinwise.pinning import (
    API_HEADER,
    API_LIBRARY,
    current_placement,
    likwid_evaluate,
    pin_self,
)
from pinwise.placement import Placement, resolve
from pinwise.plan import Plan
from pinwise.pinning.launcher import NATIVE_DIR, PRELOAD_LIBRARY
from pinwise.topology import PRESETS, load_topology, preset, read_sysfs

ALLOWED = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(ALLOWED[:2] != [0, 1], reason="needs CPUs 0 and 1")


@pytest.fixture(scope="session")
def threads_exe(build_dir):
    return compile_program("threads.c", build_dir)


def read_allowed(pid: int, tid: int) -> list[int]:
    """The CPUs thread ``tid`` may run on: /proc/TID holds any thread's own status, also that of a
    process the program forked (``pid`` is the process the test started)."""
    with open(f"/proc/{tid}/status") as status:
        for line in status:
            if line.startswith("Cpus_allowed_list:"):
                return sorted(parse_cpulist(line.split(":", 1)[1]))
    raise AssertionError("no Cpus_allowed_list")


def run_and_read(command: list[str], env: dict | None = None) -> dict[int, list[int]]:
    """Start a test program (through pinwise or a peer), read each thread's allowed CPUs from
    /proc while it runs, then let it finish. Returns thread index -> CPUs."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    placement: dict[int, list[int]] = {}
    pid = None
    try:
        for line in process.stdout:
            words = line.split()
            if words[:1] == ["ready"]:
                pid = int(words[1])
            elif words[:1] == ["thread"]:
                placement[int(words[1])] = read_allowed(pid, int(words[2]))
            elif words[:1] == ["end"]:
                break
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert pid is not None, process.stderr.read()
    assert process.returncode == 0, process.stderr.read()
    return placement


def pinwise_run(*options: str) -> list[str]:
    return [PINWISE, "run", "--no-verify", *options, "--"]


def expected(cpus: list[int], count: int) -> dict[int, list[int]]:
    return {k: [cpus[k % len(cpus)]] for k in range(count)}


# -- placements on a C pthreads program --------------------------------------------------------

@pytest.mark.parametrize("options, cpus", [
    (["--cpus", "1,0,1,0,1"], [1, 0, 1, 0, 1]),
    (["--cpus", "0-1"], [0, 1]),
    (["--expr", "N:0-1"], [0, 1]),
    (["--expr", "S0:1@S0:0"], [1, 0]),
    (["--expr", "E:N:2:1:1"], [0, 1]),
    (["--expr", "C0"], [0, 1]),
    (["--expr", "M0"], [0, 1]),
    (["--expr", "N:scatter"], [0, 1]),
    (["--cpus", "S0:1@S0:0"], [1, 0]),  # -c takes expressions too, as likwid-pin -c does
    (["-c", "E:N:2:1:1"], [0, 1]),
    (["--policy", "compact"], [0, 1]),
    (["--policy", "scatter"], [0, 1]),
    (["--policy", "spread", "-n", "2"], [0, 1]),
    (["--policy", "primary", "-n", "3"], [0, 0, 0]),
])
def test_pthreads_program_is_pinned_as_planned(threads_exe, options, cpus):
    placement = run_and_read(pinwise_run(*options) + [str(threads_exe), "4"])
    assert placement == expected(cpus, 5)


def test_more_threads_than_cpus_wrap_round(threads_exe):
    placement = run_and_read(pinwise_run("--cpus", "1,0") + [str(threads_exe), "9"])
    assert placement == expected([1, 0], 10)


def printed_cpus(*options: str) -> list[int]:
    out = run_pinwise("run", *options, "--print", check=True).stdout
    return [int(c) for c in out.split("pinwise run --cpus ")[1].split()[0].split(",")]


def test_random_policy_is_a_permutation_fixed_by_its_seed(threads_exe):
    x7550 = preset("x7550")
    first = printed_cpus("-t", "x7550", "--policy", "random", "--seed", "7")
    assert first == printed_cpus("-t", "x7550", "--policy", "random", "--seed", "7")
    assert sorted(first) == list(range(64))  # a permutation of every PU
    assert first not in (x7550.compact_order(), x7550.scatter_order())
    assert printed_cpus("-t", "x7550", "--policy", "random", "--seed", "8") != first  # the seed changes it
    here = printed_cpus("--policy", "random", "--seed", "7")
    placement = run_and_read(pinwise_run("--policy", "random", "--seed", "7") + [str(threads_exe), "1"])
    assert [cpus for _, cpus in sorted(placement.items())] == [[cpu] for cpu in here]


def test_skip_mask_gives_helper_threads_no_slot(threads_exe):
    # Created thread 0 (process thread 1) is a helper: it may run on every CPU of the plan and takes
    # no slot, so process thread 2 gets slot 1 and thread 3 wraps round to slot 0.
    placement = run_and_read(pinwise_run("--cpus", "1,0", "--skip", "0x1") + [str(threads_exe), "3"])
    assert placement == {0: [1], 1: [0, 1], 2: [0], 3: [1]}


def test_taskset_restriction_is_respected(threads_exe):
    taskset = need("taskset")
    result = subprocess.run([taskset, "-c", "1", *pinwise_run("--cpus", "0,1"), str(threads_exe), "1"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert_clean_failure(result, "CPU 0", "not allowed")
    placement = run_and_read([taskset, "-c", "1", *pinwise_run("--policy", "compact"), str(threads_exe), "3"])
    assert placement == expected([1], 4)


def test_allow_unpinned_runs_the_program_anyway(threads_exe):
    result = subprocess.run(pinwise_run("--cpus", "0,99", "--allow-unpinned") + [str(threads_exe), "1"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and "running unpinned" in result.stderr


# -- other thread libraries ---------------------------------------------------------------------

def test_openmp_program_through_preload(build_dir):
    exe = compile_program("omp_threads.c", build_dir, "-fopenmp")
    env = {**os.environ, "OMP_NUM_THREADS": "4"}
    placement = run_and_read(pinwise_run("--cpus", "1,0,0,1") + [str(exe)], env=env)
    assert placement == {0: [1], 1: [0], 2: [0], 3: [1]}


def test_openmp_program_through_omp_places(build_dir):
    exe = compile_program("omp_threads.c", build_dir, "-fopenmp")
    env = {**os.environ, "OMP_NUM_THREADS": "4"}
    placement = run_and_read(pinwise_run("--omp", "--cpus", "1,0,0,1") + [str(exe)], env=env)
    assert placement == {0: [1], 1: [0], 2: [0], 3: [1]}


@pytest.mark.parametrize("threads, slots", [(2, [0, 1]), (3, [0, 1, 0]), (5, [0, 0, 1, 1, 0])])
def test_verify_under_omp_compares_each_thread_with_its_libgomp_place(build_dir, threads, slots):
    """--omp hands the plan to libgomp as places; with more threads than places libgomp puts them
    as proc_bind(close) says (3 on 2 places: 0,1,0), and --verify judges each by that place."""
    exe = compile_program("omp_threads.c", build_dir, "-fopenmp")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    result = run_pinwise("run", "--omp", "--verify", "--cpus", "1,0", "-n", "2", "--", str(exe), env=env,
                         stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert f"pinwise: {threads} threads, all where asked" in result.stderr, result.stderr
    rows = [line.strip("│ ").split("│") for line in result.stderr.splitlines() if line.startswith("│")]
    assert [int(row[1]) for row in rows] == slots
    assert [int(row[3]) for row in rows] == [(1, 0)[slot] for slot in slots]  # asked: the slot's CPU


def test_verify_under_omp_gives_no_verdict_for_a_program_without_an_openmp_runtime(threads_exe):
    """--omp hands the plan to an OpenMP runtime; a program that needs none was placed by nothing,
    so where its threads ran is shown without "ok" or "NOT WHERE ASKED", and pinwise says why.
    --skip cannot be handed to a runtime at all."""
    result = run_pinwise("run", "--omp", "--verify", "--cpus", "1,0", "--", str(threads_exe), "2",
                         stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "names no OpenMP runtime (libgomp, libomp, libiomp5) among the libraries it needs" in result.stderr
    assert "where asked" not in result.stderr and "NOT WHERE ASKED" not in result.stderr, result.stderr
    assert "not pinned (os)" in result.stderr, result.stderr
    assert_clean_failure(run_pinwise("run", "--omp", "--skip", "0x1", "--cpus", "1,0", "--", "true"),
                         "--skip cannot be handed to the OpenMP runtime")


def test_python_threads(tmp_path):
    placement = run_and_read(pinwise_run("--cpus", "1,0") + [sys.executable, str(PROGRAMS / "py_threads.py"), "3"])
    assert placement == expected([1, 0], 4)


def test_cxx_std_threads(build_dir):
    exe = compile_program("cxx_threads.cpp", build_dir, cxx=True)
    placement = run_and_read(pinwise_run("--expr", "N:1@N:0") + [str(exe), "4"])
    assert placement == expected([1, 0], 5)


def test_children_are_followed_unless_no_follow(threads_exe):
    # The shell is the pinned program; the program it starts in a child process takes the plan
    # from slot 0, unless --no-follow gives it back the affinity pinwise started with.
    shell = ["/bin/sh", "-c", f"{threads_exe} 2; exit $?"]
    followed = run_and_read(pinwise_run("--cpus", "1,0") + shell)
    assert followed == expected([1, 0], 3)
    not_followed = run_and_read(pinwise_run("--cpus", "1", "--no-follow") + shell)
    assert all(cpus == ALLOWED for cpus in not_followed.values()), not_followed


# -- agreement with likwid-pin --------------------------------------------------------------------

@pytest.mark.parametrize("expression", ["N:0-1", "E:N:2:1:1", "1,0", "S0:1@S0:0", "N:scatter", "N", "S0", "1-0",
                                        "N:1-0", "S0:1-0", "M0:1-0", "1,1", "0,0"])
def test_same_cpus_as_likwid_pin(threads_exe, expression):
    likwid_pin = need("likwid-pin")
    theirs = run_and_read([likwid_pin, "-q", "-c", expression, str(threads_exe), "3"])
    ours = run_and_read(pinwise_run("--expr", expression) + [str(threads_exe), "3"])
    assert ours == theirs


#: Machines described to the real likwid-pin: SMT siblings numbered apart or together, NUMA
#: domains within sockets, several last-level caches per socket, no caches at all.
LIKWID_MACHINES = ["pack:2 core:4 pu:2(indexes=2*8:1*2)", "pack:2 [numa] l3:1 core:4 pu:2",
                   "pack:1 [numa] core:8 pu:2(indexes=2*8:1*2)", "pack:2 numa:2 l3:1 core:4 pu:2(indexes=2*16:1*2)",
                   "pack:4 l3:2 core:3 pu:1", "pack:2 core:4 pu:1"]
#: likwid-pin 5.2's expressions: domains and their NUMA order, logical lists, E: selections (with
#: wrap-around), and the 5.2 methods scatter, balanced and cbalanced with and without a count.
LIKWID_EXPRESSIONS = [
    "N", "S0", "S1", "M0", "M1", "C0", "C1", "D1", "S0:0-3", "S1:1-2", "M1:0-3", "M1:2", "N:0-5", "E:N:4", "E:N:4:1:2",
    "E:M1:3", "E:S1:4:2:4", "E:S0:6:1:3", "E:N:3:1:2:1", "E:N", "E:N:99", "E:S0:5:2:3", "E:N:2:1:0", "E:N:2:0:1",
    "E:N:0", "S:scatter", "N:scatter", "M:scatter", "C:scatter",
    "D:scatter", "S:scatter:3", "M:scatter:5", "S:scatter:20", "S:balanced:4", "S:balanced:3", "M:balanced:6",
    "N:balanced:3", "S:cbalanced:4", "S:cbalanced:6", "S:cbalanced:12", "M:cbalanced:6", "C:balanced:4", "S0:0@S1:0",
    "M1@M0", "S1:scatter", "0,3,1", "3-1", "L:N:0-3", "L:S1:1", "S:balanced", "M:cbalanced", "S1:0-30"]


@pytest.fixture(scope="module")
def fake_likwids(tmp_path_factory):
    from likwid_fake import FakeLikwid, available

    why = available()
    if why:
        pytest.skip(why)
    return {text: FakeLikwid(preset(text) if text in PRESETS else load_topology(text), tmp_path_factory.mktemp("likwid"))
            for text in LIKWID_MACHINES}


@pytest.mark.parametrize("machine", LIKWID_MACHINES)
def test_likwid_expressions_give_the_cpus_likwid_pin_gives(fake_likwids, machine):
    """The real likwid-pin 5.2, told the machine, against pinwise's evaluation: the same CPU list,
    or both refuse; where likwid-pin drops a part naming a domain the machine lacks (or reads past
    a domain's list), pinwise refuses and says so."""
    topology = load_topology(machine)
    try:
        answers = fake_likwids[machine].cpus(*LIKWID_EXPRESSIONS)
    except RuntimeError as err:
        pytest.skip(str(err))
    for expression, theirs in answers.items():
        try:
            ours = likwid_evaluate(expression, topology)
        except PinwiseError as err:
            assert theirs is None or "likwid-pin leaves that part out" in str(err) or "reads past" in str(err), \
                (expression, theirs, str(err))
            continue
        assert ours == theirs, expression


def job_lines(cpus: str) -> dict[str, str]:
    """The job-script lines `pinwise run --print` gives for a CPU list, by tool."""
    printed = run_pinwise("run", "--print", "--cpus", cpus, "--", "true", check=True).stdout
    lines = {}
    for line in printed.splitlines()[printed.splitlines().index(next(l for l in printed.splitlines()
                                                                      if l.startswith("plan:"))) + 1:]:
        name, _, text = line.strip().partition("  ")
        lines[name.strip()] = text.strip()
    return lines


@pytest.fixture(scope="module")
def omp_exes(build_dir):
    """The OpenMP test program built for libgomp, and for LLVM's libomp (KMP_AFFINITY) if present."""
    gomp = compile_program("omp_threads.c", build_dir, "-fopenmp")
    libomp_dir = next((p for p in sorted(Path("/usr/lib").glob("llvm-*/lib")) if (p / "libomp.so").exists()), None)
    kmp = None
    if libomp_dir is not None:
        kmp = build_dir / "omp_threads_libomp"
        if not kmp.exists():
            subprocess.run([need("gcc"), "-O2", "-fopenmp", "-c", str(PROGRAMS / "omp_threads.c"), "-o", f"{kmp}.o"],
                           check=True)
            subprocess.run([need("gcc"), f"{kmp}.o", "-o", str(kmp), f"-L{libomp_dir}", f"-Wl,-rpath,{libomp_dir}",
                            "-lomp", "-pthread"], check=True)
    return gomp, kmp


@pytest.mark.parametrize("cpus", ["1,0", "0,0", "1,1", "0,1,1,0", "1,0,1"])
def test_every_printed_job_line_places_the_threads_as_pinwise_does(omp_exes, cpus):
    """Each line of `pinwise run --print`, run as printed on an OpenMP program, puts thread k
    where `pinwise run` puts it; a withheld line says why; taskset's covers the whole plan."""
    gomp, kmp = omp_exes
    threads = len(cpus.split(","))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    ours = run_and_read(pinwise_run("--cpus", cpus) + [str(gomp)], env=env)
    assert ours == {k: [int(c)] for k, c in enumerate(cpus.split(","))}
    lines = job_lines(cpus)
    assert set(lines) >= {"pinwise", "likwid-pin", "OpenMP", "GNU OpenMP", "Intel OpenMP", "taskset"}
    if lines["likwid-pin"].startswith("(withheld"):
        assert threads > len(ALLOWED) and "hardware threads" in lines["likwid-pin"]
    else:
        # as printed, with no OMP_NUM_THREADS of ours: a list that wraps round ("0" for 0,0) names the
        # plan's thread count before the command, or likwid-pin would start as many as it lists
        words = shlex.split(lines["likwid-pin"])
        start = words.index("likwid-pin")
        assigned = dict(word.split("=", 1) for word in words[:start])
        bare = {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}
        assert run_and_read([need("likwid-pin"), "-q", *words[start + 1:], str(gomp)], env={**bare, **assigned}) == ours
    for tool, program in (("OpenMP", gomp), ("GNU OpenMP", gomp), ("Intel OpenMP", kmp)):
        if program is None:
            continue  # no LLVM libomp here to read KMP_AFFINITY
        assignments = dict(word.split("=", 1) for word in shlex.split(lines[tool]))
        assert run_and_read([str(program)], env={**env, **assignments}) == ours, (tool, lines[tool])
    taskset = shlex.split(lines["taskset"].split("(")[0])
    placed = run_and_read([need(taskset[0]), *taskset[1:], str(gomp)], env=env)
    assert all(found == sorted({c for cs in ours.values() for c in cs}) for found in placed.values())


def test_a_withheld_likwid_line_says_what_likwid_pin_does_with_the_list():
    """likwid-pin does not refuse a list longer than the machine's hardware threads: it keeps the
    first ones (and wraps round them), which the real likwid-pin shows when asked to print them."""
    likwid_pin = need("likwid-pin")
    if len(ALLOWED) < 2:
        pytest.skip("needs two CPUs")
    hw_threads = read_sysfs().nb_pus
    cpus = [ALLOWED[0]] * (hw_threads + 1) + [ALLOWED[1]]  # no shorter list repeats to it
    line = job_lines(",".join(map(str, cpus)))["likwid-pin"]
    assert line.startswith("(withheld") and f"keeps only the first {hw_threads} " in line
    printed = subprocess.run([likwid_pin, "-p", "-c", ",".join(map(str, cpus))], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert printed == ",".join(map(str, cpus[:hw_threads]))


# -- verification output, pin --pid, the in-process APIs ---------------------------------------------

def test_verify_table_reports_where_threads_ran(threads_exe):
    result = subprocess.run([PINWISE, "run", "--verify", "--cpus", "1,0", "--", str(threads_exe), "2"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "where each thread ran" in result.stderr
    assert "3 threads, all where asked" in result.stderr


def test_print_shows_plan_and_job_script_lines():
    out = run_pinwise("run", "--topology", "nehalem", "--policy", "scatter", "-n", "4", "--print", check=True).stdout
    assert "0=t0" in out and "4=t1" in out
    assert "likwid-pin -c 0,4,1,5" in out
    assert 'OMP_PLACES="{0},{4},{1},{5}"' in out
    assert "KMP_AFFINITY" in out and "GOMP_CPU_AFFINITY=\"0 4 1 5\"" in out
    # a skip mask: likwid-pin takes it (-s), an OpenMP runtime takes none, so its lines are withheld
    skipping = run_pinwise("run", "--topology", "nehalem", "--cpus", "1,0", "--skip", "0x1", "--print",
                           check=True).stdout
    assert "likwid-pin -c 1,0 -s 0x1" in skipping and "OMP_PLACES" not in skipping, skipping
    assert skipping.count("(withheld: an OpenMP runtime places its team's threads in order and takes no skip mask") == 3


@pytest.mark.parametrize("command", [("run", "--cpus", "0"), ("run", "--no-verify", "--cpus", "0"), ("trace", "-o", "OUT")])
def test_the_program_sees_the_argv0_it_was_given(tmp_path, command):
    """As under a shell: a program's messages that name itself (xz: input: ...) read the same under
    pinwise, which finds the program on PATH but starts it by the name the user wrote."""
    if command[0] == "trace":
        need("valgrind")
    argv = [str(tmp_path / "c.json") if word == "OUT" else word for word in command]
    result = run_pinwise(*argv, "--", "sh", "-c", 'echo "I am $0"', timeout=300)
    assert result.returncode == 0 and result.stdout.splitlines()[0] == "I am sh", (result.stdout, result.stderr)


def test_pin_running_process(threads_exe):
    process = subprocess.Popen([str(threads_exe), "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(5)]
        pid = int(lines[0].split()[1])
        tids = [int(line.split()[2]) for line in lines[1:4]]
        pinned = run_pinwise("pin", "--pid", str(pid), "--cpus", "1,0", check=True)
        assert [read_allowed(pid, tid) for tid in tids] == [[1], [0], [1]]
        # each thread on its own CPU: a thread made later would inherit its maker's, and --adapt is named
        assert f"`pinwise pin --pid {pid} --adapt`, in place of this pin, places new threads as they come" in pinned.stderr
        # a thread's id names no process: refused, nothing moved (not the whole process pinned)
        assert_clean_failure(run_pinwise("pin", "--pid", str(tids[1]), "--cpus", "0"),
                             f"{tids[1]} is a thread of process {pid}, not a process: give --pid {pid}")
        assert [read_allowed(pid, tid) for tid in tids] == [[1], [0], [1]]
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    missing = next(pid for pid in range(4_194_303, 1, -1) if not os.path.exists(f"/proc/{pid}"))
    assert_clean_failure(run_pinwise("pin", "--pid", str(missing), "--cpus", "0"), "no process")
    assert_clean_failure(run_pinwise("pin", "--pid", "999999999", "--cpus", "0"), "--pid", "at most 4194304")
    if os.path.exists("/proc/2") and "Kthread:\t1" in open("/proc/2/status").read():  # kthreadd, outside a container
        assert_clean_failure(run_pinwise("pin", "--pid", "2", "--cpus", "0"), "is a kernel thread")


def test_pin_says_when_the_process_has_not_the_threads_of_its_trace(threads_exe, tmp_path):
    """A plan from a trace maps the trace's thread k onto the process's k-th thread: a process
    with more threads than the trace (one wrapped round) or fewer (slots unused) is pinned as asked,
    and pinwise says that the matrix does not describe these threads."""
    two, five = tmp_path / "two.csv", tmp_path / "five.csv"
    two.write_text("0,9\n9,0\n")
    five.write_text("\n".join(",".join("0" if i == j else "1" for j in range(5)) for i in range(5)) + "\n")
    process = subprocess.Popen([str(threads_exe), "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(5)]
        pid = int(lines[0].split()[1])
        more = run_pinwise("pin", "--pid", str(pid), "-p", "locality", "--comm", str(two), check=True)
        assert more.stdout.count("TID ") == 3, more.stdout
        assert (f"warning: process {pid} has 3 threads and the plan maps the 2 of its trace: thread 2 wrapped round "
                "onto the plan's first CPUs") in more.stderr, more.stderr
        assert f"(pinwise trace --pid {pid})" in more.stderr
        fewer = run_pinwise("pin", "--pid", str(pid), "-p", "locality", "--comm", str(five), check=True)
        assert f"process {pid} has 3 threads and the plan maps the 5 of its trace: slots 3-4 went unused" \
            in fewer.stderr, fewer.stderr
        same = run_pinwise("pin", "--pid", str(pid), "--cpus", "0,1", check=True)  # a CPU list wraps round by design
        assert "of its trace" not in same.stderr, same.stderr
    finally:
        process.stdin.close()
        process.wait(timeout=30)


def test_a_main_thread_gone_by_pthread_exit_takes_no_slot(build_dir):
    """The main thread ended (pthread_exit) and the workers run on: the workers get slots 0 and 1
    (the zombie got slot 0 before, and a live worker shared a CPU), and pinwise says why."""
    exe = compile_program("main_exits.c", build_dir)
    process = subprocess.Popen([str(exe)])
    try:
        def main_gone() -> bool:  # both workers made, the main thread a zombie
            with open(f"/proc/{process.pid}/stat") as stat:
                state = stat.read().rpartition(") ")[2][:1]
            return len(os.listdir(f"/proc/{process.pid}/task")) == 3 and state == "Z"

        assert eventually(main_gone)
        tids = sorted(int(x) for x in os.listdir(f"/proc/{process.pid}/task"))
        pinned = run_pinwise("pin", "--pid", str(process.pid), "--cpus", "1,0", check=True)
        assert pinned.stdout.split("\n")[:2] == [f"TID {tids[1]}: CPU 1", f"TID {tids[2]}: CPU 0"], pinned.stdout
        assert [read_allowed(process.pid, tid) for tid in tids[1:]] == [[1], [0]]
        assert "main thread has ended (pthread_exit): it took no slot" in pinned.stderr, pinned.stderr
        assert "started while the others were pinned" not in pinned.stderr, pinned.stderr
    finally:
        process.kill()
        process.wait(timeout=30)


def test_pinning_init_warns_that_what_it_starts_inherits_the_cpus():
    """PID 1 pinned: every process init starts from then on inherits the CPUs, so pinwise says so
    and how to undo it. Run as PID 1 of a PID namespace of its own (never the machine's init)."""
    unshare = need("unshare")
    done = subprocess.run([unshare, "--fork", "--pid", "--mount-proc", "sh", "-c",
                           f"{shlex.quote(PINWISE)} pin --pid 1 --cpus 0 && grep Cpus_allowed_list /proc/1/status"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "unshare" in done.stderr:  # no PID namespaces here (a container without the right)
        pytest.skip(f"unshare --pid is refused here: {done.stderr.strip()[:120]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == ["Cpus_allowed_list:", "0"], done.stdout
    assert "warning: PID 1 is the init process: every process it starts from now on inherits these CPUs (undo " \
           "with: taskset -a -p -c" in done.stderr, done.stderr


def test_a_verified_program_has_the_terminal(tmp_path):
    """run --verify keeps its program in a process group of its own (so that whatever ends pinwise
    ends all of it) and hands it the terminal as a shell hands it to a job: the program reads what
    is typed, Ctrl-C reaches it, and pinwise reports where its threads ran and how it ended."""
    import pty
    import select

    pid, terminal = pty.fork()
    if pid == 0:  # pinwise leads the terminal's session, in its foreground, as under a shell
        os.execv(PINWISE, [PINWISE, "run", "--verify", "-p", "os", "--", "cat"])
    seen = []

    def read_until(text: str) -> bool:
        def more() -> bool:
            if select.select([terminal], [], [], 0.05)[0]:
                try:
                    seen.append(os.read(terminal, 4096).decode(errors="replace"))
                except OSError:  # the terminal closed: pinwise ended
                    return True
            return text in "".join(seen)
        return eventually(more, timeout=60) and text in "".join(seen)

    try:
        os.write(terminal, b"typed line\n")
        assert read_until("typed line\r\ntyped line"), seen  # echoed by the terminal, then by cat
        os.write(terminal, b"\x03")  # Ctrl-C: to the terminal's foreground group, the program's
        assert read_until("killed by signal SIGINT"), seen
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 130
    assert "where each thread ran" in "".join(seen) and "Traceback" not in "".join(seen)


def test_pin_refuses_what_it_cannot_honour(tmp_path):
    """pin moves the threads of a process of this machine: a topology of another machine, a
    mapping made for another machine, a process that has ended (a zombie), are each refused
    with one line, the process left where it was."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        before = os.sched_getaffinity(sleeper.pid)
        assert_clean_failure(run_pinwise("pin", "--pid", str(sleeper.pid), "-t", "x7550", "--cpus", "0"),
                             "this machine", "drop --topology")
        other = tmp_path / "x7550.json"
        run_pinwise("map", "/dev/stdin", "-t", "x7550", "-p", "compact", "-o", str(other), input="0,1\n1,0\n",
                    check=True)
        assert_clean_failure(run_pinwise("pin", "--pid", str(sleeper.pid), "--mapping", str(other)),
                             "made for another machine")
        assert os.sched_getaffinity(sleeper.pid) == before
    finally:
        sleeper.kill()
        sleeper.wait()
    ended = subprocess.Popen(["true"])
    try:
        assert eventually(lambda: open(f"/proc/{ended.pid}/stat").read().rpartition(")")[2].split()[0] == "Z")
        assert_clean_failure(run_pinwise("pin", "--pid", str(ended.pid), "--cpus", "0"), "zombie")
    finally:
        ended.wait()


@pytest.mark.parametrize("command", [("bench", "-r", "1"), ("simulate",), ("simulate", "-t", "pack:2 core:2 pu:1")])
def test_a_mapping_for_another_machine_is_refused_with_what_this_command_takes(tmp_path, command):
    """bench and simulate take a mapping file in --placement and have no --any-machine: the refusal
    names the map command that fits (with -t for a machine simulated), never an option they refuse."""
    other = tmp_path / "x7550.json"
    run_pinwise("map", "/dev/stdin", "-t", "x7550", "-p", "compact", "-o", str(other), input="0,1\n1,0\n", check=True)
    failed = run_pinwise(*command, "--policies", "", "--placement", f"a={other}", "--", "true")
    again = "for it (pinwise map COMM -t 'pack:2 core:2 pu:1' -o FILE)" if "-t" in command else \
        "for this machine (pinwise map COMM -o FILE)"
    assert_clean_failure(failed, "made for another machine", again)
    assert "--any-machine" not in failed.stderr


def test_python_api_pins_calling_thread():
    seen = {}

    def body():
        pin_self([1])
        seen.update(current_placement())
        seen["self"] = sorted(os.sched_getaffinity(0))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen["self"] == [1]
    assert sorted(os.sched_getaffinity(0)) == ALLOWED  # the caller is untouched


def test_c_api_reads_the_plan(tmp_path):
    source = tmp_path / "api.c"
    source.write_text(
        '#define _GNU_SOURCE\n#include <sched.h>\n#include <stdio.h>\n#include "pinwise.h"\n'
        "int main(void){ if (pinwise_pin_self(3) != 0) return 2; cpu_set_t s; sched_getaffinity(0, sizeof s, &s);"
        " printf(\"%d %d %d\\n\", pinwise_plan_slots(), CPU_ISSET(0, &s), CPU_ISSET(1, &s)); return 0; }\n")
    exe = tmp_path / "api"
    subprocess.run([need("gcc"), "-o", str(exe), str(source), f"-I{API_HEADER.parent}", str(API_LIBRARY),
                    f"-Wl,-rpath,{API_LIBRARY.parent}"], check=True)
    out = subprocess.run([str(exe)], env={**os.environ, "PINWISE_PLAN": "0;0;0;1"}, capture_output=True, text=True)
    assert out.stdout.split() == ["4", "0", "1"]  # slot 3 is CPU 1
    assert subprocess.run([str(exe)], env={k: v for k, v in os.environ.items() if k != "PINWISE_PLAN"}).returncode == 2


# -- placement syntax, evaluated on presets ------------------------------------------------------

def test_likwid_expressions_on_a_two_socket_smt_machine():
    machine = preset("x7550")  # 4 sockets x 8 cores x 2 threads; PU 2k and 2k+1 share a core
    assert likwid_evaluate("S0:0-3", machine) == [0, 2, 4, 6]  # physical cores first
    assert likwid_evaluate("S1:8", machine) == [17]  # the second thread of S1's first core
    assert likwid_evaluate("E:N:4:1:2", machine) == [0, 2, 4, 6]  # one thread per core
    assert likwid_evaluate("E:S0:4:2:4", machine) == [0, 1, 4, 5]
    assert likwid_evaluate("S:scatter", machine)[:5] == [0, 16, 32, 48, 2]
    assert likwid_evaluate("M1:0@M2:0", machine) == [16, 32]
    assert likwid_evaluate("0,5,2-3", machine) == [0, 5, 2, 3]
    assert likwid_evaluate("C3", machine)[0] == 48
    # A bare domain is its list as it stands (a core's hardware threads together), as likwid-pin
    # gives it; an index list counts physical cores first; ranges may run downwards.
    assert likwid_evaluate("S0", machine) == list(range(16))
    assert likwid_evaluate("N", machine)[:4] == [0, 1, 2, 3]
    assert likwid_evaluate("S0:3-1", machine) == [6, 4, 2]
    assert likwid_evaluate("3-1", machine) == [3, 2, 1]
    with pytest.raises(PinwiseError, match="no index after the colon"):  # likwid-pin 5.2 refuses "C3:"
        likwid_evaluate("C3:", machine)


def test_policies_on_presets():
    nehalem = preset("nehalem")
    assert resolve(Placement(policy="scatter"), nehalem).cpulist() == "0,4,1,5,2,6,3,7"
    assert resolve(Placement(policy="compact", threads=3), nehalem).cpulist() == "0,1,2"
    assert resolve(Placement(policy="spread", threads=2), nehalem).cpulist() == "0,4"
    assert resolve(Placement(policy="close", threads=16), nehalem).cpulist() == "0,0,1,1,2,2,3,3,4,4,5,5,6,6,7,7"
    assert resolve(Placement(policy="os"), nehalem) is None
    plan = resolve(Placement(cpus="1,3", threads=5), nehalem)
    assert plan.cpulist() == "1,3,1,3,1"


@pytest.mark.parametrize("options, words", [
    (["--cpus", "7"], ["CPU 7 does not exist"]),
    (["--cpus", "0,,1"], ["malformed"]),
    (["--cpus", "a"], ["neither a CPU list", "nor a likwid-pin expression"]),
    (["--cpus", ""], ["empty"]),
    (["--expr", "S9:0"], ["S9", "does not exist"]),
    (["--expr", "X:1"], ["cannot read likwid expression"]),
    (["--expr", "N:5"], ["out of range"]),
    (["--cpus", "0", "--skip", "0x" + "f" * 17], ["beyond 64 bits"]),
    (["--cpus", "0", "--skip", "zz"], ["not a hex number"]),
    (["--policy", "fastest"], ["unknown policy"]),
    (["--cpus", "0", "--policy", "compact"], ["only one placement"]),
    (["--cpus", "0", "-n", "0"], ["at least 1"]),
])
def test_bad_placement_is_refused_before_running(threads_exe, options, words):
    result = subprocess.run([PINWISE, "run", *options, "--", str(threads_exe), "1"], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL)
    assert_clean_failure(result, *words)
    assert "ready" not in result.stdout


def test_relative_program_path(threads_exe, monkeypatch):
    monkeypatch.chdir(threads_exe.parent)
    placement = run_and_read(pinwise_run("--cpus", "1") + [f"./{threads_exe.name}", "1"])
    assert placement == expected([1], 2)


def test_missing_and_crashing_programs(build_dir):
    assert_clean_failure(run_pinwise("run", "--cpus", "0", "--", "no-such-program-xyz"), "not found")
    assert_clean_failure(run_pinwise("run", "--cpus", "0", "--", "./no/such/path"), "not found")
    assert_clean_failure(run_pinwise("run", "--cpus", "0"), "no program")
    crash = compile_program("crash.c", build_dir)
    result = run_pinwise("run", "--cpus", "0,1", "--", str(crash))
    assert_clean_failure(result, "killed by signal SIGSEGV")
    assert result.returncode == 128 + 11


def test_static_program_is_refused_with_advice_that_works(tmp_path):
    source = tmp_path / "s.c"
    source.write_text("int main(void){return 0;}\n")
    exe = tmp_path / "s"
    if subprocess.run([need("gcc"), "-static", "-o", str(exe), str(source)], capture_output=True).returncode != 0:
        pytest.skip("no static libc to link a static test program")
    assert_clean_failure(run_pinwise("run", "--cpus", "0", "--", str(exe)), "statically linked", "--omp")
    # The advice is taken: the OpenMP runtime gets the plan, and pinwise says it cannot read it back.
    result = run_pinwise("run", "--verify", "--omp", "--cpus", "0", "--", str(exe))
    assert result.returncode == 0, result.stderr
    assert "cannot show where" in result.stderr and "statically linked" in result.stderr
    assert "all where asked" not in result.stderr


def test_a_host_that_closes_every_descriptor_keeps_its_own_file_clean(build_dir, tmp_path):
    own_files = compile_program("own_files.c", build_dir)
    out = tmp_path / "own.txt"
    result = run_pinwise("run", "--verify", "--cpus", "0", "--", str(own_files), str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "line from worker 1\nline from worker 2\nline from main\n"
    assert "3 threads, all where asked" in result.stderr  # and the library still logged every thread


def test_a_program_that_ignores_ld_preload_is_named_not_verified(build_dir, tmp_path):
    own_files = compile_program("own_files.c", build_dir)
    setgid = tmp_path / "own_files_setgid"
    setgid.write_bytes(own_files.read_bytes())
    os.chmod(setgid, 0o755)
    try:
        os.chown(setgid, -1, 65534)  # nogroup: the program's effective group differs from ours
        os.chmod(setgid, 0o2755)
    except PermissionError:
        pytest.skip("changing a file's group needs root")
    if os.getegid() == 65534:
        pytest.skip("already running as nogroup")
    result = run_pinwise("run", "--verify", "--cpus", "0", "--", str(setgid), str(tmp_path / "out.txt"))
    assert result.returncode == 0, result.stderr
    assert "did not load" in result.stderr and "set-group-ID" in result.stderr
    assert "all where asked" not in result.stderr and "not pinned" in result.stderr


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="NSDCMEL0123456789:,-@scatter ", max_size=24))
def test_random_expressions_never_traceback(text):
    machine = read_sysfs()
    try:
        cpus = likwid_evaluate(text, machine)
    except PinwiseError:
        return
    assert all(isinstance(c, int) for c in cpus)


def test_repeat_from_gives_later_threads_the_workers_slots(threads_exe):
    # Slots 0,1,2 = CPUs 0,1,0; past slot 2 the plan starts again at slot 1, never at main's slot 0.
    placement = run_and_read(pinwise_run("--cpus", "0,1,0", "--repeat-from", "1") + [str(threads_exe), "5"])
    assert placement == {0: [0], 1: [1], 2: [0], 3: [1], 4: [0], 5: [1]}
    plan = resolve(Placement(cpus="0,1,0"), read_sysfs())
    assert [plan.cpus_for_slot(k) for k in range(6)] == [(0,), (1,), (0,), (0,), (1,), (0,)]  # wraps to 0


def test_workers_created_in_rounds_keep_their_role(tmp_path):
    """The blog's pairs program creates its 4 workers 3 times; every round's worker j runs in slot j."""
    pairs = str(NATIVE_DIR / "bin" / "pairs")
    result = subprocess.run([PINWISE, "run", "--verify", "--cpus", "1,0,0,1,1", "--repeat-from", "1", "--", pairs,
                             "-r", "3", "-i", "1000"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    rows = [line.strip("│ ").split("│") for line in result.stderr.splitlines() if line.startswith("│")]
    slots = {int(row[0]): int(row[1]) for row in rows}
    assert slots == {0: 0, **{k: 1 + (k - 1) % 4 for k in range(1, 13)}}
    assert result.stderr.strip().endswith("13 threads, all where asked")


def test_unusable_repeat_from_is_refused(threads_exe):
    assert_clean_failure(subprocess.run(pinwise_run("--cpus", "0,1", "--repeat-from", "2") + [str(threads_exe), "1"],
                                        capture_output=True, text=True, stdin=subprocess.DEVNULL),
                         "repeats from slot 2", "slots 0 to 1")
    assert_clean_failure(subprocess.run(pinwise_run("--cpus", "0,1", "--repeat-from", "1", "--omp") + ["/bin/true"],
                                        capture_output=True, text=True, stdin=subprocess.DEVNULL),
                         "--repeat-from cannot be handed to the OpenMP runtime")
    # The preload library refuses it once, and the program runs unpinned rather than crash.
    env = {**os.environ, "LD_PRELOAD": str(PRELOAD_LIBRARY), "PINWISE_PLAN": "0;1", "PINWISE_REPEAT_FROM": "5"}
    result = subprocess.run([str(threads_exe), "1"], input="", capture_output=True, text=True, env=env)
    assert result.returncode == 0
    assert result.stderr.count("pinwise: unusable PINWISE_REPEAT_FROM=5 (want a slot below 2)") == 1


def test_no_verify_becomes_the_program_like_taskset():
    """--no-verify execs the program: its CPUs are the plan's, its exit status and signals are its own."""
    shown = run_pinwise("run", "--no-verify", "--cpus", "1", "--", "sh", "-c",
                        "grep Cpus_allowed_list /proc/self/status; exit 7")
    assert shown.returncode == 7 and shown.stdout.split() == ["Cpus_allowed_list:", "1"]
    killed = run_pinwise("run", "--no-verify", "--cpus", "0", "--", "sh", "-c", "kill -SEGV $$")
    assert killed.returncode == -11 and killed.stderr == ""
    assert_clean_failure(run_pinwise("run", "--no-verify", "--cpus", "0", "--", "no-such-program-xyz"), "not found")


def test_pinned_restores_every_thread_and_pin_threads_takes_a_list():
    import pinwise

    before = current_placement()
    with pinwise.pinned([1]) as cpus:
        assert cpus == [1]
        assert set(map(tuple, current_placement().values())) == {(1,)}
        inside: list = []
        worker = threading.Thread(target=lambda: inside.append(os.sched_getaffinity(0)))
        worker.start()
        worker.join()
        assert inside == [{1}]  # threads started inside inherit the restriction
    assert {tid: cpus for tid, cpus in current_placement().items() if tid in before} == before
    with pytest.raises(RuntimeError):
        with pinwise.pinned([0]):
            raise RuntimeError("the block failed")
    assert {tid: cpus for tid, cpus in current_placement().items() if tid in before} == before
    mixed = pinwise.pin_threads([0, 1, 0])  # a plain list, as the README shows it
    assert list(mixed.values())[0] == (0,)
    done = pinwise.pin_threads([1])  # a CPU list: thread k on its k-th CPU, wrapping round
    assert set(done.values()) == {(1,)} and set(map(tuple, current_placement().values())) == {(1,)}
    pinwise.pin_threads(Plan.from_cpus(sorted(os.sched_getaffinity(0) | {0, 1})))
    for tid, cpus in before.items():
        os.sched_setaffinity(tid, cpus)


def test_python_api_runs_each_stage(tmp_path, threads_exe):
    import pinwise

    drawn = str(pinwise.topology("nehalem")).splitlines()  # drawn as `pinwise topo` draws it
    assert drawn[0] == "nehalem: pack:2 l3:1 l2:4 l1:1 core:1 pu:1 (8 PUs)"
    assert "  Package 1 [NUMA 1] > L3 1 (8MiB): 4 5 6 7" in drawn
    assert pinwise.topology("nehalem").summary() == drawn[0]
    plan = pinwise.compute_mapping("locality", [[0, 5, 0], [5, 0, 1], [0, 1, 0]], "nehalem")  # a topology by name
    assert plan.nb_slots == 3 and len(set(plan.pus)) == 3
    matrix = [[0, 9, 0, 0], [9, 0, 0, 0], [0, 0, 0, 9], [0, 0, 9, 0]]
    assert pinwise.analyze(matrix).pattern == "pairs"
    plan = pinwise.map(matrix, "locality", "pack:2 core:2 pu:1")
    assert {frozenset(plan.pus[:2]), frozenset(plan.pus[2:])} == {frozenset({0, 1}), frozenset({2, 3})}
    result = pinwise.run([str(threads_exe), "1"], [1, 0], output=subprocess.DEVNULL)
    assert result.returncode == 0 and [t.start_cpu for t in result.threads] == [1, 0]
    assert [t.start_cpu for t in pinwise.run([str(threads_exe), "1"], "0", output=subprocess.DEVNULL).threads] == [0, 0]
    # a Plan for another machine is refused, as run --mapping refuses it (it ran, its threads unpinned)
    elsewhere = pinwise.compute_mapping("locality", [[0, 5, 0], [5, 0, 1], [0, 1, 0]], "pack:2 core:3 pu:2")
    with pytest.raises(PinwiseError, match="this plan was made for another machine"):
        pinwise.run([str(threads_exe), "1"], elsewhere, output=subprocess.DEVNULL)


@pytest.mark.parametrize("users_value", [None, "7"])
def test_programs_get_the_users_environment_not_pinwises_own_settings(tmp_path, users_value):
    """pinwise sets OPENBLAS_THREAD_TIMEOUT in its own process (processes.OWN_SETTINGS: its idle
    OpenBLAS threads sleep instead of spinning beside the measured program); the programs it runs,
    benches and traces see the user's value, or none."""
    from pinwise.processes import OWN_SETTINGS, own_settings, user_environment

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if users_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = users_value
    expected = users_value or "unset"
    show = ["sh", "-c", 'echo "sees ${OPENBLAS_THREAD_TIMEOUT-unset}"']
    ran = run_pinwise("run", "--no-verify", "--cpus", "0", "--", *show, env=env, check=True)
    assert f"sees {expected}" in ran.stdout
    seen = tmp_path / "seen.txt"
    run_pinwise("bench", "--db", str(tmp_path / "r.db"), "--runs", "1", "--policies", "compact", "--",
                "sh", "-c", f'echo "sees ${{OPENBLAS_THREAD_TIMEOUT-unset}}" > {seen}', env=env, check=True,
                timeout=300)
    assert seen.read_text().strip() == f"sees {expected}"
    saved = os.environ.get("OPENBLAS_THREAD_TIMEOUT")
    with own_settings():
        assert os.environ["OPENBLAS_THREAD_TIMEOUT"] == OWN_SETTINGS["OPENBLAS_THREAD_TIMEOUT"]
        assert user_environment().get("OPENBLAS_THREAD_TIMEOUT") == saved
    assert os.environ.get("OPENBLAS_THREAD_TIMEOUT") == saved
