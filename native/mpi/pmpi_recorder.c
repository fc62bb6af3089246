/* libpinwise_pmpi.so: who sends how much to whom in an MPI job (`pinwise mpi trace`).
 *
 * Preloaded into every rank, it wraps MPI's calls through the profiling interface (each MPI_X
 * calls PMPI_X) and counts, per destination rank of MPI_COMM_WORLD, the bytes and the messages
 * this rank sends:
 *   - point to point: MPI_Send, Ssend, Bsend, Rsend, Isend, Issend, Ibsend, Irsend, Sendrecv,
 *     Sendrecv_replace, and persistent requests (MPI_Send_init and its kinds, counted at each
 *     MPI_Start/Startall);
 *   - collectives, decomposed into the point-to-point traffic of a stated algorithm (the textbook
 *     ones: a binomial tree for Bcast and Reduce, linear for Gather/Scatter/Alltoall, Reduce then
 *     Bcast for Allreduce, ring for Allgather) and also kept as totals (calls and bytes of the
 *     payload per collective), since a library may use other algorithms.
 * At MPI_Finalize (and when MPI_Abort is called) the rank writes its row to
 * $PINWISE_MPI_DIR/rank-<world rank>-<pid>.txt (the pid: processes that failed to join one world
 * and each call themselves rank 0 show up as several rows for one rank, not as one):
 *     pinwise-mpi 1
 *     rank R size P
 *     bytes b0 b1 ... b(P-1)
 *     messages m0 m1 ...
 *     collective NAME CALLS BYTES        (one line per collective used)
 *     complete 1|0                       (0: written at MPI_Abort)
 * Ranks of other communicators are translated to MPI_COMM_WORLD's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int world_rank = -1, world_size = 0;
static unsigned long long *bytes_to = NULL, *messages_to = NULL;

enum { BCAST, REDUCE, ALLREDUCE, GATHER, SCATTER, ALLGATHER, ALLTOALL, BARRIER, N_COLLECTIVES };
static const char *collective_names[N_COLLECTIVES] = {"bcast", "reduce", "allreduce", "gather", "scatter",
                                                      "allgather", "alltoall", "barrier"};
static unsigned long long collective_calls[N_COLLECTIVES], collective_bytes[N_COLLECTIVES];

/* Persistent send requests: the request, its destination (world rank) and bytes. */
struct persistent {
    MPI_Request request;
    int dest;
    unsigned long long bytes;
};
static struct persistent *persistents = NULL;
static int n_persistents = 0, cap_persistents = 0;

static void setup(void)
{
    if (bytes_to != NULL)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    bytes_to = calloc((size_t)world_size, sizeof *bytes_to);
    messages_to = calloc((size_t)world_size, sizeof *messages_to);
}

static int world_of(MPI_Comm comm, int rank)
{
    if (comm == MPI_COMM_WORLD || rank < 0)
        return rank;
    MPI_Group group, world;
    int out = MPI_UNDEFINED;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, 1, &rank, world, &out);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    return out == MPI_UNDEFINED ? -1 : out;
}

static unsigned long long size_of(int count, MPI_Datatype type)
{
    int size = 0;
    if (type == MPI_DATATYPE_NULL || count <= 0)
        return 0;
    PMPI_Type_size(type, &size);
    return (unsigned long long)count * (unsigned long long)size;
}

static void sent(MPI_Comm comm, int dest, unsigned long long bytes)
{
    setup();
    if (dest == MPI_PROC_NULL)
        return;
    int to = world_of(comm, dest);
    if (to < 0 || to >= world_size)
        return;
    bytes_to[to] += bytes;
    messages_to[to] += 1;
}

static void write_row(int complete)
{
    const char *dir = getenv("PINWISE_MPI_DIR");
    if (dir == NULL || bytes_to == NULL)
        return;
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank-%d-%ld.txt", dir, world_rank, (long)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (out == NULL)
        return;
    fprintf(out, "pinwise-mpi 1\nrank %d size %d\nbytes", world_rank, world_size);
    for (int r = 0; r < world_size; r++)
        fprintf(out, " %llu", bytes_to[r]);
    fprintf(out, "\nmessages");
    for (int r = 0; r < world_size; r++)
        fprintf(out, " %llu", messages_to[r]);
    fprintf(out, "\n");
    for (int c = 0; c < N_COLLECTIVES; c++)
        if (collective_calls[c])
            fprintf(out, "collective %s %llu %llu\n", collective_names[c], collective_calls[c], collective_bytes[c]);
    fprintf(out, "complete %d\n", complete);
    if (fclose(out) == 0)
        rename(tmp, path);
}

/* ---- point to point ---- */

/* A send of `count` elements to `dest`: counted, then done by PMPI. */
#define BLOCKING_SEND(NAME)                                                                               \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)       \
    {                                                                                                    \
        sent(comm, dest, size_of(count, type));                                                          \
        return PMPI_##NAME(buf, count, type, dest, tag, comm);                                           \
    }
#define NONBLOCKING_SEND(NAME)                                                                            \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,      \
                   MPI_Request *request)                                                                 \
    {                                                                                                    \
        sent(comm, dest, size_of(count, type));                                                          \
        return PMPI_##NAME(buf, count, type, dest, tag, comm, request);                                  \
    }
