#include "core/file.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int file_test_fail_before_rename = 0;

int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int file_join(char *out, size_t n, const char *a, const char *b, plumb_err *e)
{
    size_t la = strlen(a);
    int w = snprintf(out, n, "%s%s%s", a, (la && a[la - 1] == '/') ? "" : "/", b);
    if (w < 0 || (size_t)w >= n) return err_set(e, PLUMB_EUSAGE, "path too long: %s/%s", a, b);
    return PLUMB_OK;
}

int file_fsync_dir(const char *dir, plumb_err *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return err_set(e, PLUMB_EIO, "open directory %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    if (rc != 0 && saved != EINVAL) /* some filesystems refuse fsync on dirs */
        return err_set(e, PLUMB_EIO, "fsync directory %s: %s", dir, strerror(saved));
    return PLUMB_OK;
}

int file_mkdirs(const char *path, plumb_err *e)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) return err_set(e, PLUMB_EUSAGE, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return err_set(e, PLUMB_EIO, "mkdir %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return err_set(e, PLUMB_EIO, "mkdir %s: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, PLUMB_EIO, "%s exists and is not a directory", buf);
    return PLUMB_OK;
}

static int write_full(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* What a path names when it is neither a regular file, a directory nor a symlink, else NULL. */
static const char *special_kind(mode_t m)
{
    return S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket" : NULL;
}

int file_write_atomic_iov(const char *path, const void *const *bufs, const size_t *lens,
                          int nbufs, plumb_err *e)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];
    if (strlen(path) >= sizeof dir) return err_set(e, PLUMB_EUSAGE, "path too long: %s", path);
    /* the rename below replaces whatever path names: as root, an output of /dev/null
     * made /dev/null a regular file */
    struct stat lst;
    const char *kind = lstat(path, &lst) == 0 ? special_kind(lst.st_mode) : NULL;
    if (kind) return err_set(e, PLUMB_EUSAGE, "%s: %s, not a regular file (expected a file name to write)", path, kind);
    strcpy(dir, path);
    char *d = dirname(dir);
    int w = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (w < 0 || (size_t)w >= sizeof tmp) return err_set(e, PLUMB_EUSAGE, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(e, PLUMB_EIO, "create %s: %s", tmp, strerror(errno));
    /* held until close: file_remove_stale_temps leaves a temp file alone
     * while its writer lives (a dead writer's lock is gone) */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    for (int i = 0; i < nbufs; i++) {
        if (write_full(fd, bufs[i], lens[i]) != 0) {
            int saved = errno;
            close(fd);
            unlink(tmp);
            return err_set(e, PLUMB_EIO, "write %s: %s", tmp, strerror(saved));
        }
    }
    if (fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        return err_set(e, PLUMB_EIO, "fsync %s: %s", tmp, strerror(saved));
    }
    if (close(fd) != 0) {
        unlink(tmp);
        return err_set(e, PLUMB_EIO, "close %s: %s", tmp, strerror(errno));
    }
    if (file_test_fail_before_rename)
        return err_set(e, PLUMB_EIO, "simulated crash before rename of %s (temp file left at %s)",
                       path, tmp);
    if (rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        return err_set(e, PLUMB_EIO, "rename %s -> %s: %s", tmp, path, strerror(saved));
    }
    return file_fsync_dir(d, e);
}

int file_write_atomic(const char *path, const void *data, size_t len, plumb_err *e)
{
    const void *bufs[1] = {data};
    size_t lens[1] = {len};
    return file_write_atomic_iov(path, bufs, lens, 1, e);
}

int file_read_all(const char *path, char **out, size_t *len, plumb_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    /* O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (a FIFO
     * named like a checkpoint, or gpt --data text:FIFO, hung the run); cleared
     * below, so a pipe with a writer (text:<(cmd)) is read to its end and one
     * without reads as empty */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return err_set(e, errno == ENOENT ? PLUMB_EUSAGE : PLUMB_EIO, "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        /* a directory names the wrong thing; a device (/dev/zero) never ends:
         * it was read until memory ran out */
        close(fd);
        return err_set(e, PLUMB_EUSAGE, "%s: %s (expected a file)", path,
                       S_ISDIR(st.st_mode) ? "is a directory" : "is a device, not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int er = errno;
        close(fd);
        return err_set(e, PLUMB_EIO, "open %s: %s", path, strerror(er));
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return err_set(e, PLUMB_ENOMEM, "reading %s: out of memory", path);
    }
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) {
            if (ferror(f)) {
                free(buf);
                fclose(f);
                return err_set(e, PLUMB_EIO, "read %s: %s", path, strerror(errno));
            }
            break;
        }
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            fclose(f);
            return err_set(e, PLUMB_ENOMEM, "reading %s: out of memory", path);
        }
        buf = nb;
    }
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return PLUMB_OK;
}

