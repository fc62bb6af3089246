/* Test program: a C program linked with OpenBLAS, whose library constructor starts the thread pool
 * (OPENBLAS_NUM_THREADS threads, at most as many as the CPUs of the affinity mask) before main,
 * and before the constructor of an LD_PRELOAD library. Multiplies two N x N matrices (argv[1],
 * default 200), then prints "openblas N" (the threads OpenBLAS runs) and one line "task TID CPUS"
 * per thread of the process, each thread's allowed CPUs as /proc/self/task shows them. */
#include <cblas.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    double *a = malloc(sizeof(double) * (size_t)n * (size_t)n), *c = malloc(sizeof(double) * (size_t)n * (size_t)n);
    for (long i = 0; i < (long)n * n; i++)
        a[i] = (double)(i % 7);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, a, n, 0.0, c, n);
    printf("openblas %d\n", openblas_get_num_threads());
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *entry;
    while (tasks != NULL && (entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", entry->d_name);
        FILE *status = fopen(path, "r");
        while (status != NULL && fgets(line, sizeof line, status) != NULL)
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
                printf("task %s %s", entry->d_name, line + 18 + strspn(line + 18, " \t"));
        if (status != NULL)
            fclose(status);
    }
    if (tasks != NULL)
        closedir(tasks);
    return c[(long)n * n - 1] > 0 ? 0 : 1;
}
