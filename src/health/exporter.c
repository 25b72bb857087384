/* The /metrics server; see exporter.h for the robustness rules. */
#include "health/exporter.h"
#include "core/log.h"
#include "core/timer.h"
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn_ent {
    struct MHD_Connection *c;
    int fd;
    double start; /* when the current request began (connection start or last completion) */
    int reaped;
};

struct health_exporter {
    struct MHD_Daemon *d;
    pthread_mutex_t lock;
    char *text;
    size_t text_len;
    unsigned long requests, reaped;
    /* connections, for the reaper */
    struct conn_ent *conns;
    unsigned nconns, cap;
    double request_timeout;
    pthread_t reaper;
    int reaper_started, stopping;
    pthread_cond_t cond;
    int port;
    char url_host[80];        /* the address bound, as a URL host ("127.0.0.1", "[::1]") */
};

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    buf[strcspn(buf, "\n")] = 0;
    log_debug("exporter: %s", buf);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_size;
    (void)con_cls;
    struct health_exporter *x = cls;
    int head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (strcmp(method, MHD_HTTP_METHOD_GET) && !head) {
        static const char msg[] = "method not allowed: only GET /metrics\n";
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Allow", "GET, HEAD");
        MHD_add_response_header(r, "Content-Type", "text/plain");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!strcmp(url, "/metrics")) {
        pthread_mutex_lock(&x->lock);
        x->requests++;
        enum MHD_Result ret =
            x->text ? reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", x->text, x->text_len)
                    : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "no sample yet\n", 14);
        pthread_mutex_unlock(&x->lock);
        return ret;
    }
    if (!strcmp(url, "/")) {
        static const char body[] = "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n";
        return reply(c, MHD_HTTP_OK, "text/html", body, sizeof body - 1);
    }
    return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found: try /metrics\n", 24);
}

static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    (void)socket_context;
    struct health_exporter *x = cls;
    pthread_mutex_lock(&x->lock);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && x->nconns < x->cap) {
            x->conns[x->nconns++] = (struct conn_ent){c, ci->connect_fd, timer_now(), 0};
        }
    } else {
        /* closed: forget it before MHD closes the socket, so the reaper never
         * touches a descriptor that may have been reused */
        for (unsigned i = 0; i < x->nconns; i++)
            if (x->conns[i].c == c) {
                x->conns[i] = x->conns[--x->nconns];
                break;
            }
    }
    pthread_mutex_unlock(&x->lock);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)con_cls;
    (void)toe;
    struct health_exporter *x = cls;
    pthread_mutex_lock(&x->lock);
    for (unsigned i = 0; i < x->nconns; i++)
        if (x->conns[i].c == c) x->conns[i].start = timer_now();
    pthread_mutex_unlock(&x->lock);
}

