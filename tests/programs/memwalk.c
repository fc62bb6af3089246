/* One thread walking memory in one of four ways, for comparing cache simulators:
 *   memwalk stream|stride|random|modify [MIB] [PASSES]
 * stream: every 8-byte word in order (read, then a write every 8th word); stride: one word per
 * 4160 bytes (a page and a line), wrapping round; random: words picked by a fixed LCG; modify:
 * every word in order changed by one instruction that reads and writes it (`lock add` on each,
 * and a plain `add` to memory on every 8th), which cachegrind counts as one access. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: memwalk stream|stride|random|modify [MIB] [PASSES]\n");
        return 2;
    }
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 8, passes = argc > 3 ? (size_t)atol(argv[3]) : 2;
    size_t words = mib * 1024 * 1024 / sizeof(long);
    volatile long *data = malloc(words * sizeof(long));
    if (!data)
        return 1;
    for (size_t i = 0; i < words; i++)
        data[i] = (long)i;
    long sum = 0;
    unsigned long long state = 12345;
    for (size_t pass = 0; pass < passes; pass++) {
        if (!strcmp(argv[1], "stream")) {
            for (size_t i = 0; i < words; i++) {
                sum += data[i];
                if (i % 8 == 0)
                    data[i] = sum;
            }
        } else if (!strcmp(argv[1], "modify")) {
            for (size_t i = 0; i < words; i++) {
                __atomic_fetch_add((long *)&data[i], 1, __ATOMIC_RELAXED);
                if (i % 8 == 0)
                    __asm__ volatile("addq $1, %0" : "+m"(*(long *)&data[i]));
            }
        } else if (!strcmp(argv[1], "stride")) {
            size_t step = 4160 / sizeof(long), i = 0;
            for (size_t n = 0; n < words / 8; n++) {
                sum += data[i];
                i = (i + step) % words;
            }
        } else {
            for (size_t n = 0; n < words / 4; n++) {
                state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                size_t i = (size_t)(state >> 33) % words;
                sum += data[i];
                if (n % 4 == 0)
                    data[i] = sum;
            }
        }
    }
    printf("%ld\n", sum);
    return 0;
}
