/* Test program: a fork-based worker pool, as make -j, stress-ng or Python's multiprocessing run
 * their work: the parent forks N single-threaded worker processes (argv[1], default 2), which
 * never exec and never start a thread. Prints "ready PID", "thread 0 PID" for the parent and
 * "thread K PID" for worker K in fork order, then "end"; every process stays alive until the
 * parent's standard input closes. */
#include "waiting.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    int release[2];
    if (pipe(release) != 0)
        return 2;
    pid_t *workers = calloc((size_t)n, sizeof *workers);
    for (int i = 0; i < n; i++) {
        workers[i] = fork();
        if (workers[i] < 0)
            return 2;
        if (workers[i] == 0) { /* a worker: wait until the parent closes the pipe */
            close(release[1]);
            wait_until_closed(release[0]);
            _exit(0);
        }
    }
    close(release[0]);
    printf("ready %d\nthread 0 %d\n", (int)getpid(), (int)getpid());
    for (int i = 0; i < n; i++)
        printf("thread %d %d\n", i + 1, (int)workers[i]);
    printf("end\n");
    fflush(stdout);
    wait_until_closed(0);
    close(release[1]);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int status;
        failed |= waitpid(workers[i], &status, 0) != workers[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return failed;
}
