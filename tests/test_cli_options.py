"""The command line's options records (pinwise.cli: RunCommand, BenchCommand, ...): each command's
options checked against each other in one constructor, ``from_args``, before any work starts.
The end-to-end behaviour of each command is tested with its module; here, the messages of the
checks no other test reaches, word for word, and what the records hand the handlers."""

from __future__ import annotations

import pytest
from conftest import assert_clean_failure, run_pinwise

from pinwise.cli import build_parser
from pinwise.cli.mapping import MapCommand
from pinwise.cli.measuring import AutoCommand, BenchCommand, ReportCommand, SimulateCommand, WorkloadCommand
from pinwise.cli.placing import PinCommand, RunCommand, TopoCommand
from pinwise.cli.tracing import TraceCommand
from pinwise.errors import PinwiseError

RECORDS = {"run": RunCommand, "pin": PinCommand, "topo": TopoCommand, "trace": TraceCommand, "map": MapCommand,
           "bench": BenchCommand, "report": ReportCommand, "workload": WorkloadCommand, "auto": AutoCommand,
           "simulate": SimulateCommand}


def options(*argv: str):
    """The options record of a command line, as the command's handler builds it."""
    return RECORDS[argv[0]].from_args(build_parser().parse_args(list(argv)))


@pytest.fixture
def comm_csv(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("0,5,1,1\n5,0,1,1\n1,1,0,5\n1,1,5,0\n")
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (("run", "-t", "nehalem", "--cpus", "0", "--", "true"),
     "a plan for nehalem can only be printed here: add --print, or drop --topology to run"),
    (("run", "--interval", "1s", "--cpus", "0", "--", "true"), "--log and --interval belong to --adapt"),
    (("run", "--adapt", "--cpus", "0", "--print", "--", "true"),
     "--adapt decides the placement while the program runs on this machine: drop --cpus, --print (--policy chooses "
     "the policy it places with)"),
    (("run", "--adapt", "--duration", "1s", "--", "true"),
     "--duration is for pin --pid --adapt; run --adapt lasts as long as the program"),
    (("run", "--adapt"), "no program given: write it after --, e.g. pinwise run --adapt -- ./prog args"),
    (("run", "--adapt", "--verify", "--", "true"),
     "--adapt says where each thread ran at its end (its 'ran on' line), and never becomes the program: drop "
     "--verify/--no-verify"),
    (("pin", "--pid", "1", "--duration", "1s", "--cpus", "0"), "--log, --interval and --duration belong to --adapt"),
    (("pin", "--pid", "1", "--adapt", "-t", "nehalem"),
     "--adapt decides the placement while the program runs on this machine: drop --topology (--policy chooses the "
     "policy it places with)"),
    (("pin", "--pid", "1", "--policy", "os"), "policy os means no pinning: nothing to do"),
    (("topo", "--presets", "--of", "json", "-t", "nehalem"),
     "--presets lists the presets and nothing else: drop --topology, --of (pinwise topo -t NAME shows one of them)"),
    (("trace", "--pid", "1", "--backend", "valgrind"),
     "--pid samples a running process, which Valgrind cannot attach to: drop --backend valgrind"),
    (("trace", "--backend", "sample", "--window", "5", "--model", "diener", "--", "true"),
     "--window, --model are for the valgrind backend, not --backend sample"),
    (("trace", "--period", "1ms", "--", "true"), "--period is for the sample backend, not --backend valgrind"),
    (("auto", "--trace-args", "'", "--", "true"),
     "--trace-args \"'\" cannot be split into arguments (No closing quotation)"),
    (("auto", "--trace-args", " ", "--", "true"),
     "--trace-args is empty: give the arguments of a smaller input to trace with, or leave it out to trace the "
     "program as it is given"),
    (("auto", "--policies", ",", "--", "true"),
     "--policies is empty: name the policies to bench, or leave it out for the analysis's candidates"),
    (("auto", "--db", "FOLDER_THERE", "--", "true"), "'FOLDER_THERE' is a directory, not a results database"),
    (("auto", "-t", "nehalem", "--", "true"),
     "auto benchmarks on this machine; to judge placements on 'nehalem' by cache simulation add --simulate"),
    (("auto", "--simulate", "nehalem", "--time-regex", "t=(.*)", "--", "true"),
     "--simulate ranks the analysis's candidates by simulation: --policies, --db and --time-regex belong to the "
     "benchmark, drop them"),
    (("auto", "--simulate", "--", "true"),
     "--simulate needs the machine to simulate: --simulate T or -t T (a preset, XML file or synthetic string)"),
    (("report",), "nothing to report: give the results database (pinwise report results.db), or --simulation FILE"),
    (("report", "--simulation", "s.json", "--export-markdown", "EXPORT"),
     "the exports are of a results database's experiments: give DB"),
    (("report", "--simulation", "s.json", "--png", "FOLDER"),
     "--png plots a results database's experiments: give DB (--html shows a simulation)"),
    (("workload", "list", "pairs"),
     "list takes no name: pinwise workload list shows them all, pinwise workload run pairs runs one"),
    (("simulate", "-t", "nehalem", "--policies", "compact,os", "--", "true"),
     "policy os places nothing, so it cannot be simulated: name the placements to compare"),
    (("bench", "-t", "nehalem", "--", "true"),
     "bench runs the program here, so it plans on this machine: drop --topology"),
    (("map", "COMM", "--compare", "--policy", "compact", "-f", "json", "--cpu-kinds", "any"),
     "--compare shows every policy's cost as a table: drop --policy, --format, --cpu-kinds, or drop --compare to "
     "map with one policy"),
])
def test_a_contradiction_between_options_is_refused_in_one_line(argv, message, tmp_path, comm_csv):
    paths = {"EXPORT": str(tmp_path / "out.md"), "FOLDER": str(tmp_path / "plots"), "COMM": comm_csv,
             "FOLDER_THERE": str(tmp_path)}
    with pytest.raises(PinwiseError) as refused:
        options(*(paths.get(word, word) for word in argv))
    assert str(refused.value) == message.replace("FOLDER_THERE", str(tmp_path))
    assert not (tmp_path / "out.md").exists() and not (tmp_path / "plots").exists()


