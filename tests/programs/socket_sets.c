/* Test program (issue 39): private working sets that fit a socket's L3 only at its true size.
   Each thread first touches an array of its own (KIB KiB) and sweeps it PASSES times, one read
   per 64-byte line. Four threads of 2,304 KiB: 9 MiB on one socket of an E5620 (compact), whose
   L3 is 12 MiB and 16-way (12,288 sets: each set then holds 12 of the lines, all of them after the
   first pass); an 8 MiB L3 (8,192 sets, 18 lines a set) misses on every line of every pass. The
   NPB paper's per-socket capacity effect is this difference.
   Usage: socket_sets [threads [KiB per thread [passes]]]. Prints the sum of what it read. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int threads = 4, passes = 4;
static long kib = 2304;
static struct { _Alignas(64) long value; } sums[64];

static void *sweep(void *arg)
{
    long me = (long)arg, lines = kib * 1024 / 64;
    long *data = aligned_alloc(64, (size_t)lines * 64);
    if (data == NULL)
        exit(1);
    for (long i = 0; i < lines * 8; i++)  /* first touch: the pages go to this thread's node */
        data[i] = i + me;
    long sum = 0;
    for (int p = 0; p < passes; p++)
        for (long i = 0; i < lines; i++)
            sum += ((volatile long *)data)[i * 8];
    sums[me].value = sum;
    free(data);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) kib = atol(argv[2]);
    if (argc > 3) passes = atoi(argv[3]);
    if (threads < 1 || threads > 64 || kib < 1 || passes < 1) {
        fprintf(stderr, "usage: socket_sets [threads 1-64 [KiB per thread [passes]]]\n");
        return 2;
    }
    pthread_t ids[64];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, sweep, (void *)k) != 0)
            return 1;
    sweep((void *)0L);
    long sum = sums[0].value;
    for (int k = 1; k < threads; k++) {
        pthread_join(ids[k], NULL);
        sum += sums[k].value;
    }
    printf("sum %ld\n", sum);
    return 0;
}
