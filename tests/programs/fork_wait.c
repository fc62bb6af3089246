/* A program that forks a child which works and exits, waits for it, then waits once more: the
 * second wait must find no child (ECHILD), as without Valgrind. pinwise simulate's workers
 * (ps_main.c) are not the program's children, and the child it forked is not simulated.
 * Exit status 0 if so; prints what it saw. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long work(long n)
{
    volatile long sum = 0;
    for (long i = 0; i < n; i++) sum += i;
    return sum;
}

int main(void)
{
    pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
        work(200000);
        _exit(0);
    }
    int status;
    pid_t first = wait(&status);
    pid_t second = wait(&status);
    int nochild = second == -1 && errno == ECHILD;
    work(1000);
    printf("first wait %s, second wait %s\n", first == child ? "found the child" : "found another process",
           nochild ? "found no child" : "found a process");
    return first == child && nochild ? 0 : 1;
}
