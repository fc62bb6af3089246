"""`pinwise mpi trace`: who sends how much to whom in an MPI job, measured with a PMPI library.

The job runs through its real launcher (mpirun/mpiexec of Open MPI or MPICH, srun) with the
recorder preloaded into every rank (native/mpi/pmpi_recorder.c: what it counts and how collectives
are decomposed), built once per MPI since their ABIs differ: libpinwise_pmpi.so for Open MPI,
libpinwise_pmpi_mpich.so for MPICH, chosen by the library the program is linked against. Each rank
writes its row at MPI_Finalize (or MPI_Abort); pinwise merges the rows into the comm file format of
`pinwise trace`: the symmetric matrix M[i][j] = bytes sent i->j plus j->i, with ``"kind": "mpi"``,
the messages matrix (same rule), the directed bytes and the collectives' totals beside it.

The package follows the job's steps: :mod:`.launchers` (which launcher and MPI a command line
uses, and how pinwise's variables reach every rank), :mod:`.recording` (the traced run and the
merge of the ranks' rows), :mod:`.cluster` (the hosts and the node topology), :mod:`.formats`
(rankfiles, machinefiles, hostfiles) and :mod:`.placing` (each rank's CPUs, and the placed run).
"""

from __future__ import annotations

from .cluster import Cluster, cluster_of, expand_hostlist, find_cluster, parse_cluster, read_hostfile
from .formats import RankPlace, format_placement, rank_places
from .launchers import RECORDER, RECORDERS, job_mpi, job_ranks, launcher_kind, program_mpi
from .placing import gpu_rank_plans, rank_plans, ranks_matrix, run_placed
from .recording import merge, mpi_trace

__all__ = ["RECORDER", "RECORDERS", "Cluster", "RankPlace", "cluster_of", "expand_hostlist", "find_cluster",
           "format_placement", "gpu_rank_plans", "job_mpi", "job_ranks", "launcher_kind", "merge", "mpi_trace",
           "parse_cluster", "program_mpi", "rank_places", "rank_plans", "ranks_matrix", "read_hostfile",
           "run_placed"]
