"""The real libgomp on a machine one describes: libgomp builds OMP_PLACES=cores, sockets,
ll_caches and numa_domains from /sys/devices/system (cpuN/topology/thread_siblings_list and
core_siblings_list, cpuN/cache/indexK/level and shared_cpu_list, node/online and nodeN/cpulist)
and from the CPUs the process may use (pthread_getaffinity_np). A preloaded library (built here
from SHIM) shows it a sysfs tree written from a pinwise Topology and the allowed CPUs of that
topology, and lets its thread binding succeed without binding (the CPUs need not exist here), so
that omp_get_place_proc_ids and omp_get_place_num report what libgomp made of the machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pinwise.cpulist import format_cpulist

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void allowed(size_t size, cpu_set_t *mask)
{
    const char *list = getenv("FAKE_ALLOWED");
    CPU_ZERO_S(size, mask);
    while (list && *list) {
        char *end;
        long first = strtol(list, &end, 10), last = first;
        if (*end == '-')
            last = strtol(end + 1, &end, 10);
        for (long cpu = first; cpu <= last; cpu++)
            CPU_SET_S(cpu, size, mask);
        list = *end ? end + 1 : end;
    }
}

int pthread_getaffinity_np(pthread_t thread, size_t size, cpu_set_t *mask) { (void)thread; allowed(size, mask); return 0; }
int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask) { (void)pid; allowed(size, mask); return 0; }
int pthread_setaffinity_np(pthread_t thread, size_t size, const cpu_set_t *mask) { (void)thread; (void)size; (void)mask; return 0; }
int pthread_attr_setaffinity_np(pthread_attr_t *attr, size_t size, const cpu_set_t *mask) { (void)attr; (void)size; (void)mask; return 0; }

long sysconf(int name)
{
    static long (*real)(int);
    if (!real)
        real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    if ((name == _SC_NPROCESSORS_CONF || name == _SC_NPROCESSORS_ONLN) && getenv("FAKE_NCPUS"))
        return atol(getenv("FAKE_NCPUS"));
    return real(name);
}

FILE *fopen(const char *path, const char *mode)
{
    static FILE *(*real)(const char *, const char *);
    char moved[4096];
    const char *root = getenv("FAKE_SYSFS");
    if (!real)
        real = (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "fopen");
    if (root && strncmp(path, "/sys/devices/system/", 20) == 0) {
        snprintf(moved, sizeof moved, "%s/%s", root, path + 20);
        return real(moved, mode);
    }
    return real(path, mode);
}
"""

PROGRAM = r"""
#include <omp.h>
#include <stdio.h>

/* Every place libgomp made (its CPUs), then the place of each thread of one parallel region. */
int main(void)
{
    int places = omp_get_num_places(), ids[4096], count = 0, place[1024];
    for (int p = 0; p < places; p++) {
        int procs = omp_get_place_num_procs(p);
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < procs; i++)
            printf("%d%c", ids[i], i + 1 < procs ? ',' : '\n');
    }
#pragma omp parallel
    {
        int me = omp_get_thread_num();
        if (me < 1024)
            place[me] = omp_get_place_num();
#pragma omp single
        count = omp_get_num_threads();
    }
    printf("threads");
    for (int i = 0; i < count && i < 1024; i++)
        printf(" %d", place[i]);
    printf("\n");
    return 0;
}
"""


def write_sysfs(topology, root: Path) -> None:
    """The files libgomp reads, for every PU and NUMA node of ``topology``."""
    for pu in topology.pus:
        base = root / "cpu" / f"cpu{pu.os_index}"
        (base / "topology").mkdir(parents=True)
        core = next((a for a in pu.ancestors() if a.type == "core"), pu)
        package = next((a for a in pu.ancestors() if a.type == "package"), topology.root)
        (base / "topology" / "thread_siblings_list").write_text(format_cpulist(sorted(core.cpuset)) + "\n")
        (base / "topology" / "core_siblings_list").write_text(format_cpulist(sorted(package.cpuset)) + "\n")
        caches = [a for a in pu.ancestors() if a.is_cache]
        for index, cache in enumerate(reversed(caches)):  # index0 the L1, as Linux numbers them
            folder = base / "cache" / f"index{index}"
            folder.mkdir(parents=True)
            (folder / "level").write_text(str({"l1": 1, "l2": 2, "l3": 3}[cache.type]) + "\n")
            (folder / "shared_cpu_list").write_text(format_cpulist(sorted(cache.cpuset)) + "\n")
    nodes = topology.numa_nodes
    (root / "node").mkdir(parents=True)
    (root / "node" / "online").write_text(format_cpulist(sorted(n.os_index for n in nodes)) + "\n")
    for node in nodes:
        (root / "node" / f"node{node.os_index}").mkdir()
        (root / "node" / f"node{node.os_index}" / "cpulist").write_text(format_cpulist(sorted(node.cpuset)) + "\n")


class FakeGomp:
    """libgomp on one described machine: ``run(env)`` gives (places, place of each thread)."""

    def __init__(self, topology, folder: Path):
        self.topology = topology
        write_sysfs(topology, folder / "sys")
        (folder / "shim.c").write_text(SHIM)
        (folder / "places.c").write_text(PROGRAM)
        self.shim, self.program = folder / "shim.so", folder / "places"
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(self.shim), str(folder / "shim.c"), "-ldl"], check=True)
        subprocess.run(["gcc", "-fopenmp", "-O2", "-o", str(self.program), str(folder / "places.c")], check=True)
        self.env = {"FAKE_SYSFS": str(folder / "sys"), "FAKE_ALLOWED": format_cpulist(sorted(topology.allowed)),
                    "FAKE_NCPUS": str(max(topology.root.cpuset) + 1), "LD_PRELOAD": str(self.shim),
                    "OMP_DYNAMIC": "false", "OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "0"}

    def run(self, **variables: str) -> tuple[list[tuple[int, ...]], list[int]]:
        done = subprocess.run([str(self.program)], env={**os.environ, **self.env, **variables}, capture_output=True,
                              text=True, check=True, timeout=60)
        lines = done.stdout.splitlines()
        places = [tuple(int(c) for c in line.split(",")) for line in lines[:-1]]
        return places, [int(p) for p in lines[-1].split()[1:]]
