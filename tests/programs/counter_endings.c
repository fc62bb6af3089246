/* Test program: threads add to one shared counter ITERATIONS times each, and the program ends as
 * told: `counter_endings ITERATIONS STATUS` (main adds too, then exits with STATUS), `... abort`
 * (then dies of SIGABRT), `... leave` (main ends its own thread with pthread_exit at once and the
 * 3 others run on: a zombie leader, whose /proc/PID/maps is empty). What a tracer gathered before
 * a bad end is all there is. */
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
    const char *ending = argc > 2 ? argv[2] : "0";
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&threads[i], NULL, work, NULL);
    if (strcmp(ending, "leave") == 0)
        pthread_exit(NULL);
    work(NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    if (strcmp(ending, "abort") == 0)
        abort();
    return atoi(ending);
}
