/* The workload table: see workloads.h. */
#include "models/workloads.h"
#include "models/ctr/workload.h"
#include "models/resnet/workload.h"
#include "models/gpt/workload.h"
#include "models/toy/toy.h"
#include <stdio.h>
#include <string.h>

static const struct workload *const table[] = {
    &ctr_workload,
    &gpt_workload,
    &toy_workload,
    &resnet_workload,
};

const struct workload *workload_at(int i)
{
    return i >= 0 && (size_t)i < sizeof table / sizeof table[0] ? table[i] : NULL;
}

const struct workload *workload_find(const char *name)
{
    for (int i = 0; workload_at(i); i++)
        if (name && !strcmp(workload_at(i)->name, name)) return workload_at(i);
    return NULL;
}

void workload_names(char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; workload_at(i) && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", workload_at(i)->name);
}
