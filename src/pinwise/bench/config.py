"""What an experiment was run with: the ``config`` column of the results database, a JSON object.

Keys, as every pinwise since the first has written them (``null`` where not given):
  candidates   the placements' names, in the order benched
  plans        each placement's CPU list (null: the OS placed its threads)
  runs         measured runs per placement
  warmup       warm-up blocks before them
  time_regex   the regular expression that read the program's time (null: wall time)
  timeout      seconds after which a run was stopped (null: derived from the first block)
and where they apply:
  aliases      the other names of a placement that ran once for several (its CPUs were theirs)
  recommended  the placement the program's analysis recommended (pinwise demo)
  threads      pinwise bench's -n (null when not given)    } written together by the command line,
  comm         pinwise bench's --comm, the matrix file     } which keeps both
A bench resumes the experiment of its command whose configuration is the same but for ``runs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class BenchArguments:
    """The options of ``pinwise bench`` that its plans do not show, kept so that another -n or
    --comm is another experiment."""

    threads: int | None = None    # -n: threads planned for
    comm: str | None = None       # --comm: the communication matrix's file


@dataclass(frozen=True)
class BenchConfig:
    """An experiment's configuration (module docstring). A value that does not read as its field
    wants it is kept, as read, in ``extra`` beside the keys this pinwise does not know: the
    configuration is written back and compared as it was stored (but a null where every pinwise
    writes a list, an object or a number, which reads as the field's default)."""

    candidates: tuple[str, ...] = ()
    plans: Mapping[str, str | None] = field(default_factory=dict)
    runs: int | None = None
    warmup: int = 0
    time_regex: str | None = None
    timeout: float | None = None
    aliases: Mapping[str, tuple[str, ...]] | None = None   # None: not kept (no placement stood for another)
    recommended: str | None = None                          # None: not kept
    arguments: BenchArguments | None = None                 # None: not kept (the Python API, auto, demo)
    extra: Mapping[str, object] = field(default_factory=dict)

    def same_experiment(self, other: BenchConfig) -> bool:
        """Whether a bench with ``other`` resumes the experiment of this one: all is the same
        but the number of runs, which a resumed bench may change."""
        return replace(self, runs=other.runs) == other

    def to_json(self) -> dict:
        document = {"candidates": list(self.candidates), "plans": dict(self.plans), "runs": self.runs,
                    "warmup": self.warmup, "time_regex": self.time_regex, "timeout": self.timeout}
        if self.aliases is not None:
            document["aliases"] = {name: list(same) for name, same in self.aliases.items()}
        if self.recommended is not None:
            document["recommended"] = self.recommended
        if self.arguments is not None:
            document.update(threads=self.arguments.threads, comm=self.arguments.comm)
        return {**document, **self.extra}

    @classmethod
    def from_json(cls, document: dict) -> BenchConfig:
        """The configuration of a ``config`` column's object; ValueError naming the key whose
        value cannot be read (the experiment is then damaged, and skipped)."""
        for key, kind in (("candidates", list), ("plans", dict), ("runs", int), ("warmup", int), ("time_regex", str)):
            if document.get(key) is not None and not isinstance(document[key], kind):
                raise ValueError(f"config's {key} is not a {kind.__name__}")
        if not all(isinstance(c, str) for c in document.get("candidates") or []):
            raise ValueError("config's candidates are not names")
        command_line = "threads" in document and "comm" in document  # it writes both; one alone is not its
        extra = {key: value for key, value in document.items()
                 if key not in _KEYS or key in ("threads", "comm") and not command_line}

        def read(key: str, value, exact: bool):
            """``value`` for the key's field; unless it is the stored value exactly, that goes to ``extra``."""
            if key in document and not exact:
                extra[key] = document[key]
            return value

        plans = document.get("plans") or {}
        plans = read("plans", {name: cpus for name, cpus in plans.items() if cpus is None or isinstance(cpus, str)},
                     all(cpus is None or isinstance(cpus, str) for cpus in plans.values()))
        timeout = document.get("timeout")
        timeout = read("timeout", timeout if _number(timeout) else None, timeout is None or _number(timeout))
        aliases = document.get("aliases")
        if "aliases" in document:  # the names that read well
            readable = {name: tuple(n for n in same if isinstance(n, str))
                        for name, same in (aliases if isinstance(aliases, dict) else {}).items() if isinstance(same, list)}
            aliases = read("aliases", readable, {name: list(same) for name, same in readable.items()} == aliases)
        recommended = document.get("recommended")
        if "recommended" in document:
            recommended = read("recommended", recommended if isinstance(recommended, str) else None,
                               isinstance(recommended, str))
        arguments = None
        if command_line:
            threads, comm = document["threads"], document["comm"]
            arguments = BenchArguments(read("threads", threads if _whole(threads) else None,
                                            threads is None or _whole(threads)),
                                       read("comm", comm if isinstance(comm, str) else None,
                                            comm is None or isinstance(comm, str)))
        return cls(tuple(document.get("candidates") or ()), plans, document.get("runs"), document.get("warmup") or 0,
                   document.get("time_regex"), timeout, aliases, recommended, arguments, extra)


#: The keys of the fields above.
_KEYS = ("candidates", "plans", "runs", "warmup", "time_regex", "timeout", "aliases", "recommended", "threads", "comm")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
