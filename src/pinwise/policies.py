"""The catalog of mapping policies: names, families and one-line descriptions.

Kept apart from the mapping engine (pinwise.mapping, which loads numpy, scipy and the native
kernels) so that the command line can list the policies without paying for those imports.
"""

from __future__ import annotations

#: Policy name -> (family, one-line description), in the order `--compare` shows them.
POLICIES: dict[str, tuple[str, str]] = {
    "os": ("independent", "no pinning: the OS places threads (baseline)"),
    "random": ("independent", "a random permutation of the PUs, new for every seed"),
    "compact": ("independent", "depth-first PU order, like KMP_AFFINITY=compact"),
    "scatter": ("independent", "one PU per package first, like KMP_AFFINITY=scatter"),
    "close": ("independent", "OpenMP proc_bind close over PU places"),
    "spread": ("independent", "OpenMP proc_bind spread over PU places"),
    "lp-compact": ("Mazouz", "exact matching pairs threads; pairs on sharing PUs, compact order"),
    "lp-scatter": ("Mazouz", "exact matching pairs threads; pairs on sharing PUs, scatter order"),
    "gp": ("Mazouz", "balanced k-way partition (METIS), one part per package"),
    "lpgp": ("Mazouz", "pairs first, then the pairs partitioned onto packages"),
    "gplp": ("Mazouz", "packages first (partition), then pairs inside each package"),
    "locality": ("Diener", "hierarchical grouping maximising communication inside each object (EagerMap)"),
    "distance": ("Diener", "locality on the inverted matrix max(M) - M"),
    "balance": ("Diener", "threads by decreasing CommV, each where the least communication is so far"),
    "balanced-locality": ("Diener", "locality, no object above its level's average communication"),
}
