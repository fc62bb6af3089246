"""The ``pinwise`` command: one sub-command per capability, each a thin shell over the Python API."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import PinwiseError
from .files import write_text_atomic
from . import topology as topo_mod


def _add_topology_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topology", "-t", metavar="T",
        help="machine to plan for: 'live' (default, this machine), a preset (pinwise topo --presets), "
             "an hwloc XML file (lstopo --of xml), a pinwise JSON file, or a synthetic string such as "
             "'pack:2 l3:1 core:4 pu:2'",
    )


def cmd_topo(args: argparse.Namespace) -> int:
    if args.presets:
        for name, (description, note) in topo_mod.PRESETS.items():
            machine = topo_mod.preset(name)
            print(f"{name:9} {machine.nb_pus:3} PUs  {description}\n          {note}")
        return 0
    topology = topo_mod.load_topology(args.topology)
    if args.of == "text":
        text = topo_mod.render(topology)
    elif args.of == "json":
        text = topo_mod.to_json(topology)
    elif args.of == "xml":
        text = topo_mod.to_xml(topology)
    else:
        text = topo_mod.to_synthetic(topology)
    if args.output:
        write_text_atomic(args.output, text if text.endswith("\n") else text + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinwise",
        description="Place the threads of parallel programs on the cores of multicore machines, "
                    "and prove with statistics that it helped.",
    )
    parser.add_argument("--version", action="version", version=f"pinwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    topo = commands.add_parser("topo", help="show the machine: packages, NUMA nodes, caches, cores, PUs",
                               description="Show a machine as a tree (what this process may use is marked).")
    _add_topology_option(topo)
    topo.add_argument("--of", choices=("text", "json", "xml", "synthetic"), default="text",
                      help="output format (default: text picture)")
    topo.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")
    topo.add_argument("--presets", action="store_true", help="list the named presets of the papers' machines")
    topo.set_defaults(handler=cmd_topo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except PinwiseError as err:
        print(f"pinwise: error: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("pinwise: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
