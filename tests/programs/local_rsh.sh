#!/bin/sh
# Open MPI's remote-launch agent for host aliases of this machine: drop ssh's options and the host,
# run the daemon here (without address-space randomisation: orted maps the shared topology at a
# fixed address, which a randomised layout can take).
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
shift
exec setarch "$(uname -m)" -R sh -c "$*"
