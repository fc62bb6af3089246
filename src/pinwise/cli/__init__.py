"""The ``pinwise`` command: one sub-command per capability, each a thin shell over the Python API.

The handlers live in :mod:`pinwise.cli.placing` (topo, run, pin), :mod:`pinwise.cli.mapping` (map) and
:mod:`pinwise.cli.tracing` (trace, analyze), :mod:`pinwise.cli.measuring` (bench, report, workload, demo,
auto, simulate) and :mod:`pinwise.cli.mpi` (mpi trace, map, run); the commands' parsers in :mod:`pinwise.cli.parser`, over the shared options of :mod:`pinwise.cli.options`.
A command whose options bear on each other builds its options record first, beside its handler
(RunCommand, BenchCommand, TraceCommand...): its ``from_args`` makes every check between options
and every conversion, as hyperfine's options.rs does; the handler then calls the API and prints.
"""

from __future__ import annotations

import _signal  # the signal module's C half: ``signal`` itself loads enum first, 3 ms of the window below
import os  # loaded with the interpreter already

# Ctrl-C while the command line loads ends pinwise as it would end any program, without a
# traceback of whichever import it interrupted; main() gives Python its handler back. The pinwise
# command (native/launcher/pinwise.c) starts Python with SIGINT blocked, so that a Ctrl-C during
# the interpreter's own start-up waits too: unblocked here, after the default action is set, it
# ends the process at once.
try:
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    if os.environ.pop("PINWISE_SIGINT_HELD", None) is not None:
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})
except ValueError:  # imported outside the main thread: signals are not ours to set
    pass

import argparse
import importlib
import signal
import sys
import warnings

from ..errors import PinwiseError, interrupted_status
from ..processes import own_settings, received, stop_on_termination
from ..temporary import clean_leftovers
from ..streams import OutputLost
from ..vocabulary import AUTO_COMMAND
from .parser import build_parser


_WARNED: set[str] = set()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """One line, once: a warning about the machine (no LEMON) repeated at every window of an
    adaptive run would bury the run's own lines."""
    text = f"pinwise: warning: {message}"
    if text not in _WARNED:
        _WARNED.add(text)
        print(text, file=sys.stderr)


#: The options that name files a command reads, and those that name files it writes: an output
#: that is one of the inputs is refused before any work (pinwise.files.refuse_same_files).
_INPUT_OPTIONS = {"comm_file": "COMM_FILE", "comm": "--comm", "db": "DB", "topology": "--topology",
                  "node_topology": "--node-topology", "mapping": "--mapping", "hostfile": "--hostfile",
                  "simulation": "--simulation"}
_OUTPUT_OPTIONS = {"output": "--output", "html": "--html", "png": "--png", "export_csv": "--export-csv",
                   "export_json": "--export-json", "export_markdown": "--export-markdown",
                   "export_latex": "--export-latex"}
#: Commands that write their --db (bench, auto); report reads it.
_WRITES_DB = ("bench", AUTO_COMMAND)


def _refuse_overwriting_inputs(args: argparse.Namespace) -> None:
    inputs, outputs = [], []
    for name, label in _INPUT_OPTIONS.items():
        values = getattr(args, name, None)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value:
                (outputs if name == "db" and args.command in _WRITES_DB else inputs).append(
                    ("--db" if name == "db" and args.command != "report" else label, value))
    outputs += [(label, getattr(args, name)) for name, label in _OUTPUT_OPTIONS.items()
                if isinstance(getattr(args, name, None), str)]
    for placement in getattr(args, "placement", None) or []:  # NAME=SPEC, where SPEC may be a mapping file
        inputs.append((f"--placement {placement}", placement.partition("=")[2]))
    program = getattr(args, "program", None) or getattr(args, "job", None) or []
    program = program[1:] if program[:1] == ["--"] else program
    if program:  # a bare name is the file PATH gives it (trace -o /usr/bin/true -- true)
        inputs.append(("the program", program[0] if os.sep in program[0] else next(
            (path for folder in os.environ.get("PATH", os.defpath).split(os.pathsep)
             if os.path.isfile(path := os.path.join(folder or ".", program[0]))), program[0])))
    if outputs:  # pinwise.files loads pathlib and tempfile: not for the commands that write nothing (run)
        from ..files import refuse_same_files

        refuse_same_files(outputs, inputs)


def main(argv: list[str] | None = None, command: bool = False) -> int:
    """The ``pinwise`` command. Its standard streams are guarded (pinwise.streams): output that
    cannot be written ends the command with one line and status 1. ``command``: this is the
    process (native/launcher/pinwise.c): once it has its exit status, the stop signals are ignored,
    so a Ctrl-C then ends nothing (in Python's shutdown, it printed "Exception ignored in" with a
    traceback: CI, 1 of 30 trials of a 0.09 s command stopped at random)."""
    from ..streams import drop_output, flush, guarded

    with guarded():
        try:
            try:
                status = _main(argv)
            finally:
                flush()
            return status
        except OutputLost as err:
            print(f"pinwise: error: {err}", file=sys.stderr)
            return err.exit_status
        except BrokenPipeError:  # the reader went away (| head): what it wanted, it got
            drop_output()
            return 0
        except KeyboardInterrupt as interrupt:  # a stop while the last output was flushed (1 of 30 trials)
            print("pinwise: interrupted", file=sys.stderr)
            return interrupted_status(interrupt)
        finally:
            if command:  # one still pending is ignored too: its handler was not run yet (no loop here)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _main(argv: list[str] | None) -> int:
    args = None
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:  # set while loading, above
            signal.signal(signal.SIGINT, signal.default_int_handler)
        parser = build_parser()
        argv = sys.argv[1:] if argv is None else argv
        if not argv:  # no command: what the commands are, not an error
            parser.print_help()
            return 0
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # the usage error names the command's own help
            hint = " (the thread count is -n; -t names a topology)" if args.command == "workload" and "-t" in unknown else ""
            parser.commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
        stop_on_termination()  # SIGTERM and SIGHUP stop a command as Ctrl-C does, never leaving its programs behind
        clean_leftovers()  # what a pinwise (or Valgrind) killed with -9 left in the temporary folder
        warnings.showwarning = _show_warning  # a warning is one line, like every message of pinwise
        warnings.simplefilter("always", UserWarning)
        _refuse_overwriting_inputs(args)
        # Each command imports only its own module: pinning a program to a CPU list stays quick.
        module, _, function = args.handler.partition(":")
        with own_settings():  # quiet OpenBLAS threads in pinwise's process; the programs get the user's
            return getattr(importlib.import_module(f"{__name__}.{module}"), function)(args)
    except OutputLost:
        raise
    except PinwiseError as err:
        command = " ".join(filter(None, [getattr(args, "command", None), getattr(args, "mpi_command", None)]))
        print(f"pinwise: error: {err} (see pinwise {command + ' ' if command else ''}--help)", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt as interrupt:
        print("pinwise: interrupted", file=sys.stderr)
        return interrupted_status(interrupt)
    except Exception:  # noqa: BLE001 - a module interrupted as it loaded: numpy makes that an ImportError,
        if not received:  # Python 3.11 a RuntimeError when it lands in a class's __set_name__
            raise
        print("pinwise: interrupted", file=sys.stderr)
        return 128 + received[-1]
    finally:
        received.clear()
        if signal.getsignal(signal.SIGINT) is not signal.SIG_DFL:  # a caller of main() gets Python's handler back
            signal.signal(signal.SIGINT, signal.default_int_handler)