int file_remove_stale_temps(const char *dir, const char *prefix, int *removed, plumb_err *e)
{
    if (removed) *removed = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? PLUMB_OK : err_set(e, PLUMB_EIO, "%s: %s", dir, strerror(errno));
    size_t pl = strlen(prefix);
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        const char *t = strstr(n, ".tmp.");
        if (strncmp(n, prefix, pl) || !t) continue;
        char *end;
        long pid = strtol(t + 5, &end, 10);
        if (end == t + 5 || *end || pid <= 0) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, n) >= (int)sizeof path) continue;
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        /* the writer is gone when nobody holds its lock and either its pid is
         * not alive here or the file has not changed for an hour (a pid of
         * another host, or reused) */
        int stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                    ((kill((pid_t)pid, 0) != 0 && errno == ESRCH) || now - st.st_mtime > 3600);
        if (stale && unlink(path) == 0 && removed) (*removed)++;
        close(fd);
    }
    closedir(d);
    return PLUMB_OK;
}

int file_check_output(const char *opt, const char *path, plumb_err *e)
{
    struct stat st;
    if (!path || !*path) return err_set(e, PLUMB_EUSAGE, "%s: expected a file name", opt);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return err_set(e, PLUMB_EUSAGE, "%s %s: is a directory (expected a file name)", opt, path);
    if (stat(path, &st) != 0 && errno == ELOOP) return err_set(e, PLUMB_EUSAGE, "%s %s: a symlink loop", opt, path);
    /* outputs are written to a temporary file renamed over path: a device or a FIFO
     * there was replaced by a regular file (plumb data synth-criteo --out /dev/null, as
     * root, left /dev/null a regular file) */
    const char *kind = stat(path, &st) == 0 ? special_kind(st.st_mode) : NULL;
    if (kind)
        return err_set(e, PLUMB_EUSAGE, "%s %s: %s, not a regular file (expected a file name: the output is written "
                       "to a temporary file and renamed over it)", opt, path, kind);
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(e, PLUMB_EUSAGE, "%s: path too long", opt);
    const char *parent = dirname(buf);
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, PLUMB_EUSAGE, "%s %s: its folder %s does not exist", opt, path, parent);
    if (access(parent, W_OK | X_OK) != 0)
        return err_set(e, PLUMB_EUSAGE, "%s %s: its folder %s is not writable: %s", opt, path, parent, strerror(errno));
    return PLUMB_OK;
}

/* An output directory (file.h): the checks of file_check_output for a
 * folder, which is created when missing (plumb train's --checkpoint-dir,
 * plumb data synth-cifar's --out). */
int file_check_output_dir(const char *opt, const char *dir, plumb_err *e)
{
    struct stat st;
    if (!dir || !*dir) return err_set(e, PLUMB_EUSAGE, "%s: expected a folder name", opt);
    if (stat(dir, &st) != 0) {
        int err = errno;
        if (err != ENOENT)
            return err_set(e, PLUMB_EUSAGE, "%s %s: %s", opt, dir, err == ELOOP ? "a symlink loop" : strerror(err));
        plumb_err me = {0};
        if (file_mkdirs(dir, &me)) return err_set(e, PLUMB_EUSAGE, "%s %s: cannot create it: %s", opt, dir, me.msg);
    } else if (!S_ISDIR(st.st_mode)) {
        return err_set(e, PLUMB_EUSAGE, "%s %s: exists and is not a directory", opt, dir);
    }
    if (access(dir, W_OK | X_OK) != 0)
        return err_set(e, PLUMB_EUSAGE, "%s %s: not writable: %s", opt, dir, strerror(errno));
    return PLUMB_OK;
}

