"""pinwise run on the programs users run: runtimes that size themselves from the affinity mask
(OpenBLAS, libgomp, LLVM's libomp), launchers (a shell, time, env, numactl, a Python script), fork
pools and programs whose work runs in a child. Where every thread ran is read back from /proc,
and what `--verify` says of it (pinwise.pinning.readback) is checked against that."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS, compile_program, need, run_pinwise
from test_pinning import ALLOWED, expected, omp_exes, pinwise_run, run_and_read  # noqa: F401 - omp_exes is a fixture

pytestmark = pytest.mark.skipif(ALLOWED[:2] != [0, 1], reason="needs CPUs 0 and 1")
OPENBLAS_INCLUDE = Path("/usr/include/x86_64-linux-gnu/openblas-pthread")


@pytest.fixture(scope="module")
def mask_sized(build_dir):
    """The program linked with libmask_sized.so, a runtime whose constructor starts one worker per
    CPU of the mask, before the preload library's constructor runs."""
    compile_program("mask_sized.c", build_dir, "-DRUNTIME", "-shared", "-fPIC", name="libmask_sized.so")
    return compile_program("mask_sized.c", build_dir, f"-L{build_dir}", "-lmask_sized", f"-Wl,-rpath,{build_dir}")


def tasks(output: str) -> list[list[int]]:
    """The allowed CPUs of each thread, from the "task TID CPUS" lines a program printed."""
    from pinwise.cpulist import parse_cpulist

    return [parse_cpulist(line.split()[2]) for line in output.splitlines() if line.startswith("task ")]


