/* Every workload plumb trains, by name (plumb train WORKLOAD). A new
 * workload adds its struct workload (train/model.h) to the table in
 * models/workloads.c; docs/ARCHITECTURE.md says how. */
#ifndef PLUMB_WORKLOADS_H
#define PLUMB_WORKLOADS_H
#include <stddef.h>
#include "train/model.h"

/* NULL when there is no workload called name. */
const struct workload *workload_find(const char *name);
/* The i-th workload (NULL past the end). */
const struct workload *workload_at(int i);
/* "ctr, toy" */
void workload_names(char *buf, size_t n);

#endif
