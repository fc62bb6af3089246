"""The package's shape (issue 35): its stages import one way, so the import graph of
`src/pinwise` has no cycle, a module imports what it needs at its top, where a reader looks, and
no module is longer than a reader takes in.
An import inside a function is kept only where it buys start-up time: the module it loads pulls
in a heavy library (numpy, scipy, matplotlib, networkx, pymetis) or one of the standard modules a
plain `pinwise run` must not load (tests/test_frozen.py), or it sits in an entry point: a
command-line handler, which loads only its own command's modules, or a function of the package's
Python API, which loads only its own stage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "src" / "pinwise"
#: Third-party libraries whose import costs a plain run its start-up target, and the standard
#: modules that test_frozen keeps out of `pinwise run --cpus 0` for the same reason.
HEAVY = {"numpy", "scipy", "matplotlib", "networkx", "pymetis",
         "dataclasses", "inspect", "shutil", "typing", "pathlib", "tempfile"}
#: The entry points, whose functions import their stage when called: the command-line handlers
#: (each command loads only its own modules) and the package's Python API (pinwise.run and the
#: lazy exports), so that ``import pinwise`` costs well under a millisecond, not the 8 ms of the
#: launcher and the placement's regular expressions.
HANDLERS = "pinwise.cli"
API = "pinwise"
#: The compiled modules (CMakeLists.txt): leaves of the graph, with no Python source.
NATIVE = {"pinwise._kernels"}
#: Edges a cycle may use, each named with why it is left open: none. (compute_mapping("auto")
#: once asked pinwise.patterns for the recommendation; auto is decided above the mapping now, in
#: pinwise.placement.matrix_plan.)
OPEN_CYCLE_EDGES: set[tuple[str, str]] = set()
#: "~500 lines" (STYLE.md), with the slack of a docstring.
MAX_LINES = 520


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def is_package(name: str, known: dict[str, Path]) -> bool:
    return known[name].name == "__init__.py"


def targets(node: ast.Import | ast.ImportFrom, name: str, known: dict[str, Path]) -> list[str]:
    """The modules an import statement names: internal ones by full name, others by their
    top-level name (``numpy`` for ``import numpy.linalg``)."""
    if isinstance(node, ast.Import):
        return [alias.name if alias.name.startswith("pinwise") else alias.name.split(".")[0] for alias in node.names]
    if node.level == 0:
        base = node.module or ""
        if not base.startswith("pinwise"):
            return [base.split(".")[0]]
    else:
        package = name if is_package(name, known) else name.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            package = package.rsplit(".", 1)[0]
        base = f"{package}.{node.module}" if node.module else package
    found = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in {*known, *NATIVE}]
    # `from .topology import model` names the submodule; `from .topology import Topology` the package
    return found if len(found) == len(node.names) else [*found, base]


def is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING" or \
        isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"


def imports(name: str, known: dict[str, Path]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(module-level imports, imports inside functions) of module ``name``: (target, line)."""
    tree = ast.parse(known[name].read_text(), str(known[name]))
    top: list[tuple[str, int]] = []
    inner: list[tuple[str, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top).extend((target, child.lineno) for target in targets(child, name, known))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return top, inner


def parents(name: str) -> list[str]:
    """The packages Python runs before module ``name``: pinwise, pinwise.topology, ..."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


@pytest.fixture(scope="module")
def graph():
    known = modules()
    return known, {name: imports(name, known) for name in known}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for successor in sorted(edges.get(node, ())):
            if state.get(successor) == 1:
                return stack[stack.index(successor):] + [successor]
            if successor not in state:
                cycle = visit(successor)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_imports_have_no_cycle(graph):
    """Over every import, at the top or inside a function: a lazy import still makes the lower
    stage depend on the higher one."""
    known, found = graph
    edges = {name: {target for target, _ in top + inner if target in known and target != name}
             for name, (top, inner) in found.items()}
    for name, target in OPEN_CYCLE_EDGES:
        edges[name].discard(target)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_an_import_inside_a_function_buys_start_up_time(graph):
    known, found = graph
    heavy: dict[str, bool] = {}

    def loads_heavy(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in heavy:
            if name in seen:
                return False
            loaded = [target for target, _ in found[name][0]] + parents(name)
            heavy[name] = any(target in HEAVY or target in known and loads_heavy(target, seen | {name})
                              for target in loaded)
        return heavy[name]

    wrong = [f"{known[name].relative_to(SOURCE.parent)}:{line} imports {target} inside a function"
             for name, (_, inner) in found.items() if name != API and not (name == HANDLERS or name.startswith(HANDLERS + "."))
             for target, line in inner if target in known and not loads_heavy(target)]
    assert not wrong, "\n".join(wrong)


def test_no_module_is_over_the_size_a_reader_takes_in():
    """STYLE.md: a module that passes ~500 lines is asking to be split along a seam."""
    long = {name: lines for name, path in modules().items() if (lines := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


#: Where a policy's or a pattern's name may be spelled: its registry (pinwise.policies for the
#: policies; pinwise.vocabulary for the patterns and the command line's shared words;
#: pinwise.workloads for the workloads, several named after the pattern they make).
REGISTRIES = {"pinwise.policies", "pinwise.vocabulary", "pinwise.workloads"}
#: The same spelling in another vocabulary: (module, word) -> what it is there.
OTHER_VOCABULARIES = {
    ("pinwise.topology", "os"): "hwloc's OS devices, a field of the topology's JSON",
    ("pinwise.topology.hwloc_xml", "os"): "hwloc's OS devices and its 'os' indexing of a distance matrix",
    ("pinwise.topology.hwloc_xml", "gp"): "hwloc's 'gp' (global persistent) indexing",
    ("pinwise.comm", "pairs"): "a field of the comm file's hot lines",
    ("pinwise.sample", "pairs"): "a field of the sampler's records",
    ("pinwise.rounds", "pairs"): "a field of the sampler's records",
    ("pinwise.adapt.windows", "pairs"): "a field of the sampler's stream records",
    ("pinwise.metrics", "pairs"): "a field of the sampler's records",
    ("pinwise.phases", "pairs"): "the pairs of threads a phase change names (PhaseChange.kind), a matching's",
    ("pinwise.stats", "none"): "no test was possible (MeanTest.test)",
    ("pinwise.pinning.likwid", "scatter"): "likwid-pin's scatter method",
    ("pinwise.mpi.recording", "scatter"): "MPI_Scatter, a collective",
    ("pinwise.plan", "close"): "OMP_PROC_BIND's value",
    ("pinwise.placement", "close"): "OpenMP's proc_bind kinds (OPENMP_BINDS)",
    ("pinwise.placement", "spread"): "OpenMP's proc_bind kinds (OPENMP_BINDS)",
    ("pinwise.placement", "primary"): "OpenMP's proc_bind kinds (OPENMP_BINDS)",
}


def names_spelled(path: Path, words: set[str]) -> list[tuple[str, int]]:
    """The string literals of ``path`` that are one of ``words`` (docstrings aside): (word, line)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.value, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words
            and id(node) not in docstrings]


def vocabulary_words() -> set[str]:
    """Every policy's name (auto included) and every pattern's."""
    from pinwise import policies
    from pinwise.vocabulary import Pattern

    return {*policies.REGISTRY, policies.AUTO, *(p.value for p in Pattern)}


def test_policy_and_pattern_names_are_spelled_only_in_their_registry():
    """Issue 35: a policy or pattern name drives behaviour through its registry's name for it
    (policies.LOCALITY, Pattern.PAIRS), never a string of its own that a rename would miss."""
    words = vocabulary_words()
    spelled = [f"{path.relative_to(SOURCE.parent)}:{line} spells {word!r}"
               for name, path in modules().items() if name not in REGISTRIES
               for word, line in names_spelled(path, words) if (name, word) not in OTHER_VOCABULARIES]
    assert not spelled, "\n".join(spelled)


def test_the_other_vocabularies_are_still_where_they_are_said_to_be():
    """Each exception above names a word its module still spells (none outlives its reason)."""
    words = vocabulary_words()
    known = modules()
    stale = [(name, word) for name, word in OTHER_VOCABULARIES
             if word not in {w for w, _ in names_spelled(known[name], words)}]
    assert not stale, stale
