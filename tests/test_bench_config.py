"""pinwise.bench.config: an experiment's configuration is a typed record that reads every
``config`` object pinwise has written and writes it back key for key, so that a bench resumes
the experiments of older files as it always did."""

from __future__ import annotations

import json

import pytest

from pinwise.bench.config import BenchArguments, BenchConfig

#: What each writer stores (bench/runner.py, with the extra_config of its caller).
BASE = {"candidates": ["os", "compact", "same"], "plans": {"os": None, "compact": "0,1", "same": "0"}, "runs": 35,
        "warmup": 0, "time_regex": None, "timeout": None}
WRITTEN = {
    "the Python API": BASE,
    "pinwise bench": {**BASE, "threads": None, "comm": None, "aliases": {"same": ["twin"]}},
    "pinwise bench -n --comm": {**BASE, "threads": 4, "comm": "comm.json", "time_regex": "t=(.*)", "timeout": 2.5},
    "pinwise auto": {**BASE, "aliases": {}, "warmup": 1},
    "pinwise demo": {**BASE, "recommended": "compact"},
}


@pytest.mark.parametrize("writer", WRITTEN)
def test_what_each_writer_stores_is_read_as_typed_fields_and_written_back_key_for_key(writer):
    document = json.loads(json.dumps(WRITTEN[writer]))  # as the column holds it
    config = BenchConfig.from_json(document)
    assert config.extra == {}
    assert config.to_json() == document
    assert config.candidates == ("os", "compact", "same") and config.plans["same"] == "0"


def test_the_fields_hold_what_the_report_and_the_runner_read():
    config = BenchConfig.from_json(WRITTEN["pinwise bench -n --comm"])
    assert (config.runs, config.warmup, config.time_regex, config.timeout) == (35, 0, "t=(.*)", 2.5)
    assert config.arguments == BenchArguments(4, "comm.json") and config.aliases is None and config.recommended is None
    assert BenchConfig.from_json(WRITTEN["pinwise bench"]).aliases == {"same": ("twin",)}
    assert BenchConfig.from_json(WRITTEN["pinwise demo"]).recommended == "compact"


def test_keys_and_values_it_does_not_know_are_kept_as_read():
    """A newer pinwise's key, or a value of another kind where a field is not checked (the
    report reads the names that read well), is kept in extra and written back as it was."""
    document = {**BASE, "affinity": {"mode": "new"}, "aliases": {"same": ["twin", 3], "gone": "x"},
                "recommended": None, "timeout": "5", "threads": True, "comm": None, "plans": {"os": None, "same": 7}}
    config = BenchConfig.from_json(document)
    assert config.aliases == {"same": ("twin",)} and config.recommended is None and config.timeout is None
    assert config.arguments == BenchArguments(None, None) and config.plans == {"os": None}
    assert set(config.extra) == {"affinity", "aliases", "recommended", "timeout", "threads", "plans"}
    assert config.to_json() == document
    alone = BenchConfig.from_json({**BASE, "threads": 4})  # the command line writes -n and --comm together
    assert alone.arguments is None and alone.extra == {"threads": 4} and alone.to_json() == {**BASE, "threads": 4}


@pytest.mark.parametrize("key, value, message", [
    ("candidates", "os", "config's candidates is not a list"),
    ("candidates", ["os", 1], "config's candidates are not names"),
    ("plans", ["0"], "config's plans is not a dict"),
    ("runs", 3.5, "config's runs is not a int"),
    ("warmup", "1", "config's warmup is not a int"),
    ("time_regex", 5, "config's time_regex is not a str"),
])
def test_a_damaged_configuration_names_its_key(key, value, message):
    """The messages of the damaged-experiment warnings (pinwise report, pinwise bench)."""
    with pytest.raises(ValueError) as damaged:
        BenchConfig.from_json({**BASE, key: value})
    assert str(damaged.value) == message


def test_a_bench_resumes_the_same_configuration_whatever_its_runs():
    stored = BenchConfig.from_json(WRITTEN["pinwise bench"])
    assert stored.same_experiment(BenchConfig.from_json({**WRITTEN["pinwise bench"], "runs": 50}))
    # the command line keeps its -n and --comm, the Python API neither: two experiments, as before
    assert not stored.same_experiment(BenchConfig.from_json({**BASE, "aliases": {"same": ["twin"]}}))
    assert not stored.same_experiment(BenchConfig.from_json({**WRITTEN["pinwise bench"], "threads": 2}))
    assert not BenchConfig.from_json(BASE).same_experiment(BenchConfig.from_json({**BASE, "aliases": {}}))
    assert not BenchConfig.from_json(BASE).same_experiment(BenchConfig.from_json({**BASE, "affinity": 1}))
