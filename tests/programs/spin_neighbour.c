/* Test program (issue 13): a 1-D Jacobi solver whose threads synchronise with their neighbours
   through a spin-waited flag array, as hand-written solvers do. Thread i owns a block of cells and
   after each sweep publishes its step number in progress[i]; before the next sweep it spins until
   both neighbours have published the same step, then reads their boundary cells. The flags sit
   side by side in one cache line (the usual `volatile int progress[T]`), so under Valgrind, which
   runs one thread at a time, a waiting thread spins through whole time slices on that line.
   Usage: spin_neighbour [threads [steps [cells per thread]]]. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static int threads = 4, steps = 200, cells = 2048;
static double* grid[2];
static _Alignas(64) atomic_int progress[64];

static void wait_for(int neighbour, int step)
{
    if (neighbour < 0 || neighbour >= threads) return;
    while (atomic_load_explicit(&progress[neighbour], memory_order_acquire) < step) {}
}

static void* sweep(void* arg)
{
    int me = (int)(long)arg;
    long first = 1 + (long)me * cells, last = first + cells;  /* cells [first, last) */
    for (int step = 0; step < steps; step++) {
        wait_for(me - 1, step);
        wait_for(me + 1, step);
        double* from = grid[step & 1];
        double* to = grid[(step + 1) & 1];
        for (long c = first; c < last; c++) to[c] = (from[c - 1] + from[c] + from[c + 1]) / 3.0;
        atomic_store_explicit(&progress[me], step + 1, memory_order_release);
        /* the next sweep reads `to`: wait until the neighbours have finished writing theirs */
        wait_for(me - 1, step + 1);
        wait_for(me + 1, step + 1);
    }
    return NULL;
}

int main(int argc, char** argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) steps = atoi(argv[2]);
    if (argc > 3) cells = atoi(argv[3]);
    if (threads < 1 || threads > 64 || steps < 1 || cells < 1) return 2;
    long n = (long)threads * cells + 2;
    for (int g = 0; g < 2; g++) {
        grid[g] = calloc((size_t)n, sizeof(double));
        grid[g][0] = grid[g][n - 1] = 100.0;
    }
    pthread_t ids[64];
    for (long t = 1; t < threads; t++) pthread_create(&ids[t], NULL, sweep, (void*)t);
    sweep((void*)0);
    for (long t = 1; t < threads; t++) pthread_join(ids[t], NULL);
    printf("%.6f\n", grid[steps & 1][n / 2]);
    return 0;
}
