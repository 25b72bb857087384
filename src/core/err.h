/* Errors: every fallible function returns an int status (0 = ok) and, on
 * failure, fills a plumb_err with a message that names the bad input, the
 * value and what was expected. Nothing below cli/ calls exit(). */
#ifndef PLUMB_ERR_H
#define PLUMB_ERR_H
#include <stddef.h>

enum plumb_status {
    PLUMB_OK = 0,
    PLUMB_EFAIL = 1,     /* a check ran and failed (exit code 1)            */
    PLUMB_EUSAGE = 2,    /* bad argument or bad input file (exit code 2)     */
    PLUMB_EINTERNAL = 3, /* bug or unexpected system failure (exit code 3)   */
    PLUMB_EIO = 4,       /* file or system call failed                       */
    PLUMB_ENOMEM = 5,    /* allocation failed (host or device)               */
    PLUMB_EDEVICE = 6,   /* device/driver/vendor library error               */
    PLUMB_ETIMEOUT = 7,  /* watchdog fired                                   */
    PLUMB_ECORRUPT = 8,  /* checksum or format mismatch in a file we wrote   */
    PLUMB_EUNSUPPORTED = 9, /* operation or quantity not supported here      */
};

typedef struct plumb_err {
    int code;
    char msg[1024];
} plumb_err;

/* Sets code and a printf-style message; returns code so callers can write
 * `return err_set(e, PLUMB_EUSAGE, "--count: '%s' is not a positive integer", s);`
 * e may be NULL (the message is dropped). */
int err_set(plumb_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends context: "while reading X: <old message>". Returns e->code. */
int err_wrap(plumb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(plumb_err *e);
/* Keeps the first error of several workers (OpenMP threads filling parts of
 * one batch): when *rc is still 0, *rc = rc1 and *e = *e1 (e may be NULL).
 * Serialised by a named OpenMP critical section. */
void err_keep_first(int rc1, const plumb_err *e1, int *rc, plumb_err *e);
const char *err_code_name(int code);
/* Process exit code for a status: 0, 1, 2 or 3 (README.md, "A tour of the commands"). */
int err_exit_code(int code);

#endif