BLOCKING_SEND(Send)
BLOCKING_SEND(Ssend)
BLOCKING_SEND(Bsend)
BLOCKING_SEND(Rsend)
NONBLOCKING_SEND(Isend)
NONBLOCKING_SEND(Issend)
NONBLOCKING_SEND(Ibsend)
NONBLOCKING_SEND(Irsend)

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    sent(comm, dest, size_of(sendcount, sendtype));
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                         comm, status);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status)
{
    sent(comm, dest, size_of(count, type));
    return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
}

static void remember(MPI_Request request, MPI_Comm comm, int dest, unsigned long long bytes)
{
    setup();
    if (n_persistents == cap_persistents) {
        cap_persistents = cap_persistents ? 2 * cap_persistents : 16;
        persistents = realloc(persistents, (size_t)cap_persistents * sizeof *persistents);
    }
    persistents[n_persistents++] = (struct persistent){request, dest == MPI_PROC_NULL ? -1 : world_of(comm, dest),
                                                       bytes};
}

#define PERSISTENT_SEND(NAME)                                                                               \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,         \
                   MPI_Request *request)                                                                   \
    {                                                                                                      \
        int result = PMPI_##NAME(buf, count, type, dest, tag, comm, request);                              \
        if (result == MPI_SUCCESS)                                                                         \
            remember(*request, comm, dest, size_of(count, type));                                          \
        return result;                                                                                     \
    }
PERSISTENT_SEND(Send_init)
PERSISTENT_SEND(Ssend_init)
PERSISTENT_SEND(Bsend_init)
PERSISTENT_SEND(Rsend_init)

static void started(MPI_Request request)
{
    for (int i = 0; i < n_persistents; i++)
        if (persistents[i].request == request && persistents[i].dest >= 0 && persistents[i].dest < world_size) {
            bytes_to[persistents[i].dest] += persistents[i].bytes;
            messages_to[persistents[i].dest] += 1;
            return;
        }
}

int MPI_Start(MPI_Request *request)
{
    setup();
    started(*request);
    return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[])
{
    setup();
    for (int i = 0; i < count; i++)
        started(requests[i]);
    return PMPI_Startall(count, requests);
}

int MPI_Request_free(MPI_Request *request)
{
    for (int i = 0; i < n_persistents; i++)
        if (persistents[i].request == *request) {
            persistents[i] = persistents[--n_persistents];
            break;
        }
    return PMPI_Request_free(request);
}

/* ---- collectives: totals, and the traffic of the textbook algorithm ---- */

static void collective(int which, unsigned long long bytes)
{
    setup();
    collective_calls[which] += 1;
    collective_bytes[which] += bytes;
}

/* Binomial tree rooted at `root` over the communicator's ranks: each rank, in virtual rank
   v = (rank - root) mod size, sends to v + 2^k for the k below its lowest set bit. */
static void tree_sends(MPI_Comm comm, int root, unsigned long long bytes, int towards_root)
{
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    int v = (rank - root + size) % size;
    if (towards_root) {  /* reduce: a rank sends once, to its parent */
        if (v == 0)
            return;
        int parent = v & (v - 1);
        sent(comm, (parent + root) % size, bytes);
        return;
    }
    int mask = 1;
    while (mask < size && !(v & mask))
        mask <<= 1;
    for (mask >>= 1; mask > 0; mask >>= 1)  /* children v + mask for every mask below the lowest set bit */
        if (v + mask < size)
            sent(comm, (v + mask + root) % size, bytes);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    unsigned long long bytes = size_of(count, type);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == root)
        collective(BCAST, bytes);
    tree_sends(comm, root, bytes, 0);
    return PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    unsigned long long bytes = size_of(count, type);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == root)
        collective(REDUCE, bytes);
    tree_sends(comm, root, bytes, 1);
    return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    unsigned long long bytes = size_of(count, type);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0)
        collective(ALLREDUCE, bytes);
    tree_sends(comm, 0, bytes, 1);  /* reduce to 0, then broadcast from 0 */
    tree_sends(comm, 0, bytes, 0);
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    unsigned long long bytes = size_of(sendcount, sendtype);
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (rank == root)
        collective(GATHER, size_of(recvcount, recvtype) * (unsigned long long)size);
    else
        sent(comm, root, bytes);
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (rank == root) {
        unsigned long long bytes = size_of(sendcount, sendtype);
        collective(SCATTER, bytes * (unsigned long long)size);
        for (int r = 0; r < size; r++)
            if (r != root)
                sent(comm, r, bytes);
    }
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    unsigned long long bytes = size_of(recvcount, recvtype);
    if (rank == 0)
        collective(ALLGATHER, bytes * (unsigned long long)size);
    for (int step = 0; step < size - 1; step++)  /* ring: each block passes on to the next rank */
        sent(comm, (rank + 1) % size, bytes);
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, size;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    unsigned long long bytes = size_of(sendcount, sendtype);
    if (rank == 0)
        collective(ALLTOALL, bytes * (unsigned long long)size * (unsigned long long)size);
    for (int r = 0; r < size; r++)
        if (r != rank)
            sent(comm, r, bytes);
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0)
        collective(BARRIER, 0);
    return PMPI_Barrier(comm);
}

int MPI_Finalize(void)
{
    setup();
    write_row(1);
    return PMPI_Finalize();
}

int MPI_Abort(MPI_Comm comm, int code)
{
    write_row(0);
    return PMPI_Abort(comm, code);
}
