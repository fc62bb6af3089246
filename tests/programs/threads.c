/* Test program: creates N threads (argv[1], default 4), prints "ready PID", then one line
 * "thread K TID" per thread in creation order (main = 0), and keeps every thread alive until its
 * standard input closes, so a test can read /proc/PID/task/TID/status while they run. */
#include "waiting.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    long *tids = calloc((size_t)n, sizeof *tids);
    start_waiting_workers(n, threads, tids);
    printf("ready %d\nthread 0 %ld\n", (int)getpid(), (long)syscall(SYS_gettid));
    for (int i = 0; i < n; i++)
        printf("thread %d %ld\n", i + 1, tids[i]);
    printf("end\n");
    fflush(stdout);
    wait_until_closed(0);
    release_waiting_workers(n, threads);
    return 0;
}
