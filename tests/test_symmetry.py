"""When two placements are one: the topology's symmetry against a brute-force search over every
permutation of the PUs that keeps the tree."""

from __future__ import annotations

import itertools
import random

import pytest

from pinwise.bench.candidates import Candidate, unique_candidates
from pinwise.plan import Plan
from pinwise.topology import load_topology, walk_all
from pinwise.topology.symmetry import placement_form


def automorphisms(topology):
    """Every permutation of the PUs that maps each object's PUs onto the PUs of an object of the
    same type, and allowed PUs onto allowed PUs: the tree's automorphisms, on its leaves."""
    pus = sorted(pu.os_index for pu in topology.pus)
    objects = {(node.type, frozenset(node.cpuset)) for node in walk_all(topology.root) if node.cpuset}
    for image in itertools.permutations(pus):
        sigma = dict(zip(pus, image))
        if all((sigma[p] in topology.allowed) == (p in topology.allowed) for p in pus) and all(
                (kind, frozenset(sigma[p] for p in cpuset)) in objects for kind, cpuset in objects):
            yield sigma


def brute_force_equivalent(topology, a, b) -> bool:
    return any(all({sigma[cpu] for cpu in slot_a} == set(slot_b) for slot_a, slot_b in zip(a, b))
               for sigma in automorphisms(topology)) and len(a) == len(b)


@pytest.mark.parametrize("spec, allowed", [("pack:1 core:2 pu:1", None), ("pack:2 core:2 pu:1", None),
                                           ("pack:1 core:3 pu:2", None), ("pack:2 core:2 pu:1", [0, 1, 2]),
                                           ("pack:2 core:1 pu:2", [0, 1, 3])])
def test_equivalence_is_exactly_the_trees_symmetry(spec, allowed):
    topology = load_topology(spec)
    if allowed is not None:
        topology = topology.restricted(allowed)
    cpus = sorted(topology.allowed)
    rng = random.Random(7)
    draws = [tuple((rng.choice(cpus),) if rng.random() < 0.8 else tuple(rng.sample(cpus, 2))
                   for _ in range(rng.randint(1, 4))) for _ in range(60)]
    # and each draw's images under some automorphism, so that equivalent pairs are common
    images = [tuple(tuple(sigma[c] for c in slot) for slot in draw)
              for draw, sigma in zip(draws, itertools.cycle(list(automorphisms(topology))))]
    placements = draws + images
    equal = 0
    for a, b in itertools.combinations(placements[::3], 2):
        same = placement_form(topology, a) == placement_form(topology, b)
        assert same == brute_force_equivalent(topology, a, b), (spec, allowed, a, b)
        equal += same
    assert equal > 0  # the comparison did meet equivalent placements


def test_mirror_images_run_once_only_where_the_cores_are_alike():
    """0,1,0 and 1,0,1: one placement on two identical cores; two where CPU 1's core is withheld
    from a third CPU the placement does not use (the cores now differ: one has its second PU)."""
    def candidates():
        return [Candidate("compact", Plan.from_cpus([0, 1, 0])), Candidate("locality", Plan.from_cpus([1, 0, 1])),
                Candidate("apart", Plan.from_cpus([0, 1, 1]))]

    kept, aliases = unique_candidates(candidates(), load_topology("pack:1 core:2 pu:1"))
    assert [c.name for c in kept] == ["compact", "apart"] and aliases == {"compact": ["locality"]}
    uneven = load_topology("pack:1 core:2 pu:2").restricted([0, 2, 3])  # core 0 keeps one PU, core 1 two
    kept, aliases = unique_candidates([Candidate("a", Plan.from_cpus([0, 2, 0])),
                                       Candidate("b", Plan.from_cpus([2, 0, 2]))], uneven)
    assert [c.name for c in kept] == ["a", "b"] and aliases == {}
    # Without the topology only the same CPUs count: what bench does with the user's own placements.
    kept, aliases = unique_candidates(candidates())
    assert len(kept) == 3 and aliases == {}
