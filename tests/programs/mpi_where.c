/* Each rank prints where it may run: "rank R cpus LIST" (Cpus_allowed_list of /proc/self/status). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char line[512], cpus[512] = "?";
    FILE *status = fopen("/proc/self/status", "r");
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
            sscanf(line + 18, "%511s", cpus);
    if (status)
        fclose(status);
    printf("rank %d cpus %s\n", rank, cpus);
    MPI_Finalize();
    return 0;
}
