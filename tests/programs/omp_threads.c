/* Test program: an OpenMP team records each member's TID by thread number, then the team's
 * threads stay in libgomp's pool while main prints "ready", the TIDs, and waits for stdin EOF. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    long tids[256] = {0};
    int n = 0;
#pragma omp parallel
    {
        tids[omp_get_thread_num()] = syscall(SYS_gettid);
#pragma omp single
        n = omp_get_num_threads();
    }
    printf("ready %d\n", (int)getpid());
    for (int i = 0; i < n; i++)
        printf("thread %d %ld\n", i, tids[i]);
    printf("end\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    return 0;
}
