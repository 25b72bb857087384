/* The verdict of plumb train's train-<workload> check (README.md, "A tour
 * of the commands"): a training run is judged, never passed for having
 * ended. It fails when every step was skipped, an eval metric is not
 * finite, metrics.jsonl could not be written, the run stopped early with no
 * checkpoint to continue from, or, on the workload's own synthetic data
 * with at least the preset's steps, a metric misses the preset's floor
 * (struct train_floor in train/model.h). Stopped early with a checkpoint:
 * skip (resumable). Anything else passes, and the reason says what was
 * checked. */
#ifndef PLUMB_TRAIN_VERDICT_H
#define PLUMB_TRAIN_VERDICT_H
#include "report/check.h"
#include "train/trainer.h"

void train_check_verdict(struct check_result *r, const struct train_config *cfg, const struct train_result *tr);

#endif
