"""A corpus of hostile inputs over every input surface of pinwise, run as a user runs them.

    python tests/fuzz_corpus.py [--jobs N] [--show KIND] [--surface NAME]

Each case is one ``pinwise`` command with the files it reads, and what a demanding user expects:
``bad`` (refused: non-zero exit, one ``pinwise: error:`` line), ``good`` (accepted: exit 0), or
``any`` (either, as long as it is clean). The script prints, per surface and in total, how many
cases gave a traceback, a hang (past the time limit), a bad input accepted, a good one refused,
a message that is not one clean line, an output file written although the command failed, an
input it was given changed or gone (data destroyed), or a file left in its temporary folder (each
case runs with a TMPDIR of its own, which must be empty afterwards), and exits 1 if any of those
counts is not 0. ``tests/test_fuzz.py`` runs it in the suite.

The corpus is built, not drawn at random: every case is named and the same on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PINWISE = str(Path(sys.executable).parent / "pinwise")
TIME_LIMIT = 60.0
DEFECTS = ("traceback", "hang", "accepted bad", "refused good", "unclear message", "half-written", "data destroyed",
           "temp left")
MACHINE = "pack:2 core:2 pu:1"
#: Stands for the case's own folder in arguments and file names.
HERE = "{here}"


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    argv: tuple[str, ...]
    expect: str                              # "bad", "good" or "any"
    files: dict = field(default_factory=dict)  # name -> bytes, created in the case's folder
    output: str | None = None                # a file the command writes: absent after a refusal
    kept: tuple[str, ...] = ()               # files of ``files`` the command must leave as they were
    programs: tuple[str, ...] = ()           # files of ``files`` made executable
    env: dict = field(default_factory=dict)  # set in the command's environment
    links: dict = field(default_factory=dict)  # name -> file of ``files`` it links to ("=name": a hard link)
    stdout: str | None = None                # "full": /dev/full; "closed": no descriptor 1 at all


# -- the corpus ---------------------------------------------------------------------------------

#: Strings that no number option may accept, whatever its range.
NOT_NUMBERS = ["", " ", "nan", "NaN", "inf", "-inf", "1e9999", "1_0", "١", "٣", "0x10", "1,5", "five", "--",
               "1 2", "+-1", "1e", ".", "-", "1.5.2", "１", "²", "3\x7f", "0o7"]
#: Spaces around a number are what a script's $(...) or a pasted value bring: read as the number.
PADDED = ["\t{}", "{}\n", " {} "]
#: Numbers that are well-formed but out of every sensible range.
HUGE = ["10" + "0" * 40, "9" * 5000, "-1", "-0.5"]


def number_options() -> list[Case]:
    """Every numeric option with every malformed value, and a value that is fine."""
    options = [
        ("run -n", ["run", "--print", "-t", MACHINE, "-p", "compact", "-n"], "2"),
        ("run --seed", ["run", "--print", "-t", MACHINE, "-p", "random", "--seed"], "7"),
        ("run --repeat-from", ["run", "--print", "-t", MACHINE, "--cpus", "0,1", "--repeat-from"], "1"),
        ("map -n", ["map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-n"], "4"),
        ("map --seed", ["map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "random", "--seed"], "3"),
        ("bench -r", ["bench", "--db", f"{HERE}/r.db", "--policies", "os", "-r"], None),
        ("bench --timeout", ["bench", "--db", f"{HERE}/r.db", "--policies", "os", "-r", "1", "--timeout"], None),
        ("bench --warmup", ["bench", "--db", f"{HERE}/r.db", "--policies", "os", "-r", "1", "--warmup"], None),
        ("bench --confidence", ["bench", "--db", f"{HERE}/r.db", "--policies", "os", "-r", "1", "--confidence"], None),
        ("report --confidence", ["report", f"{HERE}/none.db", "--confidence"], None),
        ("trace --window", ["trace", "-o", f"{HERE}/c.json", "--window"], None),
        ("trace --max-lines", ["trace", "-o", f"{HERE}/c.json", "--max-lines"], None),
        ("auto --budget", ["auto", "--budget"], None),
        ("pin --pid", ["pin", "-t", MACHINE, "--cpus", "0", "--pid"], None),
    ]
    cases = []
    for label, argv, good in options:
        tail = ["--", "true"] if argv[0] in ("bench", "trace", "auto") else []
        if argv[0] == "run":
            tail = ["--", "true"]
        for value in NOT_NUMBERS + HUGE:
            cases.append(Case("option values", f"{label} {value!r}", (*argv, value, *tail), "bad",
                              files={"m.csv": b"0,1,2,3\n1,0,1,2\n2,1,0,1\n3,2,1,0\n"}))
        for form in ["{}", *PADDED] if good is not None else []:
            value = form.format(good)
            cases.append(Case("option values", f"{label} {value!r}", (*argv, value, *tail), "good",
                              files={"m.csv": b"0,1,2,3\n1,0,1,2\n2,1,0,1\n3,2,1,0\n"}))
    return cases


def cpu_lists() -> list[Case]:
    bad = ["", ",", "0,", ",0", "0,,1", "0-", "-0", "-1", "3-1", "0-99999999", "99", "4", "0-4", "١", "0x10", "1_0",
           "a", "0-1:0", "0-3:-1", "0:1", "0-3:", "1e0", "0.0", "0-1-2", "--1", "0;1", "00000000000000000000000000009"]
    # 0x1 is an hwloc CPU mask (hwloc-calc's 0x1 is CPU 0); 0x10 names CPU 4, which this machine lacks
    good = ["0", "0,1", "0-3", "3,2,1,0", "0-3:2", "0,0,1,1", "1-3", " 0", "0 ", "0x1",
            # hwloc locations and OpenMP places
            "core:0-1", "pu:even", "package:1.core:0", "all", "core:0-3 ~pu:1", "cores", "sockets(1)", "{0,1},{2,3}",
            "{0:2}:2:2"]
    bad += ["core:9", "nosuch:0", "core:", "core:x", "{0", "{}", "cores(x)", "{0}:0", "{9}", "os=eth9", "pci:0"]
    argv = ("run", "--print", "-t", MACHINE, "--cpus")
    return ([Case("CPU lists", repr(v), (*argv, v, "--", "true"), "bad") for v in bad]
            + [Case("CPU lists", repr(v), (*argv, v, "--", "true"), "good") for v in good])


def memory_options() -> list[Case]:
    """Memory placement: nodes that do not exist, malformed lists, two policies at once."""
    argv = ("run", "--print", "-t", "pack:2 [NUMANode] core:2 pu:1", "--cpus", "0")  # NUMA nodes 0 and 1
    bad = [("--membind", v) for v in ("", "9", "0-9", "x", "0,", "-1", "١")] + \
        [("--interleave", "5"), ("--preferred", "0-1"), ("--preferred", ""), ("--mempolicy", "bind"), ("--mem", "local")]
    good = [("--membind", "0"), ("--membind", "0-1"), ("--interleave", "1,0"), ("--preferred", "1"),
            ("--mempolicy", "local"), ("--mem", "local-to-thread"),
            # numactl's and hwloc's ways of naming nodes
            ("--membind", "all"), ("--membind", "+1"), ("--membind", "!1"), ("--interleave", "!+0"),
            ("--membind", "node:1"), ("--preferred", "numa:0"), ("--membind", "package:1")]
    bad += [("--membind", "!0-1"), ("--membind", "+2"), ("--membind", "node:9"), ("--membind", "!"), ("--membind", "+")]
    return ([Case("memory options", f"{o} {v!r}", (*argv, o, v, "--", "true"), "bad") for o, v in bad]
            + [Case("memory options", f"{o} {v!r}", (*argv, o, v, "--", "true"), "good") for o, v in good]
            + [Case("memory options", "two policies", (*argv, "--membind", "0", "--interleave", "0", "--", "true"), "bad")])


def likwid_expressions() -> list[Case]:
    # As likwid-pin 5.2 reads them on this machine (told it through its topology file: see
    # tests/likwid_fake.py): E:N takes every CPU, E:N:99 as many as the machine has, a stride of 0
    # or past the domain starts again at its first CPU; the machine has no cache, so no C domain.
    bad = ["", "S", "S9:0", "S0:0-9", "N:0-4", "N:5", "M9:0", "C:", "X0:0", "S0:", "E:N:0", "C0:0-1",
           "E:N:2:0:1", "S:spread", "N:0-1@", "@N:0", "N:0-1@@S0:0", "S0:0-1:0",
           "N:١", "N:1_0", "N:-1", "S-1:0", "L:", "L1:0", "N:0x1", "S0:0-1,", "scatter", "N:scatter:x"]
    good = ["N:0-3", "S0:0-1", "S1:0-1@S0:0-1", "N:0,2", "E:N:4", "E:N:2:1:2", "S:scatter", "N:scatter", "E:N",
            "E:N:99", "E:N:2:1:0", "E:S0:2:1:9", "M0:0-1", "N", "S1", "L:N:0-1", "L:0-3", "S:balanced:2",
            "S:cbalanced:2", "M:scatter:3"]
    argv = ("run", "--print", "-t", MACHINE, "--expr")
    return ([Case("likwid expressions", repr(v), (*argv, v, "--", "true"), "bad") for v in bad]
            + [Case("likwid expressions", repr(v), (*argv, v, "--", "true"), "any" if v.startswith("M") else "good")
               for v in good])


def skip_masks() -> list[Case]:
    bad = ["", "0x", "x1", "zz", "1_0", "0x1_0", "-1", "0x-1", "١", "0x" + "f" * 17, "0x" + "1" + "0" * 16, "1 0",
           "0x1.0", "nan", "0xg"]
    good = ["0x1", "1", "0x0", "0xff", "FF", "0x" + "f" * 16, "0b1"]  # 0b1 is hex digits: 0xb1, as likwid-pin reads it
    argv = ("run", "--print", "-t", MACHINE, "--cpus", "0,1", "--skip")
    return ([Case("skip masks", repr(v), (*argv, v, "--", "true"), "bad") for v in bad]
            + [Case("skip masks", repr(v), (*argv, v, "--", "true"), "good") for v in good])


def synthetic_topologies() -> list[Case]:
    bad = ["", " ", "pu", "pack:0 pu:1", "pack:-1 pu:1", "pack:2 core:2", "pack:2 core:2 core:2 pu:1", "pack:1_0 pu:1",
           "pack:١ pu:1", "pack:2 pu:1 extra:2", "pack:99999 core:99999 pu:99999", "pack:2 pu:1 pu:1",
           "pack:2(size=x) pu:1", "l3:1(size=-1) pu:1", "pack:2 core:2 pu:1 (", "pack:2:2 pu:1", "pack:2 pu:0",
           "pack: pu:1", ":2 pu:1", "pack:2\x01 pu:1", "nosuchpreset", "pack:2 core:2 pu:1" * 50,
           "pack:1e3 pu:1", "pack:0x2 pu:1", "pu:1 indexes=", "pack:2 pu:1 indexes=pu:5,6", "l4:2 pu:1",
           "pack:2 [core] pu:1", "pack:2 [NUMANode:2] pu:1", "numa:2 [NUMANode] pu:1",
           "[NUMANode(indexes=0,0)] pack:2 [NUMANode] pu:1", "pack:2 [NUMANode(memory=x)] pu:1"]
    good = ["pu:1", "pack:2 core:2 pu:1", "pack:2 l3:1 core:4 pu:2", "numa:2 core:2 pu:1", "l3:2(size=8MiB) core:2 pu:1",
            "pack:2 core:2 pu:2 indexes=pu:0,2,1,3,4,6,5,7", "[NUMANode] pack:2 core:2 pu:1",
            "pack:2 [NUMANode(memory=1073741824 indexes=1,0,3,2)] [NUMANode] core:2 pu:1",
            # any order and attachment lstopo reads: packages below cores, NUMA nodes on PUs
            "core:2 pack:2 pu:1", "pack:2 pu:1 [NUMANode]", "Package:1 Core:8 L2Cache:4 PU:1", "2 2 2"]
    cases = [Case("topology: synthetic", repr(v), ("topo", "-t", v), "bad") for v in bad]
    return cases + [Case("topology: synthetic", repr(v), ("topo", "-t", v), "any" if "indexes" in v else "good")
                    for v in good]


XML_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n'


def _xml(machine: str = 'cpuset="0x3"', pu0: str = 'os_index="0" cpuset="0x1"', pu1: str = 'os_index="1" cpuset="0x2"',
         extra: str = "") -> bytes:
    return (XML_HEAD + f'<topology version="2.0">\n<object type="Machine" os_index="0" {machine}>\n'
            f'<object type="Core" cpuset="0x3">\n<object type="PU" {pu0}/>\n<object type="PU" {pu1}/>\n'
            f'</object>{extra}\n</object>\n</topology>\n'.encode())


def xml_topologies() -> list[Case]:
    deep = XML_HEAD + b"<topology>" + b'<object type="Group" cpuset="0x1">' * 5000 + b"</topology>"
    laughs = (XML_HEAD + b'<!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
              b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>\n<topology>&c;</topology>')
    external = XML_HEAD + b'<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<topology>&x;</topology>'
    bad = {
        "empty file": b"", "not xml": b"hello", "truncated": _xml()[:120], "html": b"<html/>",
        "no object": XML_HEAD + b"<topology></topology>", "binary": bytes(range(256)) * 4,
        "empty PU cpuset": _xml(pu1='os_index="1" cpuset=""'), "zero PU cpuset": _xml(pu1='os_index="1" cpuset="0x0"'),
        "PU cpuset of two": _xml(pu1='os_index="1" cpuset="0x3"'), "empty machine cpuset": _xml(machine='cpuset=""'),
        "machine misses a PU": _xml(machine='cpuset="0x1"'), "PU without os_index": _xml(pu1='cpuset="0x2"'),
        "duplicate os_index": _xml(pu1='os_index="0" cpuset="0x1"'), "os_index 10^15": _xml(
            pu1='os_index="1000000000000000" cpuset="0x2"'), "os_index arabic": _xml(pu1='os_index="١" cpuset="0x2"'),
        "os_index negative": _xml(pu1='os_index="-1" cpuset="0x2"'), "cpuset not hex": _xml(
            pu1='os_index="1" cpuset="0xzz"'), "cpuset huge word": _xml(pu1='os_index="1" cpuset="0x1ffffffff"'),
        "no cpuset": _xml(pu1='os_index="1"'), "nested 5000 deep": deep, "billion laughs": laughs,
        "external entity": external, "utf-16 entity": (
            '<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE t [<!ENTITY a "x">]>\n<topology>&a;</topology>'
        ).encode("utf-16"), "overlapping objects": _xml(extra='<object type="Package" cpuset="0x6"/>'),
        "cache size text": _xml(extra='<object type="L2Cache" cpuset="0x3" cache_size="big"/>'),
    }
    good = {"small": _xml(), "utf-16": _xml().decode().replace("UTF-8", "UTF-16").encode("utf-16"),
            "with a CPU-less NUMA node": _xml(extra='<object type="NUMANode" os_index="1" cpuset="0x0"/>'),
            "well-formed 3000 Groups deep": _xml(extra='<object type="Group" cpuset="0x3">' * 3000 + "</object>" * 3000)}
    cases = [Case("topology: XML", name, ("topo", "-t", f"{HERE}/t.xml"), "bad", files={"t.xml": data})
             for name, data in bad.items()]
    cases += [Case("topology: XML", name, ("topo", "-t", f"{HERE}/t.xml"), "good", files={"t.xml": data})
              for name, data in good.items()]
    cases.append(Case("topology: XML", "a folder", ("topo", "-t", HERE), "bad"))
    cases.append(Case("topology: XML", "missing file", ("topo", "-t", f"{HERE}/missing.xml"), "bad"))
    return cases


def json_topologies() -> list[Case]:
    good = subprocess.run([PINWISE, "topo", "-t", MACHINE, "--of", "json"], capture_output=True, check=True).stdout
    document = json.loads(good)

    def changed(**edits) -> bytes:
        return json.dumps({**document, **edits}).encode()

    bad = {
        "empty": b"", "not json": b"{", "a list": b"[]", "null": b"null", "deep": b"[" * 100000 + b"]" * 100000,
        "huge int": b'{"format": "' + document.get("format", "pinwise-topology").encode() + b'", "x": ' + b"9" * 5000 + b"}",
        "no root": json.dumps({k: v for k, v in document.items() if k != "root"}).encode(),
        "root a string": changed(root="machine"), "root a number": changed(root=5), "allowed strings": changed(
            allowed=["a"]), "allowed a bool": changed(allowed=True), "allowed off the machine": changed(allowed=[99]),
        "allowed negative": changed(allowed=[-1]), "allowed 1e400": b'{"allowed": [1e400]}',
        "nan": json.dumps({**document, "allowed": [float("nan")]}).encode(),
    }
    cases = [Case("topology: JSON", name, ("topo", "-t", f"{HERE}/t.json"), "bad", files={"t.json": data})
             for name, data in bad.items()]
    cases.append(Case("topology: JSON", "as written", ("topo", "-t", f"{HERE}/t.json"), "good", files={"t.json": good}))
    return cases


def matrices() -> list[Case]:
    square = [[0, 5, 1, 1], [5, 0, 1, 1], [1, 1, 0, 5], [1, 1, 5, 0]]
    csv_bad = {
        "empty": b"", "blank lines": b"\n\n", "text": b"a,b\nc,d\n", "ragged": b"0,1\n1\n", "not square": b"0,1,2\n1,0,2\n",
        "negative": b"0,-1\n-1,0\n", "nan": b"0,nan\nnan,0\n", "inf": b"0,inf\ninf,0\n", "1e400": b"0,1e400\n1e400,0\n",
        "underscore": b"0,1_0\n1_0,0\n", "arabic digits": "0,١\n١,0\n".encode(), "booleans": b"0,true\ntrue,0\n",
        "hex": b"0,0x10\n0x10,0\n", "binary": bytes(range(256)), "nul bytes": b"0,\x001\n1,0\n",
        "utf-16": "0,1\n1,0\n".encode("utf-16"), "one huge row": (",".join(["1"] * 100000) + "\n").encode(),
    }
    json_bad = {
        "empty object": b"{}", "no matrix": b'{"threads": 2}', "matrix a string": b'{"matrix": "x"}',
        "booleans": b'{"matrix": [[false, true], [true, false]]}', "strings": b'{"matrix": [["0", "1"], ["1", "0"]]}',
        "nulls": b'{"matrix": [[0, null], [null, 0]]}', "ragged": b'{"matrix": [[0, 1], [1]]}',
        "not square": b'{"matrix": [[0, 1, 2], [1, 0, 2]]}', "1e400": b'{"matrix": [[0, 1e400], [1e400, 0]]}',
        "NaN": b'{"matrix": [[0, NaN], [NaN, 0]]}', "Infinity": b'{"matrix": [[0, Infinity], [Infinity, 0]]}',
        "negative": b'{"matrix": [[0, -1], [-1, 0]]}', "huge int": b'{"matrix": [[0, ' + b"9" * 5000 + b"], [1, 0]]}",
        "deep": b'{"matrix": ' + b"[" * 100000 + b"]" * 100000 + b"}", "threads wrong": b'{"matrix": [[0, 1], [1, 0]], "threads": 3}',
        "threads a string": b'{"matrix": [[0, 1], [1, 0]], "threads": "2"}', "truncated": b'{"matrix": [[0, 1], [1',
        "bare list of strings": b'[["a"]]', "bare empty": b"[]", "accesses wrong length": b'{"matrix": [[0, 1], [1, 0]], "accesses": [1]}',
        "1e308 overflow": b'{"matrix": [[0, 1e308, 1e308], [1e308, 0, 1e308], [1e308, 1e308, 0]]}',
    }
    good = {"m.csv": ("\n".join(",".join(map(str, row)) for row in square) + "\n").encode(),
            "m.json": json.dumps({"matrix": square}).encode(), "bare.json": json.dumps(square).encode(),
            "spaces.csv": b"0 5\n5 0\n", "semicolons.csv": b"0;5\n5;0\n", "comment.csv": b"# a comment\n0,2\n2,0\n"}
    cases = []
    for command in (("analyze", "--heat-map", "none"), ("map", "-t", MACHINE, "-p", "locality")):
        for name, data in csv_bad.items():
            cases.append(Case("matrices", f"{command[0]} CSV {name}", (*command, f"{HERE}/m.csv"), "bad",
                              files={"m.csv": data}))
        for name, data in json_bad.items():
            cases.append(Case("matrices", f"{command[0]} JSON {name}", (*command, f"{HERE}/m.json"), "bad",
                              files={"m.json": data}))
        for name, data in good.items():
            cases.append(Case("matrices", f"{command[0]} good {name}", (*command, f"{HERE}/{name}"), "good",
                              files={name: data}))
    return cases


def mapping_files() -> list[Case]:
    written = subprocess.run([PINWISE, "map", "/dev/stdin", "-t", MACHINE, "-p", "compact", "-f", "json"],
                             input=b"0,1,1,1\n1,0,1,1\n1,1,0,1\n1,1,1,0\n", capture_output=True, check=True).stdout
    document = json.loads(written)

    def changed(**edits) -> bytes:
        return json.dumps({**document, **edits}).encode()

    bad = {"empty": b"", "not json": b"{", "a list": b"[0, 1]", "no PUs": changed(pus=None),
           "PUs strings": changed(pus=["a", "b"]), "negative PU": changed(pus=[-1, 0]),
           "PU off the machine": changed(pus=[0, 99]), "huge PU": changed(pus=[0, 10 ** 30]),
           "bool PU": changed(pus=[True, False]), "PUs empty": changed(pus=[]),
           "threads disagree": changed(threads=7), "skip mask text": changed(skip_mask="x"),
           "repeat_from past the end": changed(repeat_from=9), "wrong format": changed(format="pinwise-comm"),
           "newer version": changed(version=99), "format null": changed(format=None), "other machine": changed(machine={"fingerprint": "0", "shape": "pu:64"}),
           "deep": b"[" * 50000 + b"]" * 50000, "1e400": changed(pus=[0]).replace(b"[0]", b"[1e400]"),
           "70,000 threads": changed(pus=[0, 1] * 35000, threads=70000)}
    cases = [Case("mapping files", name, ("run", "--print", "-t", MACHINE, "--mapping", f"{HERE}/map.json", "--", "true"),
                  "bad", files={"map.json": data}) for name, data in bad.items()]
    cases.append(Case("mapping files", "as written", ("run", "--print", "-t", MACHINE, "--mapping", f"{HERE}/map.json",
                                                      "--", "true"), "good", files={"map.json": written}))
    return cases


def output_paths() -> list[Case]:
    matrix = {"m.csv": b"0,1\n1,0\n"}
    writers = [
        ("topo -o", ("topo", "-t", MACHINE, "-o")),
        ("topo --of xml -o", ("topo", "-t", MACHINE, "--of", "xml", "-o")),
        ("map -o", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-o")),
        ("analyze --png", ("analyze", f"{HERE}/m.csv", "--heat-map", "none", "--png")),
    ]
    paths = [("a folder", HERE, "bad"), ("empty name", "", "bad"), ("missing folder", f"{HERE}/no/such/out", "bad"),
             ("under a file", f"{HERE}/m.csv/out", "bad"), ("name too long", f"{HERE}/{'x' * 300}", "bad"),
             ("/dev/full", "/dev/full", "bad"), ("/proc file", "/proc/version", "bad"),
             ("a fresh file", f"{HERE}/out.txt", "good"), ("/dev/null", "/dev/null", "good")]
    cases = []
    for label, argv in writers:
        for name, path, expect in paths:
            watched = path if path.startswith(HERE) and expect == "bad" and name != "a folder" else None
            cases.append(Case("output paths", f"{label} {name}", (*argv, path), expect, files=matrix, output=watched))
    return cases


_BUILT: dict[str, bytes] = {}


def results_database() -> bytes:
    """A real results database: 3 runs each of os and compact of ``true`` (made once)."""
    if "db" not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="pinwise-fuzz-db-"))
        try:
            path = folder / "r.db"
            subprocess.run([PINWISE, "bench", "--db", str(path), "-r", "3", "--policies", "os,compact", "--quiet",
                            "--", "true"], capture_output=True, check=True, timeout=120)
            _BUILT["db"] = path.read_bytes()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return _BUILT["db"]


def databases() -> list[Case]:
    folder = Path(tempfile.mkdtemp(prefix="pinwise-fuzz-db-"))
    try:
        good = results_database()
        variants = {}
        for name, statement in [
            ("text in wall", "UPDATE runs SET wall = 'abc' WHERE id = 1"),
            ("config not JSON", "UPDATE experiments SET config = '{'"),
            ("command not a list", "UPDATE experiments SET command = '5'"),
            ("negative time", "UPDATE runs SET wall = -1"),
            ("no runs table", "DROP TABLE runs"),
            ("newer version", "PRAGMA user_version = 99"),
            ("column dropped", "ALTER TABLE runs DROP COLUMN placement"),
            ("blob in policy", "UPDATE runs SET policy = x'00ff' WHERE id = 1"),
            ("a wall time of -0.0", "UPDATE runs SET wall = -0.0 WHERE id = 1"),
            ("a wall time of 0", "UPDATE runs SET wall = 0 WHERE id = 2"),
            ("every wall time -0.0", "UPDATE runs SET wall = -0.0"),
        ]:
            copy = folder / f"{len(variants)}.db"
            copy.write_bytes(good)
            with sqlite3.connect(copy) as raw:
                raw.execute(statement)
            raw.close()
            variants[name] = copy.read_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # A damaged row is skipped with a warning, the rest reported: "any" (clean either way);
    # a whole file that cannot be read is refused.
    expect = {"text in wall": "good", "negative time": "any", "blob in policy": "any", "config not JSON": "bad",
              "command not a list": "bad", "no runs table": "bad", "newer version": "bad", "column dropped": "bad",
              "a wall time of -0.0": "good", "a wall time of 0": "good", "every wall time -0.0": "bad"}
    cases = [Case("databases", name, ("report", f"{HERE}/r.db"), expect[name], files={"r.db": data})
             for name, data in variants.items()]
    for offset in range(0, len(good), max(1, len(good) // 40)):  # a flipped byte every 1/40th of the file
        damaged = bytearray(good)
        damaged[offset] ^= 0x5A
        cases.append(Case("databases", f"byte {offset} flipped", ("report", f"{HERE}/r.db"), "any",
                          files={"r.db": bytes(damaged)}))
    for name, data in {"empty file": b"", "text": b"policy,time\n", "truncated": good[:1000], "half": good[:len(good) // 2]}.items():
        cases.append(Case("databases", name, ("report", f"{HERE}/r.db"), "bad", files={"r.db": data}))
    cases.append(Case("databases", "as written", ("report", f"{HERE}/r.db"), "good", files={"r.db": good}))
    cases.append(Case("databases", "bench into a text file", ("bench", "--db", f"{HERE}/r.db", "-r", "1", "--", "true"),
                      "bad", files={"r.db": b"not a database\n"}))
    return cases


def same_files() -> list[Case]:
    """Data destroyed: an output that is one of the command's own inputs (by name, through a
    symbolic or a hard link, or the program itself) is refused before any work, the input left as
    it was; two outputs naming one file are refused too."""
    true = Path("/bin/true").read_bytes()
    mapping = subprocess.run([PINWISE, "map", "/dev/stdin", "-p", "compact", "-f", "json"],  # for this machine
                             input=b"0\n", capture_output=True, check=True).stdout
    files = {"m.csv": b"0,5\n5,0\n", "c.json": json.dumps({"matrix": [[0, 5], [5, 0]]}).encode(), "map.json": mapping,
             "r.db": results_database(), "s.json": b"{}", "hosts": b"node0 slots=2\n", "prog": true,
             "t.json": subprocess.run([PINWISE, "topo", "-t", MACHINE, "--of", "json"], capture_output=True,
                                      check=True).stdout}
    links = {"soft.csv": "m.csv", "=hard.csv": "m.csv"}  # "=": a hard link
    cluster = ("--cluster", "node:2 pack:1 core:2 pu:1")
    cases = [
        ("map -o its matrix", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-o", f"{HERE}/m.csv"), "m.csv"),
        ("map -o its matrix through a link", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-o",
                                              f"{HERE}/soft.csv"), "m.csv"),
        ("map -o its matrix's hard link", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-o",
                                           f"{HERE}/hard.csv"), "m.csv"),
        ("map of a link -o its file", ("map", f"{HERE}/soft.csv", "-t", MACHINE, "-p", "compact", "-o",
                                       f"{HERE}/m.csv"), "m.csv"),
        ("map -o ./name of its matrix", ("map", "m.csv", "-t", MACHINE, "-p", "compact", "-o", "./m.csv"), "m.csv"),
        ("analyze --png its matrix", ("analyze", f"{HERE}/m.csv", "--heat-map", "none", "--png", f"{HERE}/m.csv"),
         "m.csv"),
        ("topo -o its topology", ("topo", "-t", f"{HERE}/t.json", "-o", f"{HERE}/t.json"), "t.json"),
        ("topo --of xml -o its topology", ("topo", "-t", f"{HERE}/t.json", "--of", "xml", "-o", f"{HERE}/t.json"),
         "t.json"),
        ("report --html its database", ("report", f"{HERE}/r.db", "--html", f"{HERE}/r.db"), "r.db"),
        ("report --export-json its database", ("report", f"{HERE}/r.db", "--export-json", f"{HERE}/r.db"), "r.db"),
        ("report --export-csv its database", ("report", f"{HERE}/r.db", "--export-csv", f"{HERE}/r.db"), "r.db"),
        ("report --export-markdown its database", ("report", f"{HERE}/r.db", "--export-markdown", f"{HERE}/r.db"),
         "r.db"),
        ("report --export-latex its database", ("report", f"{HERE}/r.db", "--export-latex", f"{HERE}/r.db"), "r.db"),
        ("report --html its simulation", ("report", "--simulation", f"{HERE}/s.json", "--html", f"{HERE}/s.json"),
         "s.json"),
        ("bench --export-csv its database", ("bench", "--db", f"{HERE}/r.db", "-r", "1", "--export-csv",
                                             f"{HERE}/r.db", "--", "true"), "r.db"),
        ("bench --db its matrix", ("bench", "--db", f"{HERE}/c.json", "--comm", f"{HERE}/c.json", "--policies",
                                   "os,locality", "-r", "1", "--", "true"), "c.json"),
        ("bench --db its program", ("bench", "--db", f"{HERE}/prog", "-r", "1", "--", f"{HERE}/prog"), "prog"),
        ("simulate -o its matrix", ("simulate", "-t", MACHINE, "--comm", f"{HERE}/c.json", "--policies", "locality",
                                    "-o", f"{HERE}/c.json", "--", "true"), "c.json"),
        ("simulate --png its matrix", ("simulate", "-t", MACHINE, "--comm", f"{HERE}/c.json", "--policies",
                                       "locality", "--png", f"{HERE}/c.json", "--", "true"), "c.json"),
        ("mpi map -o its matrix", ("mpi", "map", f"{HERE}/c.json", *cluster, "-o", f"{HERE}/c.json"), "c.json"),
        ("mpi map -o its hostfile", ("mpi", "map", f"{HERE}/c.json", "--hostfile", f"{HERE}/hosts", "--node-topology",
                                     MACHINE, "-o", f"{HERE}/hosts"), "hosts"),
        ("trace -o its program", ("trace", "-o", f"{HERE}/prog", "--", f"{HERE}/prog"), "prog"),
        ("auto --db its program", ("auto", "--db", f"{HERE}/prog", "--", f"{HERE}/prog"), "prog"),
        ("trace -o the program found on PATH", ("trace", "-o", f"{HERE}/prog", "--", "prog"), "prog"),
        ("bench --export-json its --placement file", ("bench", "--db", f"{HERE}/new.db", "--placement",
                                                      f"mine={HERE}/map.json", "--export-json", f"{HERE}/map.json",
                                                      "--", "true"), "map.json"),
        ("demo --out a folder of the user's files", ("demo", "--quick", "--out", HERE), "r.db"),
        ("demo --out . of the user's files", ("demo", "--quick", "--out", "."), "m.csv"),
    ]
    found = [Case("same file", name, argv, "bad", files=files, kept=(kept,), programs=("prog",), links=links,
                  env={"PATH": f"{HERE}:{os.environ.get('PATH', os.defpath)}"}) for name, argv, kept in cases]
    found.append(Case("same file", "two exports to one file", ("report", f"{HERE}/r.db", "--export-csv",
                                                                f"{HERE}/x", "--export-json", f"{HERE}/x"), "bad",
                      files=files, kept=("r.db",), output=f"{HERE}/x"))
    found.append(Case("same file", "map -o a copy of its matrix", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p",
                                                                   "compact", "-o", f"{HERE}/copy.csv"), "good",
                      files={**files, "copy.csv": files["m.csv"]}, kept=("m.csv",)))
    found.append(Case("same file", "report --html /dev/null", ("report", f"{HERE}/r.db", "--html", "/dev/null"),
                      "good", files=files, kept=("r.db",)))
    return found


def devices_and_sizes() -> list[Case]:
    """Every input is read with a type check and a size bound: devices and files of hundreds of
    MiB are refused at once; pipes and files whose name does not say their format are read; a
    UTF-8 byte-order mark is left out."""
    bad = [
        ("analyze /dev/zero", ("analyze", "/dev/zero")), ("analyze /dev/urandom", ("analyze", "/dev/urandom")),
        ("map /dev/zero", ("map", "/dev/zero", "-t", MACHINE, "-p", "compact")),
        ("topo -t /dev/zero", ("topo", "-t", "/dev/zero")), ("topo -t /dev/urandom", ("topo", "-t", "/dev/urandom")),
        ("topo -t /dev/null", ("topo", "-t", "/dev/null")),
        ("run --mapping /dev/zero", ("run", "--print", "-t", MACHINE, "--mapping", "/dev/zero", "--", "true")),
        ("report --simulation /dev/zero", ("report", "--simulation", "/dev/zero")),
        ("report /dev/zero", ("report", "/dev/zero")),
        ("bench --db /dev/zero", ("bench", "--db", "/dev/zero", "-r", "1", "--", "true")),
        ("mpi map --hostfile /dev/zero", ("mpi", "map", f"{HERE}/m.csv", "--hostfile", "/dev/zero", "--node-topology",
                                          MACHINE)),
        ("analyze of 300 MiB", ("analyze", f"{HERE}/big.csv")),
        ("topo -t of 300 MiB", ("topo", "-t", f"{HERE}/big.xml")),
        ("map of 4097 rows", ("map", f"{HERE}/tall.csv", "-t", MACHINE, "-p", "compact")),
        ("topo -t a file of text", ("topo", "-t", f"{HERE}/topology.txt")),
    ]
    files = {"m.csv": b"0,5\n5,0\n", "big.csv": 300 << 20, "big.xml": 300 << 20, "tall.csv": b"0\n" * 4097,
             "topology.txt": b"hello\n"}
    cases = [Case("devices and sizes", name, argv, "bad", files=files) for name, argv in bad]
    xml = subprocess.run([PINWISE, "topo", "-t", MACHINE, "--of", "xml"], capture_output=True, check=True).stdout
    topology = subprocess.run([PINWISE, "topo", "-t", MACHINE, "--of", "json"], capture_output=True, check=True).stdout
    bom = b"\xef\xbb\xbf"
    good = [
        ("analyze a CSV with a byte-order mark", ("analyze", "--heat-map", "none", f"{HERE}/bom.csv")),
        ("map a JSON matrix with a byte-order mark", ("map", f"{HERE}/bom.json", "-t", MACHINE, "-p", "locality")),
        ("topo -t JSON with a byte-order mark", ("topo", "-t", f"{HERE}/bom-topology.json")),
        ("topo -t XML with a byte-order mark", ("topo", "-t", f"{HERE}/bom-topology.xml")),
        ("topo -t XML without .xml", ("topo", "-t", f"{HERE}/lstopo-output")),
        ("topo -t JSON without .json", ("topo", "-t", f"{HERE}/topology")),
        ("map -t XML without .xml", ("map", f"{HERE}/bom.csv", "-t", f"{HERE}/lstopo-output", "-p", "compact")),
        ("analyze a CSV with a UTF-8 comment", ("analyze", "--heat-map", "none", f"{HERE}/comment.csv")),
    ]
    files = {"bom.csv": bom + b"0,5\n5,0\n", "bom.json": bom + b'{"matrix": [[0, 5], [5, 0]]}',
             "bom-topology.json": bom + topology, "bom-topology.xml": bom + xml, "lstopo-output": xml,
             "topology": topology, "comment.csv": "# caf\u00e9, \u00b1 3\n0,2\n2,0\n".encode()}
    return cases + [Case("devices and sizes", name, argv, "good", files=files) for name, argv in good]


def standard_output() -> list[Case]:
    """Standard output on a full device or closed: one error line and a non-zero status, never a
    traceback nor a silent success; a command that writes only files needs no standard output."""
    files = {"m.csv": b"0,5\n5,0\n", "r.db": results_database()}
    writers = [
        ("topo", ("topo", "-t", MACHINE)), ("topo --of xml", ("topo", "-t", MACHINE, "--of", "xml")),
        ("topo --presets", ("topo", "--presets")), ("map", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact")),
        ("map -f json", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-f", "json")),
        ("analyze", ("analyze", f"{HERE}/m.csv")), ("report", ("report", f"{HERE}/r.db")),
        ("run --print", ("run", "--print", "-t", MACHINE, "-p", "compact", "--", "true")),
        ("workload list", ("workload", "list")), ("--help", ("--help",)), ("map --help", ("map", "--help")),
    ]
    cases = [Case("standard output", f"{name} >{'/dev/full' if how == 'full' else '&-'}", argv, "bad", files=files,
                  stdout=how) for name, argv in writers for how in ("full", "closed")]
    for how in ("full", "closed"):
        cases.append(Case("standard output", f"topo -o FILE, standard output {how}",
                          ("topo", "-t", MACHINE, "-o", f"{HERE}/t.txt"), "good", files=files, stdout=how))
    return cases


#: The C locale without Python's UTF-8 mode: standard output is ASCII.
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}


def locales() -> list[Case]:
    """Every command in the C locale (standard output ASCII, file names and contents still UTF-8)
    and with a standard output of another encoding: read, written and shown, never refused."""
    files = {"m.csv": b"0,5\n5,0\n", "r.db": results_database(), "caf\u00e9.csv": "# \u00b1\n0,1\n1,0\n".encode()}
    commands = [
        ("topo", ("topo",)), ("topo -t x7550", ("topo", "-t", "x7550")),
        ("map", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact")),
        ("map --compare", ("map", f"{HERE}/m.csv", "-t", MACHINE, "--compare")),
        ("analyze", ("analyze", f"{HERE}/m.csv")), ("report", ("report", f"{HERE}/r.db")),
        ("report --export-markdown", ("report", f"{HERE}/r.db", "--export-markdown", f"{HERE}/r.md")),
        ("run --print", ("run", "--print", "-t", MACHINE, "-p", "compact", "--", "true")),
        ("analyze a file named in UTF-8", ("analyze", f"{HERE}/caf\u00e9.csv")),
        ("map -o a file named in UTF-8", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "compact", "-o",
                                          f"{HERE}/\u00fc.json")),
        ("mpi map", ("mpi", "map", f"{HERE}/m.csv", "--cluster", "node:2 pack:1 core:1 pu:1")),
        ("bench", ("bench", "--db", f"{HERE}/new.db", "-r", "1", "--policies", "os,compact", "-q", "--", "true")),
    ]
    cases = [Case("locales", f"{name} (LC_ALL=C PYTHONUTF8=0)", argv, "good", files=files, env=ASCII_LOCALE)
             for name, argv in commands]
    cases += [Case("locales", f"{name} (PYTHONIOENCODING=latin-1)", argv, "good", files=files,
                   env={"PYTHONIOENCODING": "latin-1"}) for name, argv in commands[:6]]
    return cases


def names_not_utf8() -> list[Case]:
    """File and program names that are not UTF-8 (one 0xff byte, as Python holds it): opened,
    stored and shown as they are."""
    name = "\udcff"  # surrogateescape's form of the byte 0xff
    files = {f"m{name}.csv": b"0,5\n5,0\n", f"r{name}.db": results_database(),
             f"tr{name}ue": Path("/bin/true").read_bytes()}
    program = f"{HERE}/tr{name}ue"
    commands = [
        ("bench --db", ("bench", "--db", f"{HERE}/new{name}.db", "-r", "1", "--policies", "os", "-q", "--", "true")),
        ("report", ("report", f"{HERE}/r{name}.db")),
        ("report --html", ("report", f"{HERE}/r{name}.db", "--html", f"{HERE}/r{name}.html")),
        ("map -o", ("map", f"{HERE}/m{name}.csv", "-t", MACHINE, "-p", "compact", "-o", f"{HERE}/o{name}.json")),
        ("analyze", ("analyze", f"{HERE}/m{name}.csv")),
        ("topo -o", ("topo", "-t", MACHINE, "-o", f"{HERE}/t{name}.txt")),
        ("run --print of the program", ("run", "--print", "-t", MACHINE, "-p", "compact", "--", program)),
        ("run --verify of the program", ("run", "--verify", "-p", "compact", "--", program)),
        ("bench of the program", ("bench", "--db", f"{HERE}/p.db", "-r", "1", "--policies", "os,compact", "-q",
                                  "--", program)),
    ]
    cases = [Case("names not UTF-8", label, argv, "good", files=files, programs=(f"tr{name}ue",))
             for label, argv in commands]
    cases += [Case("names not UTF-8", f"{label} (LC_ALL=C PYTHONUTF8=0)", argv, "good", files=files,
                   programs=(f"tr{name}ue",), env=ASCII_LOCALE) for label, argv in commands[1:3] + commands[-1:]]
    return cases


def wrong_answers() -> list[Case]:
    """Inputs once accepted although wrong (or refused although right), one per member of each
    class: no mapping to write, slots that hold no rank, a time that is no time, a script that
    cannot start."""
    # text.sh: an interpreter that is not executable (a relative one is read from the working folder)
    files = {"m.csv": b"0,5\n5,0\n", "crlf.sh": b"#!/bin/sh\r\necho hi\r\n",
             "missing.sh": b"#!/no/such/shell\necho hi\n", "fine.sh": b"#! /bin/sh -e\necho fine\n",
             "text.sh": b"#!notes.txt\necho hi\n", "notes.txt": b"not a program\n"}
    scripts = ("crlf.sh", "missing.sh", "fine.sh", "text.sh")
    cases = [
        Case("wrong answers", "map -p os -o", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "os", "-o",
                                                f"{HERE}/map_os.json"), "bad", files=files,
             output=f"{HERE}/map_os.json"),
        Case("wrong answers", "map -p os -f json", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "os", "-f", "json"),
             "bad", files=files),
        Case("wrong answers", "map -p os -f cpulist", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "os", "-f",
                                                        "cpulist"), "bad", files=files),
        Case("wrong answers", "map -p os (table)", ("map", f"{HERE}/m.csv", "-t", MACHINE, "-p", "os"), "good",
             files=files),
        Case("wrong answers", "topo --presets -o", ("topo", "--presets", "-o", f"{HERE}/p.txt"), "bad",
             output=f"{HERE}/p.txt"),
        Case("wrong answers", "topo --presets -t", ("topo", "--presets", "-t", "x7550"), "bad"),
        Case("wrong answers", "topo --presets --of json", ("topo", "--presets", "--of", "json"), "bad"),
        Case("wrong answers", "map --compare -o", ("map", f"{HERE}/m.csv", "-t", MACHINE, "--compare", "-o",
                                                    f"{HERE}/c.json"), "bad", files=files, output=f"{HERE}/c.json"),
        Case("wrong answers", "map --compare -f json", ("map", f"{HERE}/m.csv", "-t", MACHINE, "--compare", "-f",
                                                         "json"), "bad", files=files),
        Case("wrong answers", "map --compare -p locality", ("map", f"{HERE}/m.csv", "-t", MACHINE, "--compare",
                                                             "-p", "locality"), "bad", files=files),
        Case("wrong answers", "report --png of a simulation only", ("report", "--simulation", f"{HERE}/s.json",
                                                                     "--png", f"{HERE}/plots"), "bad",
             files={"s.json": b"{}"}, output=f"{HERE}/plots"),
        Case("wrong answers", "workload list NAME", ("workload", "list", "pairs"), "bad"),
        Case("wrong answers", "pin -t another machine", ("pin", "--pid", str(os.getpid()), "-t", "x7550", "--cpus",
                                                          "0"), "bad"),
    ]
    for line, expect in [("node0 slots=0", "bad"), ("node0 slots=-1", "bad"), ("node0 max_slots=0", "bad"),
                         ("node0:0", "bad"), ("node0 slots=x", "bad"), ("node0 slots=2", "good"), ("node0:2", "good")]:
        cases.append(Case("wrong answers", f"hostfile {line!r}", ("mpi", "map", f"{HERE}/m.csv", "--hostfile",
                                                                  f"{HERE}/hosts", "--node-topology", MACHINE), expect,
                          files={**files, "hosts": line.encode() + b"\n"}))
    for printed, expect in [("nan", "bad"), ("inf", "bad"), ("-1", "bad"), ("1_0", "bad"), ("0.25", "good")]:
        cases.append(Case("wrong answers", f"--time-regex reading {printed!r}",
                          ("bench", "--db", f"{HERE}/r.db", "-r", "1", "--policies", "os", "-q", "--time-regex",
                           "t=(\\S+)", "--", "sh", "-c", f"echo t={printed}"), expect))
    for script, expect in [("crlf.sh", "bad"), ("missing.sh", "bad"), ("text.sh", "bad"), ("fine.sh", "good")]:
        cases.append(Case("wrong answers", f"run --verify {script}", ("run", "--verify", "-p", "os", "--",
                                                                      f"{HERE}/{script}"), expect, files=files,
                          programs=scripts))
        cases.append(Case("wrong answers", f"bench {script}", ("bench", "--db", f"{HERE}/r.db", "-r", "1", "-q",
                                                               "--policies", "os", "--", f"{HERE}/{script}"), expect,
                          files=files, programs=scripts))
        cases.append(Case("wrong answers", f"trace {script}", ("trace", "-o", f"{HERE}/c.json", "--no-native-run", "--",
                                                               f"{HERE}/{script}"),
                          expect if shutil.which("valgrind") else "bad", files=files, programs=scripts,
                          output=f"{HERE}/c.json" if expect == "bad" else None))
    if shutil.which("valgrind"):
        cases.append(Case("wrong answers", "trace with TMPDIR unwritable", ("trace", "-o", f"{HERE}/c.json",
                                                                           "--no-native-run", "--", "true"), "good",
                          env={"TMPDIR": "/nonexistent/folder"}))
    return cases


def corpus() -> list[Case]:
    return (number_options() + cpu_lists() + memory_options() + likwid_expressions() + skip_masks() + synthetic_topologies()
            + xml_topologies() + json_topologies() + matrices() + mapping_files() + output_paths() + databases()
            + same_files() + devices_and_sizes() + standard_output() + locales() + names_not_utf8() + wrong_answers())


# -- running it ---------------------------------------------------------------------------------

def judge(case: Case, status: int | None, stderr: str, output_left: bool, destroyed: bool = False,
          temp_left: bool = False) -> list[str]:
    """The defects one run shows (none: it behaved)."""
    if status is None:
        return ["hang"]
    defects = []
    if "Traceback" in stderr:
        defects.append("traceback")
    lines = [line for line in stderr.splitlines() if line.strip()]
    if status != 0:
        errors = [line for line in lines if line.startswith("pinwise: error:")]
        others = [line for line in lines if not line.startswith(("pinwise: error:", "pinwise: warning:"))]
        if len(errors) != 1 or others:
            defects.append("unclear message")
        if case.expect == "good":
            defects.append("refused good")
        if output_left:
            defects.append("half-written")
    elif case.expect == "bad":
        defects.append("accepted bad")
    if status == 0 and any(not line.startswith("pinwise:") and ("Warning" in line or "warning" in line) for line in lines):
        defects.append("unclear message")  # a raw Python or numpy warning
    if destroyed:
        defects.append("data destroyed")
    if temp_left:
        defects.append("temp left")
    return defects


def _close_standard_output() -> None:
    os.close(1)


def run_case(case: Case, root: Path, index: int) -> tuple[Case, list[str], str]:
    here = root / f"case{index}"
    here.mkdir()
    temporary = here / "tmp"
    temporary.mkdir()
    for name, data in case.files.items():
        if isinstance(data, int):  # a file of that many bytes, all of it a hole: no disk used
            with open(here / name, "wb") as handle:
                handle.truncate(data)
            continue
        (here / name).write_bytes(data)
        if name in case.programs:
            (here / name).chmod(0o755)
    for name, target in case.links.items():
        if name.startswith("="):
            os.link(here / target, here / name[1:])
        else:
            os.symlink(target, here / name)
    argv = [PINWISE, *(a.replace(HERE, str(here)) for a in case.argv)]
    output = Path(case.output.replace(HERE, str(here))) if case.output else None
    env = {**os.environ, "TMPDIR": str(temporary),
           **{k: v.replace(HERE, str(here)) for k, v in case.env.items()}}
    stdout = (open("/dev/full", "wb") if case.stdout == "full" else subprocess.DEVNULL if case.stdout
              else subprocess.PIPE)
    try:
        result = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, errors="replace",
                                timeout=TIME_LIMIT, stdin=subprocess.DEVNULL, cwd=here, env=env,
                                preexec_fn=_close_standard_output if case.stdout == "closed" else None)
        status, stderr = result.returncode, result.stderr
    except subprocess.TimeoutExpired as expired:
        status, stderr = None, (expired.stderr or b"").decode(errors="replace") if isinstance(expired.stderr, bytes) else ""
    finally:
        if case.stdout == "full":
            stdout.close()
    left = output is not None and os.path.lexists(output)  # False for a name the system refuses
    leftovers = [p.name for p in here.iterdir() if p.name.startswith(".") and p.name not in case.files]
    destroyed = any(not (here / name).is_file() or (here / name).read_bytes() != case.files[name] for name in case.kept)
    defects = judge(case, status, stderr, left or bool(leftovers), destroyed, any(temporary.iterdir()))
    return case, defects, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=max(2, (os.cpu_count() or 1) * 2), help="cases run at once")
    parser.add_argument("--show", choices=DEFECTS, help="print each case with this defect and its stderr")
    parser.add_argument("--surface", help="only the cases of this surface")
    args = parser.parse_args(argv)
    cases = [c for c in corpus() if args.surface is None or c.surface == args.surface]
    root = Path(tempfile.mkdtemp(prefix="pinwise-fuzz-"))
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda item: run_case(item[1], root, item[0]), enumerate(cases)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_surface: dict[str, Counter] = {}
    for case, defects, stderr in results:
        counts = per_surface.setdefault(case.surface, Counter())
        counts["cases"] += 1
        counts.update(defects)
        if defects and (args.show is None or args.show in defects):
            print(f"  {', '.join(defects)}: [{case.surface}] {case.name}: pinwise {' '.join(case.argv)[:160]}")
            if args.show:
                print("    " + stderr.strip().replace("\n", "\n    ")[:2000])
    width = max(len(s) for s in per_surface)
    print(f"{'surface':<{width}}  {'cases':>5}  " + "  ".join(f"{d:>{len(d)}}" for d in DEFECTS))
    total = Counter()
    for surface, counts in per_surface.items():
        total.update(counts)
        print(f"{surface:<{width}}  {counts['cases']:>5}  " + "  ".join(f"{counts[d]:>{len(d)}}" for d in DEFECTS))
    print(f"{'total':<{width}}  {total['cases']:>5}  " + "  ".join(f"{total[d]:>{len(d)}}" for d in DEFECTS))
    return 1 if any(total[d] for d in DEFECTS) else 0


if __name__ == "__main__":
    sys.exit(main())
