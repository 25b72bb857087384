#include "report/sysinfo.h"
#include "core/hostinfo.h"
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* OpenBLAS's own introspection (declared in its cblas.h; declared here so we
 * do not depend on which cblas.h is first on the include path). */
extern char *openblas_get_config(void);
extern int openblas_get_num_threads(void);

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
}

/* Value of "key<sep>value" lines, e.g. /proc/cpuinfo "model name\t: X". */
static int read_keyed(const char *path, const char *key, char sep, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    size_t kl = strlen(key);
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl)) continue;
        char *p = line + kl;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != sep) continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        chomp(p);
        size_t L = strlen(p);
        if (L >= 2 && p[0] == '"' && p[L - 1] == '"') {
            p[L - 1] = '\0';
            p++;
        }
        snprintf(out, n, "%s", p);
        found = 1;
        break;
    }
    fclose(f);
    return found;
}

static uint64_t meminfo_kb(const char *key)
{
    char v[128];
    if (!read_keyed("/proc/meminfo", key, ':', v, sizeof v)) return 0;
    return strtoull(v, NULL, 10);
}

void sysinfo_host_get(struct sysinfo_host *h)
{
    memset(h, 0, sizeof *h);
    if (gethostname(h->hostname, sizeof h->hostname - 1)) h->hostname[0] = '\0';
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(h->kernel, sizeof h->kernel, "%s %s", u.sysname, u.release);
        snprintf(h->arch, sizeof h->arch, "%s", u.machine);
    }
    if (!read_keyed("/etc/os-release", "PRETTY_NAME", '=', h->os, sizeof h->os))
        read_keyed("/usr/lib/os-release", "PRETTY_NAME", '=', h->os, sizeof h->os);
    /* CPUs and NUMA from hwloc (core/hostinfo.h) */
    const struct hostinfo *hi = hostinfo_this();
    snprintf(h->cpu_model, sizeof h->cpu_model, "%s", hostinfo_cpu_model(hi));
    long on = sysconf(_SC_NPROCESSORS_ONLN);
    h->cpus_online = on > 0 ? (int)on : hostinfo_pus(hi);
    h->cores_physical = hostinfo_cores(hi);
    if (hostinfo_bound_cpus(hi, NULL, 0, &h->cpus_allowed, NULL) || h->cpus_allowed <= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        h->cpus_allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : h->cpus_online;
    }
    h->numa_nodes = hostinfo_numa_nodes(hi);
    for (int i = 0; i < h->numa_nodes && i < 8; i++) {
        int os = hostinfo_numa_os_index(hi, i);
        h->numa_os[i] = os;
        if (hostinfo_numa_cpus(hi, os, h->numa_cpus[i], sizeof h->numa_cpus[i], NULL)) h->numa_cpus[i][0] = '\0';
    }
    h->mem_total = meminfo_kb("MemTotal") * 1024ull;
    h->mem_available = (uint64_t)hostinfo_mem_available(); /* the one reader the size checks use too */
}

json_t *sysinfo_host_json(const struct sysinfo_host *h)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I}", "hostname", h->hostname, "os",
                     h->os, "kernel", h->kernel, "arch", h->arch, "cpu_model", h->cpu_model, "cores",
                     h->cpus_online, "physical_cores", h->cores_physical, "cores_allowed", h->cpus_allowed,
                     "numa_nodes", h->numa_nodes,
                     "mem_total_bytes", (json_int_t)h->mem_total, "mem_available_bytes",
                     (json_int_t)h->mem_available);
}

void sysinfo_compiler(char *buf, size_t n)
{
#ifdef __clang__
    snprintf(buf, n, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(buf, n, "gcc %s", __VERSION__);
#else
    snprintf(buf, n, "unknown C compiler");
#endif
}

void sysinfo_blas(char *buf, size_t n)
{
    const char *c = openblas_get_config();
    if (c && !strncmp(c, "OpenBLAS", 8)) snprintf(buf, n, "%s", c);
    else snprintf(buf, n, "OpenBLAS %s", c ? c : "(no config string)");
    chomp(buf);
}

int sysinfo_blas_threads(void) { return openblas_get_num_threads(); }

void sysinfo_mpi(char *buf, size_t n)
{
    /* MPI_Get_library_version may be called before MPI_Init (MPI 3.0 s8.1.1). */
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) {
        snprintf(buf, n, "%s", "");
        return;
    }
    v[len < (int)sizeof v ? len : (int)sizeof v - 1] = '\0';
    char *nl = strchr(v, '\n');
    if (nl) *nl = '\0';
    /* Open MPI: "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: ..., May 26, 2022" */
    char *cut = strstr(v, ", repo rev");
    if (cut) *cut = '\0';
    snprintf(buf, n, "%s", v);
    chomp(buf);
}

void sysinfo_mpi_header(char *buf, size_t n)
{
#if defined(OMPI_MAJOR_VERSION)
    snprintf(buf, n, "Open MPI %d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    snprintf(buf, n, "MPICH %s", MPICH_VERSION);
#else
    snprintf(buf, n, "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
}

void sysinfo_jansson(char *buf, size_t n)
{
#if JANSSON_VERSION_HEX >= 0x020d00
    snprintf(buf, n, "jansson %s", jansson_version_str());
#else
    snprintf(buf, n, "jansson %s (headers)", JANSSON_VERSION);
#endif
}

json_t *sysinfo_versions_json(void)
{
    char comp[256], blas[512], mpi[512], jan[64];
    sysinfo_compiler(comp, sizeof comp);
    sysinfo_blas(blas, sizeof blas);
    sysinfo_mpi(mpi, sizeof mpi);
    sysinfo_jansson(jan, sizeof jan);
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "plumb", PLUMB_VERSION, "compiler", comp, "blas", blas,
                     "mpi", mpi, "jansson", jan);
}

static void utc_fmt(double wall, const char *fmt, char *buf, size_t n)
{
    time_t t = (time_t)floor(wall);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (!strftime(buf, n, fmt, &tm) && n) buf[0] = '\0';
}

void sysinfo_utc_iso(double wall, char *buf, size_t n) { utc_fmt(wall, "%Y-%m-%dT%H:%M:%SZ", buf, n); }
void sysinfo_utc_compact(double wall, char *buf, size_t n) { utc_fmt(wall, "%Y%m%dT%H%M%SZ", buf, n); }
