/* The toy workload: a two-layer MLP regressor on synthetic data (see
 * toy.c), listed in models/workloads.c. */
#ifndef PLUMB_TOY_H
#define PLUMB_TOY_H
#include "train/model.h"

extern const struct workload toy_workload;

#endif
