/* Test program: 4 threads (main included) add to one shared counter ITERATIONS times each, then the
 * program ends badly: `share_then_fail ITERATIONS STATUS` exits with STATUS, `... abort` dies of
 * SIGABRT. What a tracer gathered before that is all there is. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long counter;
static long iterations;

static void *work(void *arg)
{
    for (long i = 0; i < iterations; i++)
        atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    return arg;
}

int main(int argc, char **argv)
{
    iterations = argc > 1 ? atol(argv[1]) : 10000000;
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&threads[i], NULL, work, NULL);
    work(NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    if (argc > 2 && strcmp(argv[2], "abort") == 0)
        abort();
    return argc > 2 ? atoi(argv[2]) : 0;
}
