"""How busy the machine was while a bench ran, so a verdict can say when it cannot be trusted.

Each run reads the kernel's CPU time counters (/proc/stat, all CPUs) before and after the
program and subtracts the program's own CPU time (from wait4's rusage) and pinwise's meanwhile
(starting the program, an adapt run's judging): what is left was used by other processes. Steal
time (a hypervisor running other guests on our CPUs) comes from the same line, the 1-minute load
average from /proc/loadavg at the start of each run. /proc/stat counts in ticks (10 ms), so one
short run's remainder is mostly rounding, either way: it is kept as it comes, negative or not,
and the summary adds the runs up, where the rounding cancels out. Clipped at zero run by run, it
only ever added: a bench of `true` (5 ms runs) read 28-41 % of an idle machine's time as others'.
A few short runs still leave the sum unsure (4 runs of 6 ms: a tick is a sixth of their time), so
a share counts as high only past its threshold by more than twice the rounding's spread.

A bench is called busy when other processes used more than BUSY_SHARE of all CPU time, or the
hypervisor stole more than STEAL_SHARE of it: then "no placement is faster" means "could not
tell", and the verdict says so instead of advising to leave the program to the OS.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass


#: Share of all CPUs' time used by other processes above which a bench is busy.
BUSY_SHARE = 0.15
#: Share of all CPUs' time stolen by the hypervisor above which a bench is busy.
STEAL_SHARE = 0.10

_TICK = 1.0 / os.sysconf("SC_CLK_TCK")
#: How far one run's others' CPU time is off from /proc/stat's ticks alone, in ticks (a standard
#: deviation): the busy time of the runs of `true` on an idle 2-CPU guest came out a tick high or
#: low, or right, about as often.
ROUNDING_SD = 0.7


@dataclass(frozen=True)
class CpuTimes:
    """Seconds of CPU time over all CPUs since boot: busy (user, nice, system, irq, softirq),
    stolen by the hypervisor, and all of it (idle and iowait included)."""

    busy: float
    steal: float
    total: float


def cpu_times(path: str = "/proc/stat") -> CpuTimes | None:
    try:
        with open(path) as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
    # inside user and nice, so it is not added again.
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) * _TICK for v in fields[1:9])
    busy = user + nice + system + irq + softirq
    return CpuTimes(busy, steal, busy + idle + iowait + steal)


def load_average(path: str = "/proc/loadavg") -> float | None:
    try:
        with open(path) as loadavg:
            return float(loadavg.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def own_cpu() -> float:
    """CPU seconds pinwise's own process (all its threads) has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_noise(before: CpuTimes | None, after: CpuTimes | None, own_cpu: float) -> dict:
    """The columns one run records: CPU seconds other processes used (``own_cpu``: the program's
    and pinwise's; negative where the ticks rounded the other way: module docstring), seconds
    stolen, and all CPU seconds that passed (the capacity) during the run."""
    if before is None or after is None:
        return {"others_cpu": None, "steal_cpu": None, "all_cpu": None}
    return {"others_cpu": after.busy - before.busy - own_cpu, "steal_cpu": after.steal - before.steal,
            "all_cpu": after.total - before.total}


@dataclass(frozen=True)
class Noise:
    """What the machine was doing during a bench, summed over its runs."""

    others: float | None       # share of all CPU time used by other processes
    steal: float | None        # share stolen by the hypervisor
    load: float | None         # highest 1-minute load average at the start of a run
    cv_low: float              # smallest and largest coefficient of variation over the placements
    cv_high: float
    outliers: int              # runs with a modified z-score above 3.5, over all placements
    runs: int
    #: How far the shares may be off from /proc/stat's rounding alone (ROUNDING_SD per run, twice
    #: over the runs' capacity): a share is called high only past its threshold by more than this.
    rounding: float = 0.0

    @property
    def busy(self) -> bool:
        return bool((self.others is not None and self.others > BUSY_SHARE + self.rounding)
                    or (self.steal is not None and self.steal > STEAL_SHARE + self.rounding))

    def describe(self) -> str:
        """One line of numbers, e.g. "other processes used 47% of the CPU time, steal 0.1%, load
        average up to 4.1, CV 16-55%, 3 outliers in 70 runs"."""
        parts = []
        if self.others is not None:
            parts.append(f"other processes used {self.others:.0%} of the CPU time")
        if self.steal is not None:
            parts.append(f"steal {self.steal:.1%}")
        if self.load is not None:
            parts.append(f"load average up to {self.load:.1f}")
        parts.append(f"CV {self.cv_low:.0%}-{self.cv_high:.0%}" if self.cv_low != self.cv_high
                     else f"CV {self.cv_low:.0%}")
        parts.append(f"{self.outliers} outlier{'s' if self.outliers != 1 else ''} in {self.runs} runs")
        return ", ".join(parts)


def summarize_noise(rows: list, samples: list) -> Noise:
    """``rows``: the bench's measured runs (:class:`pinwise.bench.db.Run`); ``samples``: each
    placement's times (for the CV and the outliers)."""
    def total(name):
        values = [getattr(r, name) for r in rows]
        return None if not values or any(v is None for v in values) else sum(values)

    capacity = total("all_cpu")
    others, steal = total("others_cpu"), total("steal_cpu")
    # each run's counts are off by about a tick either way, independently: their sum by sqrt(runs)
    rounding = 2 * ROUNDING_SD * _TICK * len(rows) ** 0.5 / capacity if capacity else 0.0
    share = (lambda v: None if v is None or not capacity else min(1.0, max(0.0, v / capacity)))
    loads = [r.load1 for r in rows if r.load1 is not None]
    from .. import stats  # numpy: not loaded by the commands that only run programs (run, simulate)

    cvs = [stats.spread(s).cv for s in samples if len(s) > 1 and stats.spread(s).mean > 0]
    return Noise(share(others), share(steal), max(loads) if loads else None,
                 min(cvs, default=0.0), max(cvs, default=0.0), sum(stats.outliers(s) for s in samples),
                 sum(len(s) for s in samples), rounding)
