/* Test program: the work runs in a child process. The parent forks one child (no exec) that
 * starts N worker threads (argv[1], default 2) and sends their TIDs back through a pipe; the
 * parent only waits. Prints "ready PID", "thread 0 PID" (the parent), "thread 1 CHILD" (the
 * child's main thread), "thread K TID" for the child's workers in creation order, and "end";
 * everything stays alive until the parent's standard input closes. */
#include "waiting.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* The child: start the workers, report their TIDs, keep them until the parent closes release. */
static int child(int n, int report, int release)
{
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    long *tids = calloc((size_t)n, sizeof *tids);
    start_waiting_workers(n, threads, tids);
    if (write(report, tids, (size_t)n * sizeof *tids) != (ssize_t)(n * sizeof *tids))
        return 2;
    close(report);
    wait_until_closed(release);
    release_waiting_workers(n, threads);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    int report[2], release[2];
    if (pipe(report) != 0 || pipe(release) != 0)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        close(report[0]);
        close(release[1]);
        _exit(child(n, report[1], release[0]));
    }
    close(report[1]);
    close(release[0]);
    long *tids = calloc((size_t)n, sizeof *tids);
    size_t want = (size_t)n * sizeof *tids, got = 0;
    while (got < want) {
        ssize_t k = read(report[0], (char *)tids + got, want - got);
        if (k <= 0)
            return 2;
        got += (size_t)k;
    }
    printf("ready %d\nthread 0 %d\nthread 1 %d\n", (int)getpid(), (int)getpid(), (int)pid);
    for (int i = 0; i < n; i++)
        printf("thread %d %ld\n", i + 2, tids[i]);
    printf("end\n");
    fflush(stdout);
    wait_until_closed(0);
    close(release[1]);
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
