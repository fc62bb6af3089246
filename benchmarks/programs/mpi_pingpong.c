/* Two ranks bounce a message back and forth: ping-pong [BYTES] [ROUND_TRIPS]; rank 0 prints
 * "Time in seconds = T" for the round trips (after 100 of warm-up). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int bytes = argc > 1 ? atoi(argv[1]) : 1024, trips = argc > 2 ? atoi(argv[2]) : 20000;
    char *buffer = calloc((size_t)bytes, 1);
    double start = 0;
    for (int i = -100; i < trips; i++) {
        if (i == 0)
            start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buffer, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buffer, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("Time in seconds = %.6f\n", MPI_Wtime() - start);
    free(buffer);
    MPI_Finalize();
    return 0;
}
