/* The plan shared by the preload library and the in-process API: PINWISE_PLAN parsed once. */
#ifndef PINWISE_PLAN_H
#define PINWISE_PLAN_H

#define _GNU_SOURCE
#include <sched.h>
#include <stddef.h>

#define PINWISE_MAX_SLOTS 65536

struct pinwise_plan {
    int nslots;          /* 0 when there is no usable plan */
    cpu_set_t *slots;    /* nslots sets, each CPU_SETSIZE wide */
    cpu_set_t all;       /* union of every slot: where skipped threads may run */
};

/* Parse "0;2;1,3;4-7". Returns 0, or -1 and writes a one-line reason into err. */
int pinwise_plan_parse(const char *text, struct pinwise_plan *plan, char *err, size_t errlen);

/* Parse a CPU list such as "0,2,4-7" into set. Returns 0 or -1. */
int pinwise_cpulist_parse(const char *text, const char *end, cpu_set_t *set);

/* Format set as a CPU list ("0-3,8") into buf. */
void pinwise_cpulist_format(const cpu_set_t *set, char *buf, size_t len);

#endif
