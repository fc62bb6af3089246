#!/bin/sh
# Test program: a launcher script, as job scripts are. It runs the program given as its arguments
# in a child process (not with exec: more follows), then reports that program's exit status.
"$@"
status=$?
echo "wrapper: $1 exited with status $status" >&2
exit $status
