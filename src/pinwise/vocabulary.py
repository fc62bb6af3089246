"""Names that several stages and the command line share, each defined once, in a module that
imports nothing: the parser reads them at start-up without loading the stages that use them."""

from __future__ import annotations

#: Which CPU kind of a hybrid machine orders fill first (Topology.preferring; run --cpu-kinds).
KIND_PREFERENCES = ("performance", "efficiency", "any")

#: The --topology words that name this machine, in any case.
THIS_MACHINE = ("live", "this", "sysfs")