def test_an_unusable_plan_is_dropped_with_a_warning_before_the_next_error():
    """--allow-unpinned: the plan's error becomes a warning at once; a later check still refuses."""
    with pytest.warns(UserWarning, match=r"; running unpinned \(--allow-unpinned\)$"):
        with pytest.raises(PinwiseError, match="^no program given: .* pinwise run --cpus 0,1 -- ./prog args$"):
            options("run", "--allow-unpinned", "--cpus", "0,1000000")
    with pytest.warns(UserWarning, match="running unpinned"):
        command = options("run", "--allow-unpinned", "--cpus", "0,1000000", "--", "true")
    assert command.plan is None and command.argv == ["true"] and not command.memory_only


def test_the_run_record_holds_the_plan_and_how_to_run_it():
    command = options("run", "--cpus", "1,0", "--no-follow", "--no-verify", "--", "./app", "8")
    assert command.argv == ["./app", "8"] and command.plan.pus == (1, 0)
    assert (command.follow, command.verify, command.print_only, command.adapt) == (False, False, False, None)
    adapting = options("run", "--adapt", "--policy", "auto", "--interval", "50ms", "--", "./app")
    assert adapting.adapt.policy is None and adapting.adapt.interval == pytest.approx(0.05)
    assert adapting.plan is None and adapting.topology is not None


def test_the_trace_record_holds_only_the_given_settings_in_the_backends_own_words():
    """The backend's defaults stand for what was not given: no second copy of them in the CLI."""
    sampled = options("trace", "--backend", "sample", "--period", "2ms", "--watch-rate", "50", "--", "./app")
    assert sampled.backend == "sample" and sampled.pid is None
    assert sampled.settings == {"period_us": 2000, "arms_per_s": 50, "sharing": "write", "readonly": False,
                                "stack": False}
    traced = options("trace", "--window", "500", "--no-native-run", "--sharing", "any", "--", "./app")
    assert traced.backend == "valgrind"
    assert traced.settings == {"window": 500, "native_run": False, "sharing": "any", "readonly": False,
                               "stack": False}
    assert options("trace", "--pid", "42").backend == "sample"


def test_the_bench_record_holds_the_resolved_placements_and_the_experiments_settings(comm_csv):
    command = options("bench", "--policies", "compact,locality", "--comm", comm_csv, "--placement", "first=0",
                      "--baseline", "first", "-r", "7", "-q", "--", "./app")
    assert [c.name for c in command.candidates] == ["compact", "locality", "first"]
    assert command.baseline == "first" and command.options.runs == 7 and command.options.progress is False
    assert command.options.extra_config == {"threads": None, "comm": comm_csv}
    assert set(command.exports) == {"csv", "json", "markdown", "latex"} and not any(command.exports.values())


@pytest.mark.parametrize("interval, message", [
    ("1ms", "--interval must be at least 10ms, not 1ms"), ("20m", "--interval must be at most 10m, not 20m"),
    ("1ns", "--interval must be at least 10ms, not 1ns")])  # ns is a unit: the bound is the problem
def test_a_duration_out_of_bounds_names_the_bound_in_a_unit(interval, message):
    """The bound in the unit a user writes durations in (not 'at least 0.01', which says no unit)."""
    assert_clean_failure(run_pinwise("run", "--adapt", "--interval", interval, "--", "true"), message)