def verify(*argv: str, options: tuple[str, ...] = (), env: dict | None = None) -> subprocess.CompletedProcess:
    result = run_pinwise("run", "--verify", *options, "--", *argv, env=env, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return result


def said(result: subprocess.CompletedProcess) -> list[str]:
    """What pinwise said after the table, line by line."""
    return [line for line in result.stderr.splitlines() if line.startswith("pinwise: ")]


def test_a_program_that_leaves_by_exit_without_a_record_is_not_all_where_asked():
    """A process that ends by _exit writes no thread's record: --verify says nothing was read back,
    never "0 threads, all where asked"."""
    result = run_pinwise("run", "--cpus", "0", "--verify", "--", sys.executable, "-c", "import os; os._exit(3)")
    assert result.returncode == 3, result.stderr
    assert "was read back: it ended before the preload library wrote where its threads ran" in result.stderr
    assert "all where asked" not in result.stderr, result.stderr


# -- runtimes that size themselves from the mask when they load ---------------------------------

@pytest.mark.parametrize("cpus, workers", [("1,0,1", 2), ("1", 1), ("0,0,0", 1)])
def test_a_runtime_sized_at_load_sees_the_whole_plan(mask_sized, cpus, workers):
    """The runtime's constructor runs before the preload library's: it sees the plan's CPUs (the
    mask pinwise starts the program with), and the workers it starts there are pinned in turn."""
    placement = run_and_read(pinwise_run("--cpus", cpus) + [str(mask_sized)])
    assert len(placement) == 1 + workers  # the runtime counted the plan's distinct CPUs
    assert placement == expected([int(c) for c in cpus.split(",")], 1 + workers)


def test_openblas_linked_into_a_c_program_starts_every_thread_the_plan_allows(build_dir):
    if not (OPENBLAS_INCLUDE / "cblas.h").exists():
        pytest.skip("libopenblas-dev is not installed (make deps installs it as root)")
    exe = compile_program("blas_threads.c", build_dir, f"-I{OPENBLAS_INCLUDE}", "-lopenblas")
    result = verify(str(exe), options=("--cpus", "1,0"), env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert "openblas 2" in result.stdout
    assert tasks(result.stdout) == [[1], [0]]  # main on slot 0's CPU, OpenBLAS's worker on slot 1's
    assert said(result) == ["pinwise: 2 threads, all where asked"]


def test_numpy_starts_two_openblas_threads_on_two_cpus():
    """The issue's command: OPENBLAS_NUM_THREADS=2 pinwise run --cpus 0,1 --verify -- python3 mm.py."""
    result = verify(sys.executable, str(PROGRAMS / "blas_threads.py"), "300", options=("--cpus", "0,1"),
                    env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert tasks(result.stdout) == [[0], [1]]
    assert said(result) == ["pinwise: 2 threads, all where asked"]


def every_list(cpus: list[int], length: int) -> list[str]:
    return [",".join(map(str, plan)) for plan in itertools.product(cpus, repeat=length)]


@pytest.mark.parametrize("threads", [2, 5])
@pytest.mark.parametrize("runtime", ["libgomp", "libomp"])
def test_openmp_runtimes_land_every_thread_where_asked_in_every_plan(omp_exes, runtime, threads):
    """All 32 plans of 5 CPUs drawn from two, for teams of 2 and 5 threads, read back from /proc:
    LLVM's libomp used to give every worker the main thread's narrowed mask."""
    program = omp_exes[0] if runtime == "libgomp" else omp_exes[1]
    if program is None:
        pytest.skip("LLVM's libomp is not installed (libomp-dev)")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    wrong = {}
    for plan in every_list(ALLOWED[:2], 5):
        placement = run_and_read(pinwise_run("--cpus", plan) + [str(program)], env=env)
        if placement != expected([int(c) for c in plan.split(",")], threads):
            wrong[plan] = placement
    assert not wrong


def test_libomp_with_two_threads_through_verify(omp_exes):
    """The issue's command: OMP_NUM_THREADS=2 pinwise run --cpus 1,0 -- ./omp_app."""
    if omp_exes[1] is None:
        pytest.skip("LLVM's libomp is not installed (libomp-dev)")
    result = verify(str(omp_exes[1]), options=("--cpus", "1,0"), env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert said(result) == ["pinwise: 2 threads, all where asked"]


# -- fewer threads than the plan ---------------------------------------------------------------

def test_fewer_threads_than_the_plan_is_said(build_dir):
    threads = compile_program("threads.c", build_dir)
    result = verify(str(threads), "1", options=("--cpus", "1,0,1"))
    assert said(result) == ["pinwise: 2 threads, all where asked; the plan has 3 slots: the program ran fewer "
                            "threads than the plan (slot 2 unused)"]


def test_a_program_that_starts_no_thread_keeps_the_whole_plan_and_says_so(build_dir):
    threads = compile_program("threads.c", build_dir)
    assert run_and_read(pinwise_run("--cpus", "1,0") + [str(threads), "0"]) == {0: [0, 1]}
    result = verify(str(threads), "0", options=("--cpus", "1,0"))
    lines = said(result)
    assert len(lines) == 1 and lines[0].startswith("pinwise: 1 thread, left on the plan's CPUs 0,1: the program "
                                                   "started no thread")
    assert lines[0].endswith("the plan has 2 slots: the program ran fewer threads than the plan (slot 1 unused)")
    assert "whole plan (no thread started)" in result.stderr


# -- launchers, fork pools, work in a child ------------------------------------------------------

@pytest.mark.parametrize("launcher", [
    ["/bin/sh", "-c", '"$0" "$@"; exit $?'],
    [str(PROGRAMS / "wrapper.sh")],
    ["time"],
    ["env", "PINWISE_TEST=1"],
    ["numactl", "--localalloc"],
    [sys.executable, str(PROGRAMS / "py_launcher.py")],
])
def test_the_program_a_launcher_starts_takes_the_plan(build_dir, launcher):
    """Whatever starts it, the program that creates the threads gets the plan from slot 0."""
    need(launcher[0])
    threads = compile_program("threads.c", build_dir)
    assert run_and_read(pinwise_run("--cpus", "1,0") + launcher + [str(threads), "2"]) == expected([1, 0], 3)
    lines = said(verify(*launcher, str(threads), "2", options=("--cpus", "1,0")))
    if launcher[0] in ("env", "numactl"):  # they exec the program: one process, one program
        assert lines == ["pinwise: 3 threads, all where asked"]
    else:
        assert lines[0].startswith("pinwise: threads (pid ") and lines[0].endswith(": 3 threads, all where asked")
        assert lines[1].startswith("pinwise: 1 more program took the plan on the way, not in the table: "), lines


def test_no_follow_leaves_the_child_alone_and_says_so(build_dir):
    threads = compile_program("threads.c", build_dir)
    shell = ["/bin/sh", "-c", '"$0" "$@"; exit $?', str(threads), "2"]
    assert all(cpus == ALLOWED for cpus in run_and_read(pinwise_run("--cpus", "1", "--no-follow") + shell).values())
    lines = said(verify(*shell, options=("--cpus", "1", "--no-follow")))
    assert any(line.startswith("pinwise: threads (pid ") and line.endswith(
        "was not followed (--no-follow): its 3 threads ran where the OS put them") for line in lines), lines
    assert not any("all where asked" in line for line in lines), lines


def test_fork_pool_workers_take_the_next_slots(build_dir):
    pool = compile_program("fork_pool.c", build_dir)
    assert run_and_read(pinwise_run("--cpus", "1,0,0") + [str(pool), "3"]) == {0: [1], 1: [0], 2: [0], 3: [1]}
    lines = said(verify(str(pool), "3", options=("--cpus", "1,0,0")))
    assert lines[0].startswith("pinwise: fork_pool (pid ")
    assert lines[0].endswith(") and its 3 forked copies: 4 threads, all where asked")


def test_workers_started_in_a_child_continue_the_numbering(build_dir):
    """The child's main thread is thread 1, its workers 2 and 3: one numbering for the program,
    shared with the copies it forks, so no slot is handed out twice."""
    spawn = compile_program("spawn_child.c", build_dir)
    assert run_and_read(pinwise_run("--cpus", "0,1,1,0") + [str(spawn), "2"]) == expected([0, 1, 1, 0], 4)
    lines = said(verify(str(spawn), "2", options=("--cpus", "0,1,1,0")))
    assert lines[0].startswith("pinwise: spawn_child (pid ")
    assert lines[0].endswith(") and its 1 forked copy: 4 threads, all where asked")


def test_two_programs_that_each_take_the_plan_are_named(build_dir):
    threads = compile_program("threads.c", build_dir)
    lines = said(verify("/bin/sh", "-c", f"{threads} 1 & {threads} 1; wait", options=("--cpus", "1,0")))
    assert sum(line.endswith(": 2 threads, all where asked") for line in lines) == 2, lines
    assert "pinwise: 2 programs took the plan, each from slot 0: their threads share its CPUs" in lines


# -- real programs Debian ships ------------------------------------------------------------------

@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.bin"
    path.write_bytes(os.urandom(3 << 20))
    return path


def real_program_threads(argv: list[str], plan: str) -> list:
    """Run a real program (through a shell) with pinwise's Python API; its followed program's
    threads as the library read them back."""
    import pinwise
    from pinwise.pinning.readback import principal, programs

    result = pinwise.run(argv, plan, output=subprocess.DEVNULL)
    assert result.returncode == 0
    (program,) = principal(programs(result), result.pid)
    return program


@pytest.mark.parametrize("tool, command", [
    ("xz", "xz -T2 --block-size=1MiB -0 -c {data} > /dev/null"),
    ("pigz", "pigz -p 2 -c {data} > /dev/null"),
])
def test_compressors_run_through_a_shell_are_pinned(data_file, tool, command):
    """The issue's command (pinwise run --policy compact --verify -- sh -c 'pigz -p 2 ...') said
    "1 threads, all where asked" while pigz ran unpinned: now the compressor's threads take the plan."""
    need(tool)
    shell = ["/bin/sh", "-c", command.format(data=data_file) + "; exit $?"]
    program = real_program_threads(shell, "1,0")
    assert program.name == tool and len(program.threads) >= 3  # main and at least two workers
    for thread in program.threads:
        assert thread.requested == ((1,) if thread.slot == 0 else (0,)) and thread.ran_where_asked, thread
    lines = said(verify(*shell, options=("--policy", "compact")))
    assert lines[0].startswith(f"pinwise: {tool} (pid ") and ", under sh): " in lines[0], lines
    assert lines[0].endswith("threads, all where asked")


def test_bench_says_when_the_program_ran_fewer_threads_than_the_plan(build_dir, tmp_path):
    threads = compile_program("threads.c", build_dir)
    result = run_pinwise("bench", "--db", str(tmp_path / "r.db"), "-r", "2", "--policies", "os",
                         "--placement", "three=1,0,1", "--placement", "two=1,0", "--", str(threads), "1", timeout=300)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "fewer threads than the plan" in line]
    assert warnings[0] == ("pinwise: warning: three: the program ran 2 threads, the plan has 3 slots: the program ran "
                           "fewer threads than the plan, so part of the placement places nothing (check "
                           "OMP_NUM_THREADS and the program's own thread count)")
    assert not any(line.startswith("pinwise: warning: two:") for line in warnings)
    report = run_pinwise("report", str(tmp_path / "r.db"), check=True).stdout
    assert "the program ran fewer threads than the plan (slots that placed nothing): three (2 threads of 3 slots)" \
        in report.replace("\n", " ")


def test_fewer_threads_than_the_trace_a_plan_in_rounds_was_made_from(tmp_path):
    """A plan for workers created in rounds holds the creator and one round, and remembers the
    threads of its trace: 3 rounds of 4 traced, 2 run (9 threads, more than its 5 slots) is said."""
    from conftest import in_rounds

    from pinwise.comm import write_comm
    from pinwise.pinning.launcher import NATIVE_DIR

    write_comm(in_rounds(4, 3), tmp_path / "comm.json")
    run_pinwise("map", str(tmp_path / "comm.json"), "--policy", "compact", "-o", str(tmp_path / "map.json"), check=True)
    lines = said(verify(str(NATIVE_DIR / "bin" / "pairs"), "-r", "2", "-i", "1000",
                        options=("--mapping", str(tmp_path / "map.json"))))
    assert lines == ["pinwise: 9 threads, all where asked; its trace showed 13 threads: the program ran fewer threads "
                     "than its trace"]


def test_omp_through_a_shell_is_judged_by_the_places_the_runtime_gives(omp_exes):
    """--omp hands the plan to the OpenMP runtime, which a program started by a shell inherits;
    --verify judges that program's threads by their places, not by the affinity they started with."""
    shell = ["/bin/sh", "-c", '"$0" "$@"; exit $?', str(omp_exes[0])]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    assert run_and_read(pinwise_run("--omp", "--cpus", "1,0") + shell, env=env) == {0: [1], 1: [0]}
    result = verify(*shell, options=("--omp", "--cpus", "1,0"), env=env)
    rows = [line.strip("│ ").split("│") for line in result.stderr.splitlines() if line.startswith("│")]
    assert [(row[3].strip(), row[-1].strip()) for row in rows] == [("1", "ok"), ("0", "ok")]
    assert said(result)[0].endswith(", under sh): 2 threads, all where asked")


def test_a_static_program_a_shell_starts_is_named_unseen(tmp_path):
    """LD_PRELOAD cannot reach a statically linked program: started by a shell, it is named, never
    counted among the threads where asked."""
    import re

    source = tmp_path / "static.c"
    source.write_text("int main(void){return 0;}\n")
    exe = tmp_path / "static_prog"
    if subprocess.run([need("gcc"), "-static", "-o", str(exe), str(source)], capture_output=True).returncode != 0:
        pytest.skip("no static libc to link a static test program")
    lines = said(verify("/bin/sh", "-c", f"{exe}; exit $?", options=("--cpus", "1,0")))
    assert any(re.fullmatch(r"pinwise: static_prog \(pid [0-9]+\) was started but did not load pinwise's preload "
                            r"library \(statically linked, set-user-ID, or started without LD_PRELOAD\): its threads "
                            r"were neither pinned nor seen", line) for line in lines), lines
