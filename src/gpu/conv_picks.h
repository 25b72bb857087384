/* The convolution algorithm picks kept across processes (gpu/conv_lib.cu):
 * a text file of one line per plan, so a later run on the same machine,
 * device, driver and library pins the algorithms the first one timed, and
 * fast-mode convolution bits repeat from process to process (before, each
 * process ran cuDNN's Find and the retiming afresh, and two candidates within
 * noise could swap: docs/RESNET.md). Plain C, no vendor header: the cpu tests
 * (tests/test_conv_picks.c) check the format and the file handling here.
 *
 * File: PLUMB_CONV_CACHE (a path; "0" or "off": no file), else
 * $XDG_CACHE_HOME/plumb/conv-picks.txt, else $HOME/.cache/plumb/conv-picks.txt.
 * Line: "plumb-conv-pick 1 CTX DIR RT TF32 N H W C K R S STRIDE PAD P Q
 * USABLE ALGO MATH WS", CTX = the library's version, the device's name, the
 * driver, the workspace limit and the retiming switch joined by '|' with
 * blanks as '_': a line of another context is not used. Lines are appended
 * (one write each, O_APPEND: ranks of one host may write at once); the last
 * line of a plan wins when read, so a pick found unusable and chosen again
 * replaces the old one. A line that does not parse is skipped. */
#ifndef PLUMB_GPU_CONV_PICKS_H
#define PLUMB_GPU_CONV_PICKS_H
#include "dev/train_ops.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct conv_pick_rec {
    int dir, rt, tf32;
    struct train_conv g;
    int usable, algo, math;
    size_t ws;
};

/* The file's path into out; 0 when the file is off or no path is known */
static inline int conv_picks_path(char *out, size_t n)
{
    const char *v = getenv("PLUMB_CONV_CACHE");
    if (v && (!strcmp(v, "0") || !strcmp(v, "off"))) return 0;
    if (v && *v) return snprintf(out, n, "%s", v) < (int)n;
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x) return snprintf(out, n, "%s/plumb/conv-picks.txt", x) < (int)n;
    if (h && *h) return snprintf(out, n, "%s/.cache/plumb/conv-picks.txt", h) < (int)n;
    return 0;
}

/* CTX of a line: the parts joined by '|', blanks as '_' (one word) */
static inline void conv_picks_ctx(char *out, size_t n, const char *lib, const char *device, const char *driver,
                                  size_t ws_limit, int retime)
{
    snprintf(out, n, "%s|%s|%s|ws%zu|retime%d", lib, device, driver, ws_limit, retime);
    for (char *c = out; *c; c++)
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r') *c = '_';
}

static inline int conv_picks_format(char *line, size_t n, const char *ctx, const struct conv_pick_rec *r)
{
    const struct train_conv *g = &r->g;
    int k = snprintf(line, n, "plumb-conv-pick 1 %s %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %zu\n", ctx,
                     r->dir, r->rt, r->tf32, g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad, g->P, g->Q,
                     r->usable, r->algo, r->math, r->ws);
    return k > 0 && (size_t)k < n ? k : -1;
}

/* 1 when line is a pick of context ctx (into *r), else 0 */
static inline int conv_picks_parse(const char *line, const char *ctx, struct conv_pick_rec *r)
{
    char c[512];
    int ver = 0, used = 0;
    if (sscanf(line, "plumb-conv-pick %d %511s%n", &ver, c, &used) != 2 || ver != 1 || strcmp(c, ctx)) return 0;
    struct conv_pick_rec x;
    memset(&x, 0, sizeof x);
    struct train_conv *g = &x.g;
    int tail = 0;
    if (sscanf(line + used, " %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %zu %n", &x.dir, &x.rt, &x.tf32, &g->N,
               &g->H, &g->W, &g->C, &g->K, &g->R, &g->S, &g->stride, &g->pad, &g->P, &g->Q, &x.usable, &x.algo, &x.math,
               &x.ws, &tail) != 18)
        return 0;
    if (line[used + tail] != '\0') return 0; /* trailing text: not a line this version wrote */
    struct train_conv chk;
    if (x.dir < 0 || x.dir > 2 || (x.usable != 0 && x.usable != 1) || x.algo < 0 ||
        train_conv_set(&chk, g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad) || chk.P != g->P ||
        chk.Q != g->Q)
        return 0;
    *r = x;
    return 1;
}

/* Appends one line (creating the file and its folder); 0, or errno */
static inline int conv_picks_append(const char *path, const char *line)
{
    char dir[4096];
    if (strlen(path) >= sizeof dir) return ENAMETOOLONG;
    memcpy(dir, path, strlen(path) + 1);
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(dir, 0755) && errno != EEXIST) return errno;
            *s = '/';
        }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    const size_t n = strlen(line);
    ssize_t w = write(fd, line, n);
    int rc = w == (ssize_t)n ? 0 : w < 0 ? errno : EIO;
    if (close(fd) && !rc) rc = errno;
    return rc;
}
#endif
