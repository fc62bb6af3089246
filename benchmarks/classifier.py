"""The pattern classifier's accuracy on the generated, labelled corpus (issue 13).

Every pattern of the workloads (native/workloads/patterns.c) at 4, 8, 16 and 64 threads, with
noise (each pair's weight jittered by a log-normal factor, background communication among all pairs
of 0-50 % of the pattern's) and, for half the samples, a busy thread 0 (serial set-up: more
instructions, done alone, and 10-20 % more communication with everyone): see
pinwise.corpus.labelled_corpus. Target: >= 95 % right. Prints the accuracy by thread count, by
pattern and with/without the busy thread, over several corpus seeds, and every miss.

    python benchmarks/classifier.py [--seeds 13,1,2,3] [--samples 10]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from common import console, table

from pinwise.corpus import CORPUS_PATTERNS, accuracy, labelled_corpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="13,1,2,3", help="corpus seeds, comma-separated")
    parser.add_argument("--samples", type=int, default=10, help="samples per pattern and thread count")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    groups: dict[str, list[bool]] = defaultdict(list)
    misses = []
    start = time.perf_counter()
    for seed in seeds:
        for sample in labelled_corpus(seed, args.samples):
            description, _, label = sample
            right = not accuracy([sample])[1]
            pattern, threads = description.split()[:2]
            for key in ("all", f"threads {threads[2:]}", f"pattern {pattern}",
                        "busy thread 0" if "busy" in description else "no busy thread"):
                groups[key].append(right)
            if not right:
                misses.append((seed, description, label, accuracy([sample])[1][0][2]))
    seconds = time.perf_counter() - start
    out = table(f"classifier accuracy on the labelled corpus (seeds {args.seeds}, {args.samples} samples per "
                "pattern and thread count)", ["samples", "count", "right", "accuracy"])
    order = ["all", *(f"threads {t}" for t in (4, 8, 16, 64)), *(f"pattern {p}" for p in CORPUS_PATTERNS),
             "no busy thread", "busy thread 0"]
    for key in order:
        results = groups[key]
        out.add_row(key, str(len(results)), str(sum(results)), f"{sum(results) / len(results):.1%}")
    console.print(out)
    for seed, description, label, got in misses:
        console.print(f"  miss (seed {seed}): {description}: expected {label}, got {got}")
    total = groups["all"]
    share = sum(total) / len(total)
    console.print(f"{share:.1%} of {len(total)} matrices classified right (target >= 95 %: "
                  f"{'met' if share >= 0.95 else 'NOT met'}); {seconds / len(total) * 1e3:.1f} ms per matrix")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
