/* Test program: behaves like a daemon that tidies its descriptors. It closes every descriptor
 * from 3 up, opens its own file (argv[1]) so that it takes the lowest free number, and has two
 * threads and itself write one line each into it. The file must end up holding only those lines. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fd;

static void *worker(void *name)
{
    char line[64];
    int n = snprintf(line, sizeof line, "line from %s\n", (const char *)name);
    if (write(fd, line, (size_t)n) != n)
        return (void *)1;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    for (int d = 3; d < 1024; d++)
        close(d);
    fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0)
        return 3;
    pthread_t threads[2];
    const char *names[2] = {"worker 1", "worker 2"};
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&threads[i], NULL, worker, (void *)names[i]) != 0)
            return 4;
        pthread_join(threads[i], NULL); /* one at a time: the file's order is fixed */
    }
    worker("main");
    close(fd);
    return 0;
}
