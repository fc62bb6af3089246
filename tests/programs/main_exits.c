/* The main thread starts two workers that spin until killed, then ends by pthread_exit: the
   process runs on with a zombie main thread (test_pinning: pin --pid gives it no slot). With the
   argument "wait" it first says "ready" and ends when a line comes on its input (test_sample: a
   trace attached before then counts three threads, not four). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static volatile long counter;

static void* spin(void* arg)
{
    (void)arg;
    for (;;)
        counter++;
    return NULL;
}

int main(int argc, char** argv)
{
    pthread_t workers[2];
    pthread_create(&workers[0], NULL, spin, NULL);
    pthread_create(&workers[1], NULL, spin, NULL);
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        char line[16];
        printf("ready\n");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL)
            return 1;
    }
    pthread_exit(NULL);
}
