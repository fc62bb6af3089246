/* Test program (issue 36): the 2-D Jacobi stencil of stencil.h with pthreads and a spinning
   barrier (a counter and a sense flag, as hand-written solvers and OpenMP runtimes' active wait
   do): between sweeps every thread spins on the sense flag until the last one arrives, yielding
   its CPU between two reads (without, more threads than CPUs would spin whole time slices away).
   Usage: spin_stencil [threads [steps [rows per thread]]]. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "stencil.h"

static struct { _Alignas(64) atomic_int value; } arrived, sense;  /* a line each */
static struct { _Alignas(64) double value; } sums[256];

static void spin_barrier(int *mine)
{
    *mine = !*mine;
    if (atomic_fetch_add_explicit(&arrived.value, 1, memory_order_acq_rel) == settings.threads - 1) {
        atomic_store_explicit(&arrived.value, 0, memory_order_relaxed);
        atomic_store_explicit(&sense.value, *mine, memory_order_release);
    } else {
        while (atomic_load_explicit(&sense.value, memory_order_acquire) != *mine)
            sched_yield();
    }
}

static void *work(void *arg)
{
    int me = (int)(long)arg, mine = 0;
    own_block(me);
    spin_barrier(&mine);
    for (int step = 0; step < settings.steps; step++) {
        sweep_block(me, step);
        spin_barrier(&mine);
    }
    sums[me].value = block_sum(me);
    return NULL;
}

int main(int argc, char **argv)
{
    if (stencil_setup(argc, argv, "spin_stencil"))
        return 2;
    pthread_t ids[256];
    for (int k = 1; k < settings.threads; k++)
        if (pthread_create(&ids[k], NULL, work, (void *)(long)k) != 0)
            return 1;
    work((void *)0L);
    double sum = sums[0].value;
    for (int k = 1; k < settings.threads; k++) {
        pthread_join(ids[k], NULL);
        sum += sums[k].value;
    }
    printf("sum %.6f\n", sum);
    return 0;
}
