/* The CIFAR-10 binary format (https://www.cs.toronto.edu/~kriz/cifar.html,
 * "binary version"): a file is a sequence of 3073-byte records, each one
 * label byte (0..9) and 3072 pixel bytes in CHW order: 1024 red (row-major
 * 32x32), then 1024 green, then 1024 blue. The training set is
 * data_batch_1.bin .. data_batch_5.bin (10000 records each), the test set
 * test_batch.bin; batches.meta.txt names the classes, one per line.
 *
 * A file whose size is not a whole number of records, or a record whose
 * label is above 9, is an input error (PLUMB_EUSAGE: exit 2) naming the
 * file and the record. */
#ifndef PLUMB_CIFAR_H
#define PLUMB_CIFAR_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define CIFAR_SIDE 32
#define CIFAR_CHANNELS 3
#define CIFAR_PIXELS (CIFAR_SIDE * CIFAR_SIDE * CIFAR_CHANNELS) /* 3072 */
#define CIFAR_RECORD (1 + CIFAR_PIXELS)                         /* 3073 */
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5

/* Images in memory, as in the files: labels [n], pixels [n, 3, 32, 32]. */
struct cifar_set {
    size_t n;
    uint8_t *labels;
    uint8_t *pixels;
};

/* Appends the records of one file to s (s zeroed first, or a set that
 * cifar_read_file filled before). */
int cifar_read_file(const char *path, struct cifar_set *s, plumb_err *e);
/* The training split (train = 1: data_batch_1..5.bin, all five required)
 * or the test split (test_batch.bin) of a CIFAR-10 binary directory. */
int cifar_read_dir(const char *dir, int train, struct cifar_set *s, plumb_err *e);
void cifar_set_free(struct cifar_set *s);
/* Records [first, first + count) of s to path, atomically. */
int cifar_write_file(const char *path, const struct cifar_set *s, size_t first, size_t count, plumb_err *e);
/* batches.meta.txt with the given class names. */
int cifar_write_meta(const char *dir, const char *const names[CIFAR_CLASSES], plumb_err *e);

#endif
