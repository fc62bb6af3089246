/* Two threads increment one small global, which the linker places right after .got.plt (a small
   program's .data and .bss follow it): the counter shares a cache line with the GOT's last
   entries. Its sharing is communication like any other (test_trace). */
#include <pthread.h>
#include <stdlib.h>

static volatile long counter;

static void* work(void* arg)
{
    long rounds = (long)arg;
    for (long k = 0; k < rounds; k++)
        counter++;
    return NULL;
}

int main(int argc, char** argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 1000000;
    pthread_t other;
    pthread_create(&other, NULL, work, (void*)rounds);
    work((void*)rounds);
    pthread_join(other, NULL);
    return 0;
}
