/* Files: atomic writes (temp file in the same directory, fsync, rename,
 * fsync of the directory), whole-file reads, recursive mkdir. */
#ifndef PLUMB_FILE_H
#define PLUMB_FILE_H
#include <stddef.h>
#include "core/err.h"

/* Writes data to path atomically: a crash at any point leaves either the old
 * file or the new one, never a mix. */
int file_write_atomic(const char *path, const void *data, size_t len, plumb_err *e);
/* Same, from several buffers written in order (avoids a concatenation copy). */
int file_write_atomic_iov(const char *path, const void *const *bufs, const size_t *lens,
                          int nbufs, plumb_err *e);
/* Reads the whole file; *out is malloc'ed and NUL-terminated (not counted in *len). */
int file_read_all(const char *path, char **out, size_t *len, plumb_err *e);
/* Removes the temp files file_write_atomic left in dir for files whose name
 * starts with prefix ("<name>.tmp.<pid>") when their writer is gone (killed
 * mid-write): nobody holds the file's lock and the pid is not alive on this
 * host, or the file is over an hour old. *removed (may be NULL) gets the
 * count. A missing dir is not an error. */
int file_remove_stale_temps(const char *dir, const char *prefix, int *removed, plumb_err *e);
/* An output file a command will write (opt names the option in the error,
 * e.g. "--html"): not a directory or a symlink loop, its folder existing and
 * writable. A bad one is PLUMB_EUSAGE (exit 2), said before any work. */
int file_check_output(const char *opt, const char *path, plumb_err *e);
/* An output directory (opt names the option, e.g. "--checkpoint-dir"):
 * created now when missing; empty, not a directory, a symlink loop, not
 * creatable or not writable is PLUMB_EUSAGE (exit 2) naming the option. */
int file_check_output_dir(const char *opt, const char *dir, plumb_err *e);
/* Reads dir/rel, a file that must lie inside dir, for a reader of untrusted
 * run folders: rel is relative without "..", the resolved path (symlinks
 * followed) stays inside dir's, and it is a regular file (never a FIFO or a
 * device: opened non-blocking, checked by fstat) of at most cap bytes.
 * *out is malloc'ed and NUL-terminated. Errors say which rule failed and
 * never quote the file's bytes; all are PLUMB_EUSAGE (a bad run folder is the user's input). */
int file_read_inside(const char *dir, const char *rel, size_t cap, char **out, size_t *len, plumb_err *e);
/* The same rules without reading (for readers that open the file by name). */
int file_check_inside(const char *dir, const char *rel, size_t cap, plumb_err *e);
/* An input file a command is given by name (plumb compare's A and B, a run
 * folder's results.json): it exists, this user can open it, and it is a
 * regular file (a FIFO with no writer would block the reader for ever, a
 * device such as /dev/zero never ends) of at most cap bytes. Opened
 * non-blocking and checked by fstat; every failure is PLUMB_EUSAGE naming
 * the path and the rule. */
int file_check_input(const char *path, size_t cap, plumb_err *e);
/* The same rules, then the file read in one open: *out malloc'ed and
 * NUL-terminated (not counted in *len). */
int file_read_input(const char *path, size_t cap, char **out, size_t *len, plumb_err *e);
/* Opens path read-only for a reader that needs a regular file (mmap, a
 * bounded read): O_NONBLOCK, so a FIFO opens at once instead of waiting for
 * a writer, then fstat. 0: *fd is open (O_NONBLOCK does nothing to a regular
 * file's reads) and *st filled. errno (> 0): open or fstat failed, *fd is -1.
 * -1: not a regular file, *st filled (file_kind names what it is), *fd -1.
 * extra_flags are ORed in (O_NOFOLLOW). The callers word their own errors. */
struct stat;
int file_open_regular(const char *path, int extra_flags, int *fd, struct stat *st);
/* "a directory", "a FIFO or pipe", "a device or socket" or "a regular file" */
const char *file_kind(const struct stat *st);
/* mkdir -p with mode 0755. */
int file_mkdirs(const char *path, plumb_err *e);
/* fsync of a directory (after a rename into it). */
int file_fsync_dir(const char *dir, plumb_err *e);
int file_exists(const char *path);
/* Joins a and b with one '/' into out (size n); error if it does not fit. */
int file_join(char *out, size_t n, const char *a, const char *b, plumb_err *e);

/* Test hook: when set, file_write_atomic stops after writing and fsyncing the
 * temporary file and before the rename, and returns PLUMB_EIO, as a crash
 * there would. Tests use it to prove the old file survives. */
extern int file_test_fail_before_rename;

#endif
