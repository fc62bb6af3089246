/* Test program: argv[1] threads each allocate and touch 1 MiB, then the main thread prints the
 * first line of its /proc/self/numa_maps (the memory policy the kernel reports for it). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *touch(void *unused)
{
    (void)unused;
    char *block = malloc(1 << 20);
    if (block != NULL) {
        memset(block, 1, 1 << 20);
        free(block);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 2;
    pthread_t threads[64];
    for (int i = 0; i < count && i < 64; i++)
        pthread_create(&threads[i], NULL, touch, NULL);
    for (int i = 0; i < count && i < 64; i++)
        pthread_join(threads[i], NULL);
    FILE *maps = fopen("/proc/self/numa_maps", "r");
    char line[512];
    if (maps == NULL || fgets(line, sizeof line, maps) == NULL)
        return 1;
    fputs(line, stdout);
    fclose(maps);
    return 0;
}
