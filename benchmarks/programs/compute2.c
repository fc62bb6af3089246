/* A compute-bound program of two threads (issue 36's overhead benchmark): each thread iterates a
   floating-point recurrence on its own registers, with a rare store to a private slot, for ROUNDS
   rounds; prints its own wall time as "Time in seconds = T". Usage: compute2 [rounds]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long rounds = 200000000;
static struct { _Alignas(64) double value; } results[2];

static void *work(void *arg)
{
    long me = (long)arg;
    double x = 1.0 + (double)me;
    for (long r = 0; r < rounds; r++) {
        x = x * 1.0000001 + 0.5 / (x + 1.0);
        if ((r & 0xffff) == 0)
            results[me].value = x;
    }
    results[me].value = x;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t other;
    if (pthread_create(&other, NULL, work, (void *)1L) != 0)
        return 1;
    work((void *)0L);
    pthread_join(other, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("Time in seconds = %.6f (%.3f %.3f)\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           results[0].value, results[1].value);
    return 0;
}
