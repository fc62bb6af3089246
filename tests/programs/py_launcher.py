"""Test program: a Python launcher script, as many tools are: it runs the program given as its
arguments in a child process (subprocess) and exits with that program's status."""
import subprocess
import sys

sys.exit(subprocess.run(sys.argv[1:]).returncode)
