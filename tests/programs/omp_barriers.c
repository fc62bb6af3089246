/* Test program (issue 13): an OpenMP team doing private work separated by many barriers, like an
   iterative kernel whose threads own their data. Each thread updates only its own array; the
   barriers are the only thing the threads share. Usage: omp_barriers [rounds [cells]]. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    int cells = argc > 2 ? atoi(argv[2]) : 4096;
    double total = 0;
#pragma omp parallel reduction(+ : total)
    {
        double* mine = calloc((size_t)cells, sizeof(double));
        for (int r = 0; r < rounds; r++) {
            for (int c = 0; c < cells; c++) mine[c] = mine[c] * 0.5 + c + r;
#pragma omp barrier
        }
        for (int c = 0; c < cells; c++) total += mine[c];
        free(mine);
    }
    printf("%.1f\n", total);
    return 0;
}
