/* Prometheus exporter over libmicrohttpd: GET /metrics returns the last
 * published text (health_prom_render output); sampling happens elsewhere, so a
 * scrape never waits on a vendor library.
 *
 * Robustness: one thread per connection (a slow client holds only its own
 * thread), an idle timeout, a per-connection memory limit (an oversized
 * request header gets 431/413 from MHD), a connection limit, and a reaper that
 * cuts any connection whose current request has taken longer than
 * request_timeout_s (a client trickling one byte a second is cut after that
 * long, which an idle timeout alone would never do). Malformed request lines
 * get 400 from MHD; other paths 404; methods other than GET/HEAD 405. */
#ifndef PLUMB_HEALTH_EXPORTER_H
#define PLUMB_HEALTH_EXPORTER_H
#include <stddef.h>
#include "core/err.h"

struct health_exporter_opts {
    const char *addr;          /* "127.0.0.1:9400", "[::1]:9400", ":9400" or "9400" (127.0.0.1);
                                  port 0 picks a free one. A port another socket listens on
                                  is an error ("address in use"): never shared (no SO_REUSEPORT) */
    double request_timeout_s;  /* default 10 */
    unsigned idle_timeout_s;   /* default 10 */
    unsigned conn_limit;       /* default 512 */
    size_t mem_limit;          /* per connection, default 64 KiB */
};

struct health_exporter;
int health_exporter_start(struct health_exporter **x, const struct health_exporter_opts *o, plumb_err *e);
int health_exporter_port(const struct health_exporter *x); /* the port bound (the real one for port 0) */
/* "http://127.0.0.1:40123/metrics": the address and port bound. */
void health_exporter_url(const struct health_exporter *x, char *buf, size_t n);
/* Replaces the served text; takes ownership of the malloc'ed text. */
void health_exporter_publish(struct health_exporter *x, char *text);
/* Requests answered so far, connections cut by the reaper (for logs and tests). */
void health_exporter_stats(struct health_exporter *x, unsigned long *requests, unsigned long *reaped);
void health_exporter_stop(struct health_exporter *x);

#endif
