/* Test program: a runtime that sizes itself from the affinity mask when it loads, as OpenBLAS
 * counts its threads, libgomp its default team and libomp its full mask.
 *
 * Built twice from this file. With -DRUNTIME -shared -fPIC it is libmask_sized.so, whose
 * constructor counts the CPUs of sched_getaffinity and starts that many workers: ld.so runs the
 * constructors of a program's own libraries before those of an LD_PRELOAD library, so these
 * workers start before the preload library's constructor has run. Without -DRUNTIME it is the
 * program linked with it: it prints "sized N" (the CPUs the runtime saw), "ready PID", one line
 * "thread K TID" per thread (main = 0, then the workers in creation order) and "end", and keeps
 * every thread alive until its standard input closes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_WORKERS 256

#ifdef RUNTIME
static int sized;
static long tids[MAX_WORKERS];
static pthread_t workers[MAX_WORKERS];
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

__attribute__((constructor)) static void runtime_init(void)
{
    cpu_set_t mask;
    sized = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
    if (sized > MAX_WORKERS)
        sized = MAX_WORKERS;
    pthread_barrier_init(&started, NULL, (unsigned)sized + 1);
    for (int i = 0; i < sized; i++)
        pthread_create(&workers[i], NULL, worker, &tids[i]);
    pthread_barrier_wait(&started);
}

/* The CPUs the runtime saw when it loaded, and its workers' TIDs. */
int runtime_workers(const long **out)
{
    *out = tids;
    return sized;
}

void runtime_stop(void)
{
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&release);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < sized; i++)
        pthread_join(workers[i], NULL);
}
#else
int runtime_workers(const long **out);
void runtime_stop(void);

int main(void)
{
    const long *tids;
    int n = runtime_workers(&tids);
    printf("sized %d\nready %d\nthread 0 %ld\n", n, (int)getpid(), (long)syscall(SYS_gettid));
    for (int i = 0; i < n; i++)
        printf("thread %d %ld\n", i + 1, tids[i]);
    printf("end\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    runtime_stop();
    return 0;
}
#endif
