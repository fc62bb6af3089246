/* Test program: creates N threads (argv[1], default 4), prints "ready PID", then one line
 * "thread K TID" per thread in creation order (main = 0), and keeps every thread alive until its
 * standard input closes, so a test can read /proc/PID/task/TID/status while they run. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t release = PTHREAD_COND_INITIALIZER;
static int released;

static void *worker(void *slot)
{
    *(long *)slot = syscall(SYS_gettid);
    pthread_barrier_wait(&started);
    pthread_mutex_lock(&lock);
    while (!released)
        pthread_cond_wait(&release, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    long *tids = calloc((size_t)n, sizeof *tids);
    pthread_barrier_init(&started, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, worker, &tids[i]);
    pthread_barrier_wait(&started);
    printf("ready %d\nthread 0 %ld\n", (int)getpid(), (long)syscall(SYS_gettid));
    for (int i = 0; i < n; i++)
        printf("thread %d %ld\n", i + 1, tids[i]);
    printf("end\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&release);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
