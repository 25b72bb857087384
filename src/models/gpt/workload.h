/* The gpt workload (train/model.h's struct workload): GPT-2 through the one
 * trainer. */
#ifndef PLUMB_GPT_WORKLOAD_H
#define PLUMB_GPT_WORKLOAD_H
#include "train/model.h"
extern const struct workload gpt_workload;
#endif
