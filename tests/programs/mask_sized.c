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
#include "waiting.h"

#include <sched.h>
#include <stdio.h>

#define MAX_WORKERS 256

#ifdef RUNTIME
static int sized;
static long tids[MAX_WORKERS];
static pthread_t workers[MAX_WORKERS];

__attribute__((constructor)) static void runtime_init(void)
{
    cpu_set_t mask;
    sized = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
    if (sized > MAX_WORKERS)
        sized = MAX_WORKERS;
    start_waiting_workers(sized, workers, tids);
}

/* The CPUs the runtime saw when it loaded, and its workers' TIDs. */
int runtime_workers(const long **out)
{
    *out = tids;
    return sized;
}

void runtime_stop(void)
{
    release_waiting_workers(sized, workers);
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
    wait_until_closed(0);
    runtime_stop();
    return 0;
}
#endif
