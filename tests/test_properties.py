"""Property tests, one per input surface that the other modules do not already cover (synthetic
strings, XML, likwid expressions: test_topology and test_pinning). For any input hypothesis draws,
a reader either returns a value that holds its invariants or raises PinwiseError with a message:
never another exception. Where a value can be written and read back, it comes back the same."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pinwise.bench import db
from pinwise.comm import CommMatrix, parse_comm
from pinwise.cpulist import format_cpulist, parse_cpulist
from pinwise.errors import PinwiseError
from pinwise.files import check_output_file
from pinwise.numbers import hex_number, real_number, say_duration, whole_number
from pinwise.plan import Plan, parse_skip_mask
from pinwise.topology import from_json, load_topology, to_json

MACHINE = load_topology("pack:2 core:2 pu:2")
#: Text made of the characters these inputs are written with, and of look-alikes that are not.
NUMBERISH = st.text(alphabet=string.digits + " \t\n.,-+_:;xXeEabcdef" + "١٢３²ⅷ", max_size=24)
#: JSON values of every kind, nested a few levels.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10 ** 20), 10 ** 20) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=30)


def raises_only_pinwise_error(call, *args):
    try:
        return call(*args)
    except PinwiseError as err:
        assert str(err).strip() and "\n" not in str(err).strip()
        return None


# -- numbers, CPU lists, skip masks --------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(NUMBERISH)
def test_whole_numbers_are_ascii_digits_or_refused(text):
    value = raises_only_pinwise_error(whole_number, text, "value", 0, 10 ** 6)
    if value is not None:
        assert re.fullmatch(r"[0-9]+", text.strip()) and value == int(text.strip()) and 0 <= value <= 10 ** 6


@settings(max_examples=400, deadline=None)
@given(NUMBERISH)
def test_real_numbers_are_finite_ascii_or_refused(text):
    value = raises_only_pinwise_error(real_number, text, "value", 0.0, 1e6)
    if value is not None:
        assert re.fullmatch(r"[0-9.eE+\-]+", text.strip()) and math.isfinite(value) and 0 <= value <= 1e6


UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


@settings(max_examples=400, deadline=None)
@given(st.floats(min_value=1e-7, max_value=1e7), st.sampled_from([None, 1, 2, 3]))
@example(55.0, 1)  # 0.9m, but 6e+01 s: said "60s" (hypothesis found it in one run of many)
def test_a_duration_is_said_in_the_largest_unit_it_fills(seconds, digits):
    number, unit = re.fullmatch(r"([0-9.e+-]+)(h|m|s|ms|us)", say_duration(seconds, digits)).groups()
    value, size = float(number), UNITS[unit]
    larger = [other for other in UNITS.values() if other > size]
    # never 0.5h, never 60s (59.97 s to two digits is 1m): the number is at least 1 and under the next unit
    assert (value >= 1 or unit == "us") and (not larger or value * size < min(larger) * (1 - 1e-9))
    assert math.isclose(value * size, seconds, rel_tol=5 * 10.0 ** -(digits or 6))


@settings(max_examples=400, deadline=None)
@given(NUMBERISH)
def test_hex_numbers_and_skip_masks(text):
    value = raises_only_pinwise_error(hex_number, text, "mask")
    if value is not None:
        assert value == int(text.strip(), 16)
    mask = raises_only_pinwise_error(parse_skip_mask, text)
    if mask is not None:
        assert mask == value and mask < 1 << 64


@settings(max_examples=400, deadline=None)
@given(NUMBERISH)
def test_cpu_lists_are_non_negative_or_refused(text):
    cpus = raises_only_pinwise_error(parse_cpulist, text)
    if cpus is not None:
        assert cpus and all(isinstance(c, int) and c >= 0 for c in cpus)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4096), min_size=1, max_size=40))
def test_cpu_lists_read_back_what_was_written(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == cpus


# -- matrices ------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=string.digits + " ,;\t\n.-+eE#naifINF[]{}\":", max_size=80))
def test_matrix_text_is_a_square_matrix_or_refused(text):
    comm = raises_only_pinwise_error(parse_comm, text, "m")
    if comm is not None:
        matrix = comm.matrix
        assert matrix.ndim == 2 and matrix.shape[0] == matrix.shape[1] >= 1
        assert np.all(np.isfinite(matrix)) and np.all(matrix >= 0)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_json_document_is_a_matrix_or_refused(document):
    raises_only_pinwise_error(parse_comm, json.dumps(document), "m.json")
    raises_only_pinwise_error(parse_comm, json.dumps({"format": "pinwise-comm", "matrix": document}), "m.json")


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(
    st.lists(st.floats(0, 1e12, allow_nan=False) | st.integers(0, 10 ** 9), min_size=n, max_size=n),
    min_size=n, max_size=n)))
def test_matrices_read_back_from_csv_and_json(rows):
    matrix = np.array(rows, dtype=float)
    matrix = np.triu(matrix) + np.triu(matrix, 1).T  # symmetric: an asymmetric one is read as (M + M^T) / 2
    rows = matrix.tolist()
    csv = "\n".join(",".join(repr(float(v)) for v in row) for row in rows) + "\n"
    assert np.array_equal(parse_comm(csv, "m.csv").matrix, matrix)
    comm = CommMatrix(matrix)
    assert np.array_equal(parse_comm(comm.to_json(), "m.json").matrix, matrix)


# -- mapping files and topologies ----------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["format", "version", "pus", "slots", "threads", "skip_mask", "repeat_from",
                                        "machine", "rounds", "policy", "seed", "creator", "source"]), JSON, max_size=8),
       st.booleans())
def test_any_mapping_document_is_a_plan_or_refused(document, with_format):
    if with_format:
        document["format"] = "pinwise-mapping"
    plan = raises_only_pinwise_error(Plan.from_json, json.dumps(document), "map.json")
    if plan is not None:
        assert plan.nb_slots >= 1 and all(c >= 0 for slot in plan.slots for c in slot)
        assert Plan.from_json(plan.to_json(), "again").slots == plan.slots


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_json_document_is_a_topology_or_refused(document):
    raises_only_pinwise_error(from_json, json.dumps(document))
    written = json.loads(to_json(MACHINE))
    if isinstance(document, dict):  # the real document with fields replaced by what was drawn
        topology = raises_only_pinwise_error(from_json, json.dumps({**written, **document}))
        if topology is not None:
            assert topology.nb_pus >= 1


# -- output paths and databases ------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.ascii_letters + "/._- ~\\:" + "é", max_size=40) | st.just("x" * 300))
def test_output_paths_are_usable_or_refused(tmp_path_factory, name):
    folder = tmp_path_factory.getbasetemp()
    assume("\x00" not in name)
    raises_only_pinwise_error(check_output_file, str(folder / name) if not name.startswith("/") else name)


def test_an_output_no_file_can_be_made_beside_is_refused_before_the_work(tmp_path):
    """/proc takes no new file, whatever access() says to root: refused when the option is read,
    not after a trace of minutes; a device is written in place and needs no file beside it."""
    with pytest.raises(PinwiseError, match=r"output file '/proc/version': no file can be made in '/proc' \("):
        check_output_file("/proc/version")
    assert check_output_file("/dev/null") == Path("/dev/null")
    assert check_output_file(tmp_path / "out.json") == tmp_path / "out.json"
    assert list(tmp_path.iterdir()) == []  # the file made to try is gone


SQL_VALUES = st.none() | st.integers(-(2 ** 63), 2 ** 63 - 1) | st.floats() | st.text(max_size=6) | st.binary(max_size=6)


@pytest.fixture(scope="module")
def clean_db(tmp_path_factory):
    from conftest import FakeProgram

    from pinwise.bench import BenchOptions, build_candidates, run_bench

    path = tmp_path_factory.mktemp("db") / "clean.db"
    topology = load_topology("pack:1 core:2 pu:1")
    run_bench(["/bin/true"], build_candidates(["os", "compact"], [], topology, None), topology, str(path),
              BenchOptions(3, progress=False), runner=FakeProgram({"os": 1.0, "other": 0.9}, 0.01))
    return path.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(db.RUN_FIELDS), value=SQL_VALUES)
def test_any_value_in_any_run_column_is_read_or_named(tmp_path, clean_db, column, value):
    path = tmp_path / "r.db"
    path.write_bytes(clean_db)
    with sqlite3.connect(path) as raw:
        try:
            raw.execute(f"UPDATE runs SET {column} = ? WHERE id = 2", (value,))
        except sqlite3.Error:
            return  # the schema itself refuses it (NOT NULL, UNIQUE)
    raw.close()
    connection = db.open_db(path, create=False)
    try:
        runs = db.runs(connection, 1, include_warmup=True)
        assert len(runs) + len(connection.problems) == 6
        assert all(p.startswith("run 2 of experiment 1 is damaged") for p in connection.problems)
        for run in runs:
            assert math.isfinite(run.wall) and run.wall >= 0 and isinstance(run.policy, str)
    finally:
        connection.close()
