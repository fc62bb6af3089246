/* A table-lookup proxy application in the manner of XSBench (a Monte Carlo neutron transport
   kernel): threads look up random energies in a shared, sorted energy grid (a binary search) and
   read the cross sections of several nuclides at the point found. The tables are written once
   by the main thread, then only read, at random: every lookup touches lines no cache holds.
   Usage: table_lookup [threads [grid points (thousands) [lookups per thread (thousands)]]]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NUCLIDES 8
static int threads = 8;
static long points = 1000000, lookups = 200000;
static double *grid, *xs;  /* grid[points], xs[points * NUCLIDES] */
static struct { _Alignas(64) double value; } sums[256];

static void *lookup(void *arg)
{
    long me = (long)arg;
    unsigned long state = 88172645463325252UL + (unsigned long)me;
    double sum = 0;
    for (long n = 0; n < lookups; n++) {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        double energy = (double)(state >> 11) / (double)(1UL << 53);
        long low = 0, high = points - 1;
        while (high - low > 1) {
            long mid = (low + high) / 2;
            if (grid[mid] > energy) high = mid;
            else low = mid;
        }
        for (int k = 0; k < NUCLIDES; k++)
            sum += xs[low * NUCLIDES + k];
    }
    sums[me].value = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) points = atol(argv[2]) * 1000;
    if (argc > 3) lookups = atol(argv[3]) * 1000;
    if (threads < 1 || threads > 256 || points < 2 || lookups < 1) {
        fprintf(stderr, "usage: table_lookup [threads [grid points (thousands) [lookups per thread (thousands)]]]\n");
        return 2;
    }
    grid = malloc((size_t)points * sizeof(double));
    xs = malloc((size_t)points * NUCLIDES * sizeof(double));
    if (!grid || !xs)
        return 1;
    for (long i = 0; i < points; i++) {
        grid[i] = (double)i / (double)points;
        for (int k = 0; k < NUCLIDES; k++)
            xs[i * NUCLIDES + k] = 1.0 / (double)(i + k + 1);
    }
    pthread_t ids[256];
    for (long k = 1; k < threads; k++)
        if (pthread_create(&ids[k], NULL, lookup, (void *)k) != 0)
            return 1;
    lookup((void *)0L);
    double sum = sums[0].value;
    for (int k = 1; k < threads; k++) {
        pthread_join(ids[k], NULL);
        sum += sums[k].value;
    }
    printf("checksum %.6f\n", sum);
    return 0;
}