static void *reaper_main(void *arg)
{
    struct health_exporter *x = arg;
    pthread_mutex_lock(&x->lock);
    while (!x->stopping) {
        double now = timer_now();
        for (unsigned i = 0; i < x->nconns; i++) {
            struct conn_ent *ce = &x->conns[i];
            if (!ce->reaped && now - ce->start > x->request_timeout) {
                /* the connection's own thread sees EOF/error and closes it */
                shutdown(ce->fd, SHUT_RDWR);
                ce->reaped = 1;
                x->reaped++;
                log_debug("exporter: cut a connection after %.1f s without a complete request", now - ce->start);
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->cond, &x->lock, &ts);
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

/* ADDR:PORT, [IPv6]:PORT, :PORT or PORT (the last two bind 127.0.0.1). */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, int *v6, plumb_err *e)
{
    memset(ss, 0, sizeof *ss);
    char host[128];
    const char *colon = strrchr(addr, ':');
    const char *port_s = colon ? colon + 1 : addr;
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (!colon && (!*addr || strspn(addr, "0123456789") != strlen(addr)))
        return err_set(e, PLUMB_EUSAGE, "--serve: '%s' is not ADDR:PORT, :PORT or PORT (e.g. 127.0.0.1:9400)", addr);
    if (hl >= sizeof host) return err_set(e, PLUMB_EUSAGE, "--serve: address '%s' too long", addr);
    memcpy(host, addr, hl);
    host[hl] = 0;
    if (!hl) snprintf(host, sizeof host, "127.0.0.1"), hl = strlen(host);
    char *end;
    errno = 0;
    long port = strtol(port_s, &end, 10);
    if (errno || end == port_s || *end || port < 0 || port > 65535)
        return err_set(e, PLUMB_EUSAGE, "--serve: port '%s' is not 0..65535", port_s);
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
            return err_set(e, PLUMB_EUSAGE, "--serve: '%s' is not an IPv6 address", host + 1);
        *v6 = 1;
        return PLUMB_OK;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return err_set(e, PLUMB_EUSAGE, "--serve: '%s' is not an IPv4 address (or [IPv6])", host);
    *v6 = 0;
    return PLUMB_OK;
}

/* Why the daemon could not listen: bind the address ourselves (no
 * SO_REUSEPORT, as the daemon) and report errno. */
static int bind_errno(const struct sockaddr_storage *ss, int v6)
{
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, (const struct sockaddr *)ss, v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    int err = rc ? errno : 0;
    if (!rc && listen(fd, 1)) err = errno;
    close(fd);
    return err;
}

int health_exporter_start(struct health_exporter **out, const struct health_exporter_opts *o, plumb_err *e)
{
    *out = NULL;
    struct sockaddr_storage ss;
    int v6 = 0;
    int rc = parse_addr(o->addr ? o->addr : "127.0.0.1:9400", &ss, &v6, e);
    if (rc) return rc;
    struct health_exporter *x = calloc(1, sizeof *x);
    if (!x) return err_set(e, PLUMB_ENOMEM, "exporter: out of memory");
    x->cap = o->conn_limit ? o->conn_limit : 512;
    x->conns = calloc(x->cap, sizeof *x->conns);
    x->request_timeout = o->request_timeout_s > 0 ? o->request_timeout_s : 10;
    if (!x->conns) {
        free(x);
        return err_set(e, PLUMB_ENOMEM, "exporter: out of memory");
    }
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->cond, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    x->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, x,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(o->idle_timeout_s ? o->idle_timeout_s : 10),
                            MHD_OPTION_CONNECTION_LIMIT, x->cap,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(o->mem_limit ? o->mem_limit : 64 * 1024),
                            MHD_OPTION_NOTIFY_CONNECTION, notify_conn, x,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, x,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, x,
                            MHD_OPTION_END);
    if (!x->d) {
        int err = bind_errno(&ss, v6);
        pthread_mutex_destroy(&x->lock);
        pthread_cond_destroy(&x->cond);
        free(x->conns);
        free(x);
        const char *a = o->addr ? o->addr : "127.0.0.1:9400";
        if (err == EADDRINUSE)
            return err_set(e, PLUMB_EUSAGE, "--serve %s: address in use (another process listens there; pick "
                           "another port, or port 0 for a free one)", a);
        if (err == EADDRNOTAVAIL || err == EACCES)
            return err_set(e, PLUMB_EUSAGE, "--serve %s: cannot listen: %s", a, strerror(err));
        return err_set(e, PLUMB_EIO, "--serve %s: cannot listen: %s", a,
                       err ? strerror(err) : "libmicrohttpd refused to start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(x->d, MHD_DAEMON_INFO_BIND_PORT);
    x->port = di ? di->port : 0;
    char h[INET6_ADDRSTRLEN] = "?";
    if (v6) inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, h, sizeof h);
    else inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, h, sizeof h);
    snprintf(x->url_host, sizeof x->url_host, v6 ? "[%s]" : "%s", h);
    if (pthread_create(&x->reaper, NULL, reaper_main, x) == 0) x->reaper_started = 1;
    else log_warn("exporter: no reaper thread: slow requests are only cut by the idle timeout");
    *out = x;
    return PLUMB_OK;
}

int health_exporter_port(const struct health_exporter *x) { return x->port; }

void health_exporter_url(const struct health_exporter *x, char *buf, size_t n)
{
    snprintf(buf, n, "http://%s:%d/metrics", x->url_host, x->port);
}

void health_exporter_publish(struct health_exporter *x, char *text)
{
    pthread_mutex_lock(&x->lock);
    free(x->text);
    x->text = text;
    x->text_len = text ? strlen(text) : 0;
    pthread_mutex_unlock(&x->lock);
}

void health_exporter_stats(struct health_exporter *x, unsigned long *requests, unsigned long *reaped)
{
    pthread_mutex_lock(&x->lock);
    if (requests) *requests = x->requests;
    if (reaped) *reaped = x->reaped;
    pthread_mutex_unlock(&x->lock);
}

void health_exporter_stop(struct health_exporter *x)
{
    if (!x) return;
    pthread_mutex_lock(&x->lock);
    x->stopping = 1;
    pthread_cond_signal(&x->cond);
    pthread_mutex_unlock(&x->lock);
    if (x->reaper_started) pthread_join(x->reaper, NULL);
    MHD_stop_daemon(x->d);
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
    free(x->text);
    free(x->conns);
    free(x);
}
