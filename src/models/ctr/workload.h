/* The ctr workload (DLRM): one struct workload (train/model.h), listed in
 * models/workloads.c. */
#ifndef PLUMB_CTR_WORKLOAD_H
#define PLUMB_CTR_WORKLOAD_H
#include "train/model.h"

extern const struct workload ctr_workload;

#endif
