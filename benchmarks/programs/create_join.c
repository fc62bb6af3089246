/* Benchmark program: create and join 4 threads, ITER times; prints the cost per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 1000;
    struct timespec start, end;
    pthread_t threads[4];
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < iterations; i++) {
        for (int t = 0; t < 4; t++)
            pthread_create(&threads[t], NULL, nothing, NULL);
        for (int t = 0; t < 4; t++)
            pthread_join(threads[t], NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("ns_per_thread %.1f\n", ns / (4.0 * iterations));
    return 0;
}
