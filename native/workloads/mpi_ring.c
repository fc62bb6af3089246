/* A ring with known traffic: rank r sends ROUNDS messages of BYTES bytes to r + 1 (mod P), each
 * with a different call (Send, Isend, Sendrecv, a persistent request), and receives as many from
 * r - 1. Then, with "collectives", one Bcast of BYTES from rank 0 and one Allreduce of 8 doubles.
 *   pinwise-mpi-ring [BYTES [ROUNDS [collectives]]]     (default 1024 bytes, 4 rounds) */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bytes = argc > 1 ? atoi(argv[1]) : 1024, rounds = argc > 2 ? atoi(argv[2]) : 4;
    char *out = calloc((size_t)bytes, 1), *in = calloc((size_t)bytes, 1);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Request send_request, recv_request, persistent;
    MPI_Send_init(out, bytes, MPI_CHAR, next, 3, MPI_COMM_WORLD, &persistent);
    for (int round = 0; round < rounds; round++) {
        switch (round % 4) {
        case 0:
            MPI_Irecv(in, bytes, MPI_CHAR, prev, 0, MPI_COMM_WORLD, &recv_request);
            MPI_Send(out, bytes, MPI_CHAR, next, 0, MPI_COMM_WORLD);
            MPI_Wait(&recv_request, MPI_STATUS_IGNORE);
            break;
        case 1:
            MPI_Irecv(in, bytes, MPI_CHAR, prev, 1, MPI_COMM_WORLD, &recv_request);
            MPI_Isend(out, bytes, MPI_CHAR, next, 1, MPI_COMM_WORLD, &send_request);
            MPI_Wait(&send_request, MPI_STATUS_IGNORE);
            MPI_Wait(&recv_request, MPI_STATUS_IGNORE);
            break;
        case 2:
            MPI_Sendrecv(out, bytes, MPI_CHAR, next, 2, in, bytes, MPI_CHAR, prev, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            break;
        default:
            MPI_Irecv(in, bytes, MPI_CHAR, prev, 3, MPI_COMM_WORLD, &recv_request);
            MPI_Start(&persistent);
            MPI_Wait(&persistent, MPI_STATUS_IGNORE);
            MPI_Wait(&recv_request, MPI_STATUS_IGNORE);
        }
    }
    MPI_Request_free(&persistent);
    if (argc > 3 && strcmp(argv[3], "collectives") == 0) {
        MPI_Bcast(out, bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        double mine[8] = {0}, sum[8];
        MPI_Allreduce(mine, sum, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
