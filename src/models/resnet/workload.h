/* The resnet workload (workload.c): the ResNets of models/resnet/resnet.h
 * behind the trainer's model interface (train/model.h), listed in
 * models/workloads.c. docs/RESNET.md describes presets, data and BN. */
#ifndef PLUMB_RESNET_WORKLOAD_H
#define PLUMB_RESNET_WORKLOAD_H
#include "train/model.h"

extern const struct workload resnet_workload;

/* Batch fields of the resnet data source. */
enum { RESNET_F_IMAGE = 0, RESNET_F_LABEL = 1 };
/* predict's outputs per sample: the cross-entropy, then the top-1 class as a float */
enum { RESNET_OUT_LOSS = 0, RESNET_OUT_PRED = 1, RESNET_OUT_WIDTH = 2 };

#endif
