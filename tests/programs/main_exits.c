/* The main thread starts two workers that spin until killed, then ends by pthread_exit: the
   process runs on with a zombie main thread (test_pinning: pin --pid gives it no slot). */
#include <pthread.h>

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
    pthread_create(&workers[0], NULL, spin, NULL);
    pthread_create(&workers[1], NULL, spin, NULL);
    pthread_exit(NULL);
}
