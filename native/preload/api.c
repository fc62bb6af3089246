/* The in-process API (pinwise.h): a program pins its own threads to the slots of the plan. */
#include "pinwise.h"
#include "plan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

static struct pinwise_plan api_plan;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_load(void)
{
    char err[160];
    if (pinwise_plan_parse(getenv("PINWISE_PLAN"), &api_plan, err, sizeof err) != 0)
        api_plan.nslots = 0;
}

__attribute__((visibility("default"))) int pinwise_plan_slots(void)
{
    pthread_once(&api_once, api_load);
    return api_plan.nslots > 0 ? api_plan.nslots : -1;
}

__attribute__((visibility("default"))) int pinwise_pin_self(int slot)
{
    pthread_once(&api_once, api_load);
    if (api_plan.nslots <= 0 || slot < 0) {
        errno = EINVAL;
        return -1;
    }
    return sched_setaffinity(0, sizeof(cpu_set_t), &api_plan.slots[slot % api_plan.nslots]);
}
