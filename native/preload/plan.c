/* Parsing the plan: no allocation beyond the slot array, no stdio; safe in a constructor. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_number(const char **p, const char *end, long *out)
{
    const char *s = *p;
    long value = 0;
    if (s >= end || *s < '0' || *s > '9')
        return -1;
    while (s < end && *s >= '0' && *s <= '9') {
        value = value * 10 + (*s - '0');
        if (value >= CPU_SETSIZE)
            return -1;
        s++;
    }
    *p = s;
    *out = value;
    return 0;
}

int pinwise_cpulist_parse(const char *text, const char *end, cpu_set_t *set)
{
    const char *p = text;
    CPU_ZERO(set);
    if (p >= end)
        return -1;
    while (p < end) {
        long first, last, step = 1;
        if (read_number(&p, end, &first) != 0)
            return -1;
        last = first;
        if (p < end && *p == '-') {
            p++;
            if (read_number(&p, end, &last) != 0 || last < first)
                return -1;
            if (p < end && *p == ':') {
                p++;
                if (read_number(&p, end, &step) != 0 || step < 1)
                    return -1;
            }
        }
        for (long cpu = first; cpu <= last; cpu += step)
            CPU_SET((int)cpu, set);
        if (p < end) {
            if (*p != ',')
                return -1;
            p++;
            if (p >= end)
                return -1;
        }
    }
    return 0;
}

void pinwise_cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = last > cpu ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", cpu, last)
                           : snprintf(buf + used, len - used, "%s%d", used ? "," : "", cpu);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
        cpu = last;
    }
}

int pinwise_plan_parse(const char *text, struct pinwise_plan *plan, char *err, size_t errlen)
{
    plan->nslots = 0;
    plan->slots = NULL;
    CPU_ZERO(&plan->all);
    if (text == NULL || *text == '\0') {
        snprintf(err, errlen, "PINWISE_PLAN is empty");
        return -1;
    }
    int count = 1;
    for (const char *p = text; *p; p++)
        count += *p == ';';
    if (count > PINWISE_MAX_SLOTS) {
        snprintf(err, errlen, "plan has %d slots, more than %d", count, PINWISE_MAX_SLOTS);
        return -1;
    }
    cpu_set_t *slots = malloc((size_t)count * sizeof(cpu_set_t));
    if (slots == NULL) {
        snprintf(err, errlen, "out of memory for %d slots", count);
        return -1;
    }
    const char *start = text;
    for (int i = 0; i < count; i++) {
        const char *end = strchr(start, ';');
        if (end == NULL)
            end = start + strlen(start);
        if (pinwise_cpulist_parse(start, end, &slots[i]) != 0) {
            snprintf(err, errlen, "slot %d of PINWISE_PLAN (\"%.*s\") is not a CPU list", i,
                     (int)(end - start > 40 ? 40 : end - start), start);
            free(slots);
            return -1;
        }
        CPU_OR(&plan->all, &plan->all, &slots[i]);
        start = *end ? end + 1 : end;
    }
    plan->slots = slots;
    plan->nslots = count;
    return 0;
}
