/* Test program: prints the OpenMP place number (omp_get_place_num) of every thread of one parallel
 * region, in thread-number order, on one line: what libgomp made of OMP_PLACES and OMP_PROC_BIND. */
#include <omp.h>
#include <stdio.h>

int main(void)
{
    int count = 0, place[1024];
#pragma omp parallel
    {
        int me = omp_get_thread_num();
        if (me < 1024)
            place[me] = omp_get_place_num();
#pragma omp single
        count = omp_get_num_threads();
    }
    for (int i = 0; i < count && i < 1024; i++)
        printf("%d%c", place[i], i + 1 < count ? ' ' : '\n');
    return 0;
}
