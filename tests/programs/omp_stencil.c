/* Test program (issue 36): the 2-D Jacobi stencil of stencil.h as OpenMP writes it, each thread
   one block, a barrier after every sweep (the parallel loop's). Run with OMP_WAIT_POLICY=active,
   its threads spin at the barrier between sweeps, as they do natively by default for a while.
   Usage: omp_stencil [threads [steps [rows per thread]]]. */
#include <omp.h>

#include "stencil.h"

int main(int argc, char **argv)
{
    if (stencil_setup(argc, argv, "omp_stencil"))
        return 2;
    double sum = 0;
#pragma omp parallel num_threads(settings.threads) reduction(+ : sum)
    {
        int me = omp_get_thread_num();
        own_block(me);
#pragma omp barrier
        for (int step = 0; step < settings.steps; step++) {
            sweep_block(me, step);
#pragma omp barrier
        }
        sum += block_sum(me);
    }
    printf("sum %.6f\n", sum);
    return 0;
}
