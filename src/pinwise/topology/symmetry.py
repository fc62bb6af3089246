"""When two placements are the same placement: the machine's symmetry, not the CPU numbers.

On a machine whose two cores are alike, threads (0, 1, 2) on CPUs 0,1,0 and on 1,0,1 see the same
caches, the same sharing and the same distances: one is the other's mirror image. Benchmarking both
spends runs on a difference the hardware cannot make, and two verdicts on one placement can only
disagree by chance.

Two placements are equivalent when an automorphism of the topology tree (a permutation of the
children of each object that maps every subtree onto an identical one: same types, cache sizes,
memory, devices, allowed PUs and CPU kinds) maps each thread's CPUs in one onto its CPUs in the
other. :func:`placement_form` decides this by the AHU canonical form of rooted trees (Aho,
Hopcroft and Ullman, *The Design and Analysis of Computer Algorithms*, 1974, section 3.2): each PU
is labelled with the slots placed on it, each object's form is its own attributes and the sorted
forms of its children, and two labelled trees are isomorphic exactly when their forms are equal.
A machine with NUMA distance matrices is compared CPU for CPU: a permutation of its nodes would
also have to keep their distances, which the tree does not say.
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import ObjType, Topology, TopoObject


def placement_form(topology: Topology, slots: Sequence[Sequence[int]]) -> tuple:
    """A value equal for two slot lists (slot k: the CPUs of the k-th thread) exactly when the
    topology's symmetry maps one onto the other (module docstring)."""
    exact = ("cpus", tuple(tuple(sorted(slot)) for slot in slots))
    if topology.distances or not all(topology.has_pu(cpu) for slot in slots for cpu in slot):
        return exact
    on_pu: dict[int, list[int]] = {}
    for k, slot in enumerate(slots):
        for cpu in sorted(set(slot)):
            on_pu.setdefault(cpu, []).append(k)
    kinds = {cpu: kind.efficiency for kind in topology.cpukinds for cpu in kind.cpuset}

    def form(node: TopoObject) -> tuple:
        # None stands for "not said": 0 and "" keep the forms comparable with each other
        own = (node.type.rank, node.cache_size or 0, node.subtype or "", node.local_memory or 0,
               node.cache_geometry or ())
        if node.type == ObjType.PU:
            cpu = node.os_index
            return own + (cpu in topology.allowed, kinds.get(cpu, -1), tuple(on_pu.get(cpu, ())))
        attached = tuple(sorted(form(child) for child in [*node.memory_children, *node.cpuless_children]))
        return own + (attached, tuple(sorted(form(child) for child in node.children)))

    return ("form", len(slots), form(topology.root))
