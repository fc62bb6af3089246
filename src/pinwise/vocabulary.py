"""Names that several stages and the command line share, each defined once, in a module that
imports nothing: the parser reads them at start-up without loading the stages that use them."""

from __future__ import annotations

from enum import StrEnum

#: Which CPU kind of a hybrid machine orders fill first (Topology.preferring; run --cpu-kinds).
KIND_PREFERENCES = ("performance", "efficiency", "any")

#: The --topology words that name this machine, in any case.
THIS_MACHINE = ("live", "this", "sysfs")


class Pattern(StrEnum):
    """The communication patterns of the papers a matrix is read as (pinwise.patterns.classify),
    each spelled here only (a test greps, tests/test_structure.py); a pattern is its own string
    in files and output."""

    NONE = "none"                    # private data only (NPB EP)
    PAIRS = "pairs"                  # each thread has one partner
    FAR_PAIRS = "far pairs"          # thread i with i + T/2 (NPB LU)
    NEIGHBOUR = "neighbour"          # i with i - 1 and i + 1 (NPB UA)
    PIPELINE = "pipeline"            # neighbours, an inner stage working harder (PARSEC ferret)
    MASTER = "master/reduction"      # one thread with everyone (initialisation, reduction)
    ALL_TO_ALL = "all-to-all"        # every pair alike (PARSEC swaptions)
    CLUSTERED = "clustered"          # groups communicating mostly among themselves
    IRREGULAR = "irregular"          # none of the papers'


#: The command that traces, benches and names the winner (pinwise auto), as the CLI spells it.
AUTO_COMMAND = "auto"
#: The trace backends (pinwise trace --backend, pinwise auto --backend); AUTO_BACKEND picks one.
AUTO_BACKEND = "auto"
BACKENDS = (AUTO_BACKEND, "sample", "valgrind")
#: pinwise analyze --heat-map: drawn in the terminal, or not at all.
HEAT_MAPS = ("text", "none")

#: The placement `pinwise bench` runs as `pinwise run --adapt` (placed while each run runs), beside
#: the policies and NAME=SPEC placements (bench.candidates).
ADAPT = "adapt"
