/* Test program: a runtime that starts fewer threads under the tracer than natively, as stress-ng's
 * workers did when Valgrind did not handle a system call they make. It starts N worker threads
 * (argv[1], default 3) natively and one under Valgrind (RUNNING_ON_VALGRIND, a no-op natively),
 * each adding to a shared counter; prints "workers K". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/valgrind.h>

static long counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *unused)
{
    (void)unused;
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    if (RUNNING_ON_VALGRIND)
        n = 1;
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    printf("workers %d\n", n);
    return counter == 10000L * n ? 0 : 1;
}
