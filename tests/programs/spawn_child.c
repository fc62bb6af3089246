/* Test program: the work runs in a child process. The parent forks one child (no exec) that
 * starts N worker threads (argv[1], default 2) and sends their TIDs back through a pipe; the
 * parent only waits. Prints "ready PID", "thread 0 PID" (the parent), "thread 1 CHILD" (the
 * child's main thread), "thread K TID" for the child's workers in creation order, and "end";
 * everything stays alive until the parent's standard input closes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_barrier_t started;
static int release_fd;

static void *worker(void *slot)
{
    *(long *)slot = syscall(SYS_gettid);
    pthread_barrier_wait(&started);
    char byte;
    while (read(release_fd, &byte, 1) > 0)
        ;
    return NULL;
}

static int child(int n, int report)
{
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    long *tids = calloc((size_t)n, sizeof *tids);
    pthread_barrier_init(&started, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, worker, &tids[i]);
    pthread_barrier_wait(&started);
    if (write(report, tids, (size_t)n * sizeof *tids) != (ssize_t)(n * sizeof *tids))
        return 2;
    close(report);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
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
        release_fd = release[0];
        _exit(child(n, report[1]));
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
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    close(release[1]);
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
