/* CIFAR-10 binary files: see cifar.h. */
#include "models/resnet/cifar.h"
#include "core/file.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cifar_read_file(const char *path, struct cifar_set *s, plumb_err *e)
{
    /* the size is the open file's (a stat by name, then fopen, could see two files) */
    struct stat st;
    int fd, r = file_open_regular(path, 0, &fd, &st);
    if (r > 0) return err_set(e, PLUMB_EUSAGE, "%s: cannot open (%s)", path, strerror(r));
    if (r < 0) return err_set(e, PLUMB_EUSAGE, "%s: not a regular file (%s)", path, file_kind(&st));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int er = errno;
        close(fd);
        return err_set(e, PLUMB_EIO, "%s: cannot open (%s)", path, strerror(er));
    }
    size_t bytes = (size_t)st.st_size;
    int rc = PLUMB_OK;
    if (bytes == 0)
        rc = err_set(e, PLUMB_EUSAGE, "%s: empty (expected %d-byte CIFAR-10 records: a label byte and %d pixel bytes)",
                       path, CIFAR_RECORD, CIFAR_PIXELS);
    else if (bytes % CIFAR_RECORD)
        rc = err_set(e, PLUMB_EUSAGE,
                       "%s: %zu bytes is not a whole number of %d-byte CIFAR-10 records (%zu records and %zu bytes of "
                       "record %zu)",
                       path, bytes, CIFAR_RECORD, bytes / CIFAR_RECORD, bytes % CIFAR_RECORD, bytes / CIFAR_RECORD);
    const size_t n = bytes / CIFAR_RECORD;
    if (!rc) {
        uint8_t *lab = realloc(s->labels, s->n + n);
        if (!lab) rc = err_set(e, PLUMB_ENOMEM, "%s: out of memory for %zu labels", path, s->n + n);
        else s->labels = lab;
    }
    if (!rc) {
        uint8_t *pix = realloc(s->pixels, (s->n + n) * CIFAR_PIXELS);
        if (!pix) rc = err_set(e, PLUMB_ENOMEM, "%s: out of memory for %zu images", path, s->n + n);
        else s->pixels = pix;
    }
    uint8_t rec[CIFAR_RECORD];
    for (size_t i = 0; !rc && i < n; i++) {
        if (fread(rec, 1, CIFAR_RECORD, f) != CIFAR_RECORD)
            rc = err_set(e, PLUMB_EIO, "%s: short read at record %zu of %zu", path, i, n);
        else if (rec[0] >= CIFAR_CLASSES)
            rc = err_set(e, PLUMB_EUSAGE, "%s: record %zu (byte offset %zu): label %u (expected 0..%d)", path, i,
                         i * CIFAR_RECORD, rec[0], CIFAR_CLASSES - 1);
        else {
            s->labels[s->n + i] = rec[0];
            memcpy(s->pixels + (s->n + i) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
        }
    }
    fclose(f);
    if (!rc) s->n += n;
    return rc;
}

int cifar_read_dir(const char *dir, int train, struct cifar_set *s, plumb_err *e)
{
    char path[4200];
    memset(s, 0, sizeof *s);
    int rc = PLUMB_OK;
    if (train) {
        for (int b = 1; b <= CIFAR_TRAIN_FILES && !rc; b++) {
            char name[32];
            snprintf(name, sizeof name, "data_batch_%d.bin", b);
            rc = file_join(path, sizeof path, dir, name, e);
            if (!rc && !file_exists(path))
                rc = err_set(e, PLUMB_EUSAGE, "%s: no %s (a CIFAR-10 binary directory has data_batch_1.bin .. "
                             "data_batch_5.bin and test_batch.bin; `plumb data synth-cifar --out DIR` writes one)",
                             dir, name);
            if (!rc) rc = cifar_read_file(path, s, e);
        }
    } else {
        rc = file_join(path, sizeof path, dir, "test_batch.bin", e);
        if (!rc && !file_exists(path))
            rc = err_set(e, PLUMB_EUSAGE, "%s: no test_batch.bin (a CIFAR-10 binary directory has data_batch_1.bin .. "
                         "data_batch_5.bin and test_batch.bin)", dir);
        if (!rc) rc = cifar_read_file(path, s, e);
    }
    if (rc) cifar_set_free(s);
    return rc;
}

void cifar_set_free(struct cifar_set *s)
{
    free(s->labels);
    free(s->pixels);
    memset(s, 0, sizeof *s);
}

int cifar_write_file(const char *path, const struct cifar_set *s, size_t first, size_t count, plumb_err *e)
{
    if (first + count > s->n)
        return err_set(e, PLUMB_EUSAGE, "cifar write %s: records %zu..%zu of a set of %zu", path, first,
                       first + count, s->n);
    uint8_t *buf = malloc(count * CIFAR_RECORD + 1);
    if (!buf) return err_set(e, PLUMB_ENOMEM, "cifar write %s: out of memory for %zu records", path, count);
    for (size_t i = 0; i < count; i++) {
        buf[i * CIFAR_RECORD] = s->labels[first + i];
        memcpy(buf + i * CIFAR_RECORD + 1, s->pixels + (first + i) * CIFAR_PIXELS, CIFAR_PIXELS);
    }
    int rc = file_write_atomic(path, buf, count * CIFAR_RECORD, e);
    free(buf);
    return rc;
}

int cifar_write_meta(const char *dir, const char *const names[CIFAR_CLASSES], plumb_err *e)
{
    char path[4200], text[1024];
    int rc = file_join(path, sizeof path, dir, "batches.meta.txt", e);
    if (rc) return rc;
    size_t o = 0;
    for (int k = 0; k < CIFAR_CLASSES; k++) o += (size_t)snprintf(text + o, sizeof text - o, "%s\n", names[k]);
    return file_write_atomic(path, text, o, e);
}
