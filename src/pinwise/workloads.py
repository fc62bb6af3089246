"""Capability 9: built-in workload programs that make the papers' communication patterns on demand.

All but ``blog-pairs`` are one C program (native/workloads/patterns.c): the main thread is thread
0 and works like the others, each iteration makes 1000 accesses per thread, a share of them atomic
increments on lines shared with the thread's partners, the rest on its own private lines.
``blog-pairs`` is the thread-affinity blog's experiment as published (native/workloads/pairs.c).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PinwiseError
from .pinning.launcher import NATIVE_DIR
from .vocabulary import Pattern


@dataclass(frozen=True)
class Workload:
    name: str
    partners: str
    like: str
    pattern: Pattern          # what pinwise analyze must read in its matrix
    verbatim: bool = False    # the blog's own program (native/workloads/pairs.c), not patterns.c


WORKLOADS = {w.name: w for w in [
    Workload("pairs", "thread i with i^1: pairs fighting over an atomic", "the thread-affinity blog", Pattern.PAIRS),
    Workload("neighbour", "thread i with i-1 and i+1", "NPB UA", Pattern.NEIGHBOUR),
    Workload("far-pairs", "thread i with i+T/2", "NPB LU", Pattern.FAR_PAIRS),
    Workload("master", "thread 0 with everyone (initialisation/reduction)", "PARSEC blackscholes", Pattern.MASTER),
    Workload("pipeline", "stage i hands on to i+1; the middle stage works twice as hard", "PARSEC ferret", Pattern.PIPELINE),
    Workload("all-to-all", "everyone with everyone, evenly", "PARSEC swaptions", Pattern.ALL_TO_ALL),
    Workload("private", "no sharing at all", "NPB EP", Pattern.NONE),
    Workload("blog-pairs", "the blog's program: 2 pairs of threads x 100k increments, main idle", "the blog, verbatim",
             Pattern.PAIRS, verbatim=True),
]}

#: The workload of native/workloads/patterns.c that makes each pattern.
WORKLOAD_OF = {w.pattern: name for name, w in WORKLOADS.items() if not w.verbatim}

TIME_REGEX = r"Time in seconds = *([0-9.]+)"

#: The workload programs as installed on the environment's PATH (native/CMakeLists.txt).
PATH_NAMES = {"patterns": "pinwise-patterns", "pairs": "pinwise-pairs", "rounds": "pinwise-rounds"}


def on_path(program: str) -> str:
    """A workload program by the name it has on PATH (pinwise-patterns, ...) when that name finds
    the copy installed with this pinwise, its full path otherwise (e.g. the environment is not
    activated, or PATH finds another installation's)."""
    import os
    import shutil
    import sysconfig

    name = PATH_NAMES.get(os.path.basename(program))
    found = shutil.which(name) if name else None
    ours = os.path.join(sysconfig.get_path("scripts"), name) if name else None
    return name if found and os.path.exists(ours) and os.path.samefile(found, ours) else program


#: The blog's program as published: an idle main thread and two pairs.
BLOG_THREADS = 5


def workload_command(name: str, threads: int | None = None, iterations: int = 2000, shared_ratio: float | None = None,
                     imbalance: float | None = None, size_kib: int | None = None) -> list[str]:
    """The command line that runs a workload (``threads`` by default 4, the blog's program 5;
    ``shared_ratio`` 0.5, ``size_kib`` 4: patterns.c's knobs, which the blog's program has not)."""
    if name not in WORKLOADS:
        raise PinwiseError(f"unknown workload {name!r}: choose one of {', '.join(WORKLOADS)} (pinwise workload list)")
    if WORKLOADS[name].verbatim:
        given = [option for option, value in (("--shared-ratio", shared_ratio), ("--imbalance", imbalance),
                                              ("--size", size_kib)) if value is not None]
        if given:
            raise PinwiseError(f"{name} is the blog's program as published (each pair increments one counter): "
                               f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to it")
        threads = BLOG_THREADS if threads is None else threads
        if threads < 3 or threads % 2 == 0:
            raise PinwiseError(f"{name} runs an idle main thread beside its pairs: --threads is 1 + 2 per pair (3, 5, "
                               f"7, ...), not {threads}")
        if iterations < 1:
            raise PinwiseError(f"--iterations must be at least 1, not {iterations}")
        return [str(NATIVE_DIR / "bin" / "pairs"), "-p", str((threads - 1) // 2), "-r", str(max(1, iterations // 100))]
    threads = 4 if threads is None else threads
    shared_ratio = 0.5 if shared_ratio is None else shared_ratio
    size_kib = 4 if size_kib is None else size_kib
    if not 1 <= threads <= 1024:
        raise PinwiseError(f"--threads must be between 1 and 1024, not {threads}")
    if iterations < 1:
        raise PinwiseError(f"--iterations must be at least 1, not {iterations}")
    if not 0 <= shared_ratio <= 1:
        raise PinwiseError(f"--shared-ratio must be between 0 and 1, not {shared_ratio}")
    if imbalance is not None and not 0 <= imbalance <= 100:
        raise PinwiseError(f"--imbalance must be between 0 and 100, not {imbalance}")
    if not 1 <= size_kib <= 1 << 20:
        raise PinwiseError(f"--size must be between 1 and 1048576 KiB, not {size_kib}")
    command = [str(NATIVE_DIR / "bin" / "patterns"), name, "-n", str(threads), "-i", str(iterations),
               "-s", str(shared_ratio), "-z", str(size_kib)]
    if imbalance is not None:
        command += ["-m", str(imbalance)]
    return command
