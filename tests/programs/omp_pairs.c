/* Test program: an OpenMP team of 4 in which thread i shares one cache line with thread i^1. */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>

struct line { _Alignas(64) atomic_long value; char pad[56]; };

int main(void)
{
    static struct line lines[2];
#pragma omp parallel num_threads(4)
    {
        int me = omp_get_thread_num();
        atomic_long *mine = &lines[me / 2].value;
        for (long i = 0; i < 400000; i++)
            atomic_fetch_add_explicit(mine, 1, memory_order_relaxed);
    }
    printf("%ld %ld\n", (long)lines[0].value, (long)lines[1].value);
    return 0;
}
