/* Test program: main creates 3 threads that add to one shared counter ITERATIONS times each
 * (argv[1], default 40 M), then ends its own thread with pthread_exit: the process runs on with
 * a main thread that has ended (a zombie leader, whose /proc/PID/maps is empty). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

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
    iterations = argc > 1 ? atol(argv[1]) : 40000000;
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&threads[i], NULL, work, NULL);
    pthread_exit(NULL);
}
