/* The main thread starts two workers that spin until killed, says "ready", and ends by
   pthread_exit when a line comes on its input: the process runs on with a zombie main thread
   (test_sample: a trace attached before then counts three threads, not four). */
#include <pthread.h>
#include <stdio.h>

static volatile long counter;

static void* spin(void* arg)
{
    (void)arg;
    for (;;)
        counter++;
    return NULL;
}

int main(void)
{
    pthread_t workers[2];
    char line[16];
    pthread_create(&workers[0], NULL, spin, NULL);
    pthread_create(&workers[1], NULL, spin, NULL);
    printf("ready\n");
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL)
        return 1;
    pthread_exit(NULL);
}