static int open_inside(const char *dir, const char *rel, size_t cap, int *fdp, size_t *size, plumb_err *e)
{
    *fdp = -1;
    if (!rel || !*rel || rel[0] == '/' || strstr(rel, ".."))
        return err_set(e, PLUMB_EUSAGE, "artifact path is not relative to the run folder");
    char path[PATH_MAX], real_dir[PATH_MAX], real[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
        return err_set(e, PLUMB_EUSAGE, "artifact path too long");
    /* every failure is the folder's (the user's input): PLUMB_EUSAGE */
    if (!realpath(dir, real_dir)) return err_set(e, PLUMB_EUSAGE, "run folder: %s", strerror(errno));
    if (!realpath(path, real)) return err_set(e, PLUMB_EUSAGE, "%s: %s", rel, strerror(errno));
    size_t L = strlen(real_dir);
    if (strncmp(real, real_dir, L) || (real[L] != '/' && !(L == 1 && real_dir[0] == '/')))
        return err_set(e, PLUMB_EUSAGE, "%s: leads out of the run folder (a symlink): not read", rel);
    int fd;
    struct stat st;
    int r = file_open_regular(real, O_NOFOLLOW, &fd, &st);
    if (r > 0) return err_set(e, PLUMB_EUSAGE, "%s: %s", rel, strerror(r));
    if (r < 0) return err_set(e, PLUMB_EUSAGE, "%s: not a regular file: not read", rel);
    if ((size_t)st.st_size > cap) {
        close(fd);
        return err_set(e, PLUMB_EUSAGE, "%s: %lld bytes, more than the %zu read: not read", rel,
                       (long long)st.st_size, cap);
    }
    *fdp = fd;
    *size = (size_t)st.st_size;
    return PLUMB_OK;
}

int file_check_inside(const char *dir, const char *rel, size_t cap, plumb_err *e)
{
    int fd;
    size_t size;
    int rc = open_inside(dir, rel, cap, &fd, &size, e);
    if (!rc) close(fd);
    return rc;
}

int file_open_regular(const char *path, int extra_flags, int *fd, struct stat *st)
{
    *fd = -1;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
    if (f < 0) return errno ? errno : EIO;
    if (fstat(f, st) != 0) {
        int er = errno ? errno : EIO;
        close(f);
        return er;
    }
    if (!S_ISREG(st->st_mode)) {
        close(f);
        return -1;
    }
    *fd = f;
    return 0;
}

const char *file_kind(const struct stat *st)
{
    return S_ISREG(st->st_mode)    ? "a regular file"
           : S_ISDIR(st->st_mode)  ? "a directory"
           : S_ISFIFO(st->st_mode) ? "a FIFO or pipe"
                                   : "a device or socket";
}

/* file_check_input's rules; on success *fdp is open and *size its size */
static int open_input(const char *path, size_t cap, int *fdp, size_t *size, plumb_err *e)
{
    int fd;
    struct stat st;
    int r = file_open_regular(path, 0, &fd, &st);
    if (r == ENOENT) return err_set(e, PLUMB_EUSAGE, "%s: no such file", path);
    if (r > 0) return err_set(e, PLUMB_EUSAGE, "%s: cannot open: %s", path, strerror(r));
    if (r < 0 && S_ISDIR(st.st_mode)) return err_set(e, PLUMB_EUSAGE, "%s: is a directory (expected a file)", path);
    if (r < 0)
        return err_set(e, PLUMB_EUSAGE, "%s: not a regular file (a FIFO, a device or a socket): not read", path);
    if ((size_t)st.st_size > cap) {
        close(fd);
        return err_set(e, PLUMB_EUSAGE, "%s: %lld bytes, more than the %zu read: not read", path, (long long)st.st_size,
                       cap);
    }
    *fdp = fd;
    *size = (size_t)st.st_size;
    return PLUMB_OK;
}

/* size bytes of fd (fewer if the file shrank meanwhile), NUL-terminated into
 * a malloc'ed *out; closes fd. name: for the error. */
static int read_fd_all(int fd, size_t size, const char *name, char **out, size_t *len, plumb_err *e)
{
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return err_set(e, PLUMB_ENOMEM, "%s: out of memory", name);
    }
    size_t n = 0;
    while (n < size) {
        ssize_t r = read(fd, buf + n, size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* shrank meanwhile: what is there */
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return PLUMB_OK;
}

int file_check_input(const char *path, size_t cap, plumb_err *e)
{
    int fd;
    size_t size;
    int rc = open_input(path, cap, &fd, &size, e);
    if (!rc) close(fd);
    return rc;
}

int file_read_input(const char *path, size_t cap, char **out, size_t *len, plumb_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    int fd;
    size_t size;
    int rc = open_input(path, cap, &fd, &size, e);
    return rc ? rc : read_fd_all(fd, size, path, out, len, e);
}

int file_read_inside(const char *dir, const char *rel, size_t cap, char **out, size_t *len, plumb_err *e)
{
    *out = NULL;
    if (len) *len = 0;
    int fd;
    size_t size;
    int rc = open_inside(dir, rel, cap, &fd, &size, e);
    return rc ? rc : read_fd_all(fd, size, rel, out, len, e);
}
