/* Prints on both streams while it runs, with pauses longer than pinwise trace's one-second
 * progress updates, so the program's lines and the progress line must take turns. */
#include <stdio.h>
#include <time.h>

int main(void)
{
    struct timespec pause = {1, 300000000};
    for (int i = 0; i < 3; i++) {
        printf("program line %d\n", i);
        fflush(stdout);
        fprintf(stderr, "program error line %d\n", i);
        nanosleep(&pause, NULL);
    }
    return 0;
}
