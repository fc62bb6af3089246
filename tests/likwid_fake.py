"""The real likwid-pin 5.2 on a machine one describes: likwid reads its topology from
``/etc/likwid_topo.cfg`` when that file exists (the file ``likwid-genTopoCfg`` writes), so the
file is made from a pinwise Topology and shown to likwid-pin through an overlay on /etc in a mount
namespace of its own (nothing on this machine changes); a preloaded ``sched_getaffinity`` says
every CPU of that machine may be used. ``likwid-pin -p -c EXPR`` then prints the CPU list likwid
makes of an expression, which the tests compare with pinwise's.

The file is what likwid's own code reads (topology.c, readTopologyFile): each hardware thread
with its core and socket (likwid orders cores by id within a socket and threads by id within a
core: logical indexes and OS indexes give hwloc's order), the caches with the threads sharing each,
and the NUMA nodes with their CPUs in ascending order, as Linux lists a node's CPUs. It needs
root (for the mount namespace), an overlay file system, gcc and likwid-pin; ``available`` says
why not where it cannot run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SHIM = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
/* likwid takes the CPUs this process may use from sched_getaffinity: all of the described machine */
int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask) { (void)pid; memset(mask, 0xff, size); return 0; }
"""


def topology_file(topology) -> str:
    """likwid's topology file for a machine whose PUs are numbered 0..N-1."""
    pus = list(topology.pus)
    if sorted(pu.os_index for pu in pus) != list(range(len(pus))):
        raise ValueError("likwid's topology file indexes hardware threads by OS index: number them 0..N-1")
    packages = topology.objects("package") or [topology.root]
    cores = topology.objects("core")

    def enclosing(pu, type_, default):
        return next((a for a in pu.ancestors() if a.type == type_), default)

    lines = ["cpuid_info osname = pinwise", "cpuid_info architecture = x86_64", "cpuid_info isIntel = 1",
             "cpuid_info family = 6", "cpuid_info model = 85", "cpuid_info stepping = 4", "cpuid_info clock = 2e9",
             "cpuid_info features = SSE", "cpuid_info featureFlags = 0", "cpuid_info vendor = 0", "cpuid_info part = 0",
             "cpuid_info supportUncore = 0", "cpuid_info supportClientmem = 0", "cpuid_info turbo = 0",
             "cpuid_info perf_version = 0", "cpuid_info perf_num_ctr = 0", "cpuid_info perf_num_fixed_ctr = 0",
             "cpuid_info perf_width_ctr = 0"]
    threads_per_core = max((len(c.children) for c in cores), default=1)
    lines += [f"cpuid_topology numHWThreads = {len(pus)}", f"cpuid_topology numSockets = {len(packages)}",
              f"cpuid_topology numCoresPerSocket = {max(len(cores) // len(packages), 1)}",
              f"cpuid_topology numThreadsPerCore = {threads_per_core}", "cpuid_topology numDies = 0"]
    for pu in pus:
        core = enclosing(pu, "core", pu)
        package = enclosing(pu, "package", topology.root)
        thread_id = core.children.index(pu) if core is not pu else 0
        core_id = core.logical_index if core is not pu else pu.logical_index
        fields = (("threadId", thread_id), ("coreId", core_id), ("packageId", packages.index(package)),
                  ("apicId", pu.os_index), ("dieId", 0))
        lines += [f"cpuid_topology threadPool {pu.os_index} {name} = {value}" for name, value in fields]
    caches = [t for t in ("l1", "l2", "l3") if topology.objects(t)]
    lines.append(f"cpuid_topology numCacheLevels = {len(caches)}")
    for level, type_ in enumerate(caches, 1):
        first = topology.objects(type_)[0]
        kind = "DATACACHE" if type_ == "l1" else "UNIFIEDCACHE"
        lines += [f"cpuid_topology cacheLevels {level} {name} = {value}" for name, value in (
            ("type", kind), ("associativity", 8), ("sets", 64), ("lineSize", 64), ("size", first.cache_size or 32768),
            ("threads", len(first.cpuset)), ("inclusive", 0))]
    nodes = topology.numa_nodes
    lines.append(f"numa_info numberOfNodes = {len(nodes)}")
    for k, node in enumerate(nodes, 1):
        cpus = sorted(node.cpuset)
        lines += [f"numa_info nodes {k} id = {node.os_index}", f"numa_info nodes {k} numberOfProcessors = {len(cpus)}",
                  f"numa_info nodes {k} totalMemory = 1000000", f"numa_info nodes {k} freeMemory = 900000",
                  f"numa_info nodes {k} numberOfDistances = {len(nodes)}"]
        lines += [f"numa_info nodes {k} processors {i} = {cpu}" for i, cpu in enumerate(cpus, 1)]
        lines += [f"numa_info nodes {k} distances {j} = {10 if j == k - 1 else 20}" for j in range(len(nodes))]
    return "\n".join(lines) + "\n"


def available() -> str | None:
    """Why the real likwid-pin cannot be run on a described machine here, or None."""
    for tool in ("likwid-pin", "unshare", "gcc", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "a mount namespace with an overlay on /etc needs root"
    return None


class FakeLikwid:
    """likwid-pin on one described machine: ``cpus(expression)`` is likwid-pin's CPU list, or
    None where likwid-pin refuses the expression."""

    def __init__(self, topology, folder: Path):
        self.folder = folder
        (folder / "upper").mkdir()
        (folder / "upper" / "likwid_topo.cfg").write_text(topology_file(topology))
        source = folder / "allcpus.c"
        source.write_text(SHIM)
        self.shim = folder / "allcpus.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(self.shim), str(source)], check=True)

    def cpus(self, *expressions: str) -> dict[str, list[int] | None]:
        """likwid-pin's CPU list for each expression (None where it refuses it), all in one mount
        namespace."""
        work = Path(tempfile.mkdtemp(dir=self.folder))
        script = ('mount -t overlay overlay -o lowerdir=/etc,upperdir="$1",workdir="$2" /etc || exit 99; shift 2; '
                  'for e in "$@"; do echo "@@ $(likwid-pin -p -c "$e" 2>/dev/null | tail -n 1) rc=$?"; done')
        done = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(self.folder / "upper"), str(work),
                               *expressions], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "LD_PRELOAD": str(self.shim)})
        if done.returncode == 99:
            raise RuntimeError(f"cannot mount an overlay on /etc here: {done.stderr.strip()}")
        found = {}
        lines = [line for line in done.stdout.splitlines() if line.startswith("@@ ")]
        for expression, line in zip(expressions, lines, strict=True):
            printed = line[3:].rsplit(" rc=", 1)[0].strip()
            valid = printed and all(c.isdigit() for c in printed.split(","))
            found[expression] = [int(c) for c in printed.split(",")] if valid else None
        return found
