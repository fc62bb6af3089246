/* Test program (issue 39): STREAM's triad on private arrays, a[i] = b[i] + s c[i], each thread on
   arrays of its own that it first touches (so their pages are on its node), PASSES times. With
   large arrays every thread streams from memory and the program is bound by the memory
   controllers' bandwidth (the NPB paper: a compact list made 2 and 4 threads slower on two
   sockets); with arrays that fit an L1 it never leaves the core.
   Usage: stream_triad [threads [doubles per array [passes]]]. Prints a checksum. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int threads = 4, passes = 2;
static long length = 393216;  /* 3 MiB per array, 9 MiB per thread */
static struct { _Alignas(64) double value; } sums[64];

static void *triad(void *arg)
{
    long me = (long)arg;
    double *a = aligned_alloc(64, (size_t)length * sizeof(double));
    double *b = aligned_alloc(64, (size_t)length * sizeof(double));
    double *c = aligned_alloc(64, (size_t)length * sizeof(double));
    if (!a || !b || !c)
        exit(1);
    for (long i = 0; i < length; i++) {  /* first touch: on this thread's node */
        a[i] = 0;
        b[i] = (double)(i + me);
        c[i] = 1.0 / (double)(i + 1);
    }
    for (int p = 0; p < passes; p++)
        for (long i = 0; i < length; i++)
            a[i] = b[i] + 3.0 * c[i];
    double sum = 0;
    for (long i = 0; i < length; i += 512)
        sum += a[i];
    sums[me].value = sum;
    free(a);
    free(b);
    free(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) length = atol(argv[2]);
    if (argc > 3) passes = atoi(argv[3]);
    if (threads < 1 || threads > 64 || length < 1 || passes < 1) {
        fprintf(stderr, "usage: stream_triad [threads 1-64 [doubles per array [passes]]]\n");
        return 2;
    }
    pthread_t ids[64];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, triad, (void *)k) != 0)
            return 1;
    triad((void *)0L);
    double sum = sums[0].value;
    for (int k = 1; k < threads; k++) {
        pthread_join(ids[k], NULL);
        sum += sums[k].value;
    }
    printf("checksum %.3f\n", sum);
    return 0;
}
