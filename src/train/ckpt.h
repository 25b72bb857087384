/* Checkpoint files (docs/TRAINING.md, "Checkpoints").
 *
 * One file per checkpoint, <dir>/ckpt-<step, 10 digits>.plumb, written
 * atomically (core/file.h: temp file, fsync, rename, directory fsync), so a
 * crash leaves the previous checkpoint intact. Layout (little-endian):
 *   header  : magic "PLUMBCK1", u32 version (2), u32 nsec, u64 step
 *   table   : nsec x { char name[64], u64 offset, u64 length, u32 crc32, u32 0 }
 *             (version 1, still read: char name[32])
 *   u32 crc32 of header + table
 *   data    : the sections at their offsets, each aligned to 64 bytes
 *             (zero padding between them)
 * Every section carries its own CRC-32; a reader verifies the header, every
 * section and the file length before trusting anything. The content is
 * rank-count independent: the trainer stores full (replicated) parameters
 * and optimizer state and a data position in global samples.
 * The newest `keep` checkpoints are kept; older ones are deleted after a
 * successful write. Temp files left by a writer that died mid-write
 * (<name>.tmp.<pid>) are removed by the next write or resume
 * (core/file.h file_remove_stale_temps). */
#ifndef PLUMB_CKPT_H
#define PLUMB_CKPT_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define CKPT_NAME_MAX 64 /* "p:" + a tensor name (train/model.h) + NUL */

struct ckpt_section {
    char name[CKPT_NAME_MAX]; /* NUL-terminated, unique within a file */
    const void *data;
    size_t len;
};

struct ckpt {
    char path[4096];
    long step;
    int nsec;
    struct ckpt_section *sec; /* data points into buf */
    char *buf;                /* the whole file */
    size_t size;
};

/* Writes <dir>/ckpt-<step>.plumb atomically and prunes to the newest `keep`
 * (keep <= 0: keep all). path_out (may be NULL, size 4096) gets the path. */
int ckpt_write(const char *dir, long step, const struct ckpt_section *sec, int nsec, int keep,
               char *path_out, plumb_err *e);
/* PLUMB_EUSAGE when the names ckpt_write makes in dir (<dir>/ckpt-<step>.plumb and its temp
 * file <name>.tmp.<pid>) would not fit a path: such a --checkpoint-dir was accepted, the run
 * trained to its end and then failed its first checkpoint write (exit 3). */
int ckpt_check_dir_names(const char *dir, plumb_err *e);
/* Reads and verifies one file. PLUMB_ECORRUPT names what is wrong. */
int ckpt_read(const char *path, struct ckpt *out, plumb_err *e);
/* Verifies a checkpoint image held in memory (e.g. broadcast from rank 0);
 * takes ownership of buf (malloc'ed) in every case. path names it in errors. */
int ckpt_parse(const char *path, char *buf, size_t size, struct ckpt *out, plumb_err *e);
/* The newest checkpoint in dir that verifies; corrupt or partial ones are
 * logged (warn) and skipped. *found = 0 when none verifies. Temp files of
 * dead writers are removed first. */
int ckpt_load_latest(const char *dir, struct ckpt *out, int *found, plumb_err *e);
/* The same; *nfiles (may be NULL) gets the number of checkpoint files there,
 * so a caller tells "none" from "none usable", and why (may be NULL) what
 * was wrong with each, "; "-separated. */
int ckpt_load_newest(const char *dir, struct ckpt *out, int *found, int *nfiles, char *why, size_t why_n,
                     plumb_err *e);
/* Steps of the checkpoint files in dir, newest first (malloc'ed array). */
int ckpt_list(const char *dir, long **steps, int *n, plumb_err *e);
const void *ckpt_find(const struct ckpt *c, const char *name, size_t *len);
void ckpt_free(struct ckpt *c);
/* Drill helper: flips the last bytes of a checkpoint file's data, as a
 * bad disk or a torn write would (used by the corrupt-checkpoint injection). */
int ckpt_corrupt_file(const char *path, plumb_err *e);
/* ckpt-<step>.plumb path in dir */
int ckpt_path(const char *dir, long step, char *out, size_t n, plumb_err *e);

#endif
