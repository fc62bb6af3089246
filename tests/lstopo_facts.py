"""What lstopo builds from a topology, as plain facts: every object as (type, cpuset, OS index of
PUs and NUMA nodes), the PUs' and NUMA nodes' logical order, the allowed PUs and the NUMA distance
matrices. Read from lstopo's own XML export with a plain walk of the elements (not pinwise's
reader), so that a test compares pinwise with hwloc and not with itself.

Run as a script, it writes ``tests/data/hwloc-v3-facts.json``: those facts for every XML version
3 file of ``../shared/topologies/hwloc-tests-v3`` as hwloc 3.0 builds them, and for the synthetic
strings hwloc 3.0 writes for them and a few only it reads (``memorysidecachesize=``), and the PCI
and OS devices lstopo keeps for each file (:func:`device_facts`). hwloc 2.9 (Debian's)
refuses version 3 files, so the facts are computed once with an lstopo of hwloc's development
branch and kept; the test then needs no hwloc 3. To make them again::

    git clone https://github.com/open-mpi/hwloc /tmp/hwloc3 && cd /tmp/hwloc3
    ./autogen.sh && ./configure --prefix=/tmp/hwloc3/inst --disable-cairo --disable-libxml2 \\
        --disable-plugin-dlopen && make -j && make install
    python tests/lstopo_facts.py /tmp/hwloc3/inst/bin/lstopo-no-graphics

(the facts here were made at hwloc commit 3b37b024aa3f, ``lstopo-no-graphics 3.0.0a1-git``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "topologies"
V3_FACTS = Path(__file__).parent / "data" / "hwloc-v3-facts.json"
#: lstopo's options for the machine pinwise models: disallowed PUs shown, no I/O, no
#: instruction caches, no Misc objects.
VIEW_OPTIONS = ("--disallowed", "--no-io", "--no-icaches", "--filter", "misc:none")


def lstopo_export(lstopo: str, source: str | Path) -> bytes:
    """lstopo's XML export of a file or synthetic string, as pinwise's tree is compared with it."""
    return subprocess.run([lstopo, "-i", str(source), *VIEW_OPTIONS, "--of", "xml", "-"],
                          capture_output=True, check=True).stdout


def device_facts(lstopo: str, source: str | Path | None) -> list[list]:
    """The I/O lstopo keeps by default: [PCI bus id or None, PCI class or None, OS device names,
    CPU list of the object it hangs from] per PCI device (and per OS device on no PCI device)."""
    from pinwise.cpulist import format_cpulist

    where = ["-i", str(source)] if source is not None else []  # None: this machine
    exported = subprocess.run([lstopo, *where, "--disallowed", "--no-icaches", "--filter", "misc:none",
                               "--of", "xml", "-"], capture_output=True, check=True).stdout
    found = []

    def visit(element, cpus: str) -> None:
        for child in element.findall("object"):
            kind = child.get("type")
            if kind == "PCIDev":
                names = sorted(o.get("name") for o in child.findall("object") if o.get("type") == "OSDev")
                found.append([child.get("pci_busid"), int(child.get("pci_type").split()[0], 16), names, cpus])
            elif kind == "OSDev":
                found.append([None, None, [child.get("name")], cpus])
            local = format_cpulist(_cpus(child.get("cpuset"))) if child.get("cpuset") else cpus
            if kind not in ("PCIDev", "OSDev"):
                visit(child, local)

    visit(ET.fromstring(exported), "")
    return sorted(found, key=lambda d: (d[0] or "", d[2]))


def _cpus(text: str) -> tuple[int, ...]:
    from pinwise.topology.hwloc_xml import parse_cpuset

    return tuple(sorted(parse_cpuset(text, "lstopo")))


def facts(exported: bytes) -> dict:
    """The facts of one lstopo XML export (see the module's docstring)."""
    root = ET.fromstring(exported)
    view = {"objects": Counter(), "pus": [], "numa": [], "allowed": None, "distances": set()}
    for element in root.iter("object"):
        kind = element.get("type")
        named = element.get("os_index") if kind in ("PU", "NUMANode") else None
        view["objects"][(kind, _cpus(element.get("cpuset", "0x0")), named)] += 1
        if kind == "PU":
            view["pus"].append(int(named))
        if kind == "NUMANode":
            view["numa"].append(int(named))
        if kind == "Machine" and element.get("allowed_cpuset"):
            view["allowed"] = frozenset(_cpus(element.get("allowed_cpuset")))
    for matrix in root.iter("distances2"):
        if matrix.get("type") == "NUMANode" and matrix.get("indexing") == "os":
            indexes = " ".join(i.text for i in matrix.iter("indexes")).split()
            values = " ".join(v.text for v in matrix.iter("u64values")).split()
            view["distances"].add(frozenset((a, b, values[i * len(indexes) + j]) for i, a in enumerate(indexes)
                                            for j, b in enumerate(indexes)))
    return view


def to_document(view: dict) -> dict:
    """The facts as JSON can hold them (objects as [type, CPU list text, os_index, count])."""
    from pinwise.cpulist import format_cpulist

    return {"objects": sorted([kind, format_cpulist(cpus), named, count] for (kind, cpus, named), count in view["objects"].items()),
            "pus": view["pus"], "numa": view["numa"],
            "allowed": None if view["allowed"] is None else sorted(view["allowed"]),
            "distances": sorted(sorted(list(entry) for entry in matrix) for matrix in view["distances"])}


def from_document(document: dict) -> dict:
    from pinwise.cpulist import parse_cpulist

    def cpus(text: str) -> tuple[int, ...]:
        return tuple(parse_cpulist(text)) if text else ()

    return {"objects": Counter({(kind, cpus(text), named): count for kind, text, named, count in document["objects"]}),
            "pus": document["pus"], "numa": document["numa"],
            "allowed": None if document["allowed"] is None else frozenset(document["allowed"]),
            "distances": {frozenset(tuple(entry) for entry in matrix) for matrix in document["distances"]}}


def _readable(document: dict) -> str:
    """JSON with one object per line, so that a new hwloc's facts show as a readable diff."""
    def line(value) -> str:
        return json.dumps(value, separators=(", ", ": "))

    def section(views: dict) -> str:
        entries = []
        for name, view in views.items():
            objects = ",\n".join(f"    {line(o)}" for o in view["objects"])
            rest = "".join(f",\n   {line(key)}: {line(view[key])}" for key in ("pus", "numa", "allowed", "distances",
                                                                               "devices") if key in view)
            entries.append(f"  {line(name)}: {{\n   \"objects\": [\n{objects}\n   ]{rest}\n  }}")
        return "{\n" + ",\n".join(entries) + "\n }"

    return (f"{{\n \"lstopo\": {line(document['lstopo'])},\n \"options\": {line(document['options'])},\n"
            f" \"files\": {section(document['files'])},\n \"synthetic\": {section(document['synthetic'])}\n}}\n")


#: Synthetic strings only hwloc 3.0 reads (a memory-side cache in front of NUMA nodes), beside the
#: strings hwloc 3.0 writes for the version 3 files.
V3_SYNTHETIC = (
    "pack:2 [numa(memory=1GiB memorysidecachesize=128MiB)] core:2 pu:1",
    "pack:2 [numa(memorysidecachesize=64MiB)] [numa(memory=16GiB)] core:2 [numa(indexes=7,6,5,4,3,2,1,0 "
    "memorysidecachesize=1MiB)] pu:2",
    "pack:2 numa:2(memorysidecachesize=256MiB) core:2 pu:1",
)


def main(lstopo: str) -> None:
    version = subprocess.run([lstopo, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if not version.split()[-1].startswith("3."):
        raise SystemExit(f"{lstopo} is {version}: the facts of XML version 3 files need hwloc 3.0's lstopo")
    files = sorted((SHARED / "hwloc-tests-v3").glob("*.xml"))
    written = [subprocess.run([lstopo, "-i", str(path), "--of", "synthetic"], capture_output=True, text=True)
               for path in files]
    strings = [*(w.stdout.strip() for w in written if w.returncode == 0 and w.stdout.strip()), *V3_SYNTHETIC]
    document = {"lstopo": version, "options": list(VIEW_OPTIONS),
                "files": {path.name: {**to_document(facts(lstopo_export(lstopo, path))),
                                      "devices": device_facts(lstopo, path)} for path in files},
                "synthetic": {text: to_document(facts(lstopo_export(lstopo, text))) for text in strings}}
    V3_FACTS.parent.mkdir(exist_ok=True)
    V3_FACTS.write_text(_readable(document))
    print(f"wrote the facts of {len(files)} files and {len(strings)} synthetic strings to {V3_FACTS}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python tests/lstopo_facts.py PATH/TO/hwloc-3/lstopo-no-graphics")
    main(sys.argv[1])
