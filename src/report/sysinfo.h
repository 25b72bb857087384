/* Facts about this host and the libraries plumb runs with, shared by
 * results.json (host, versions) and plumb doctor. CPUs and NUMA come from
 * hwloc (core/hostinfo.h), memory from /proc/meminfo, the rest from uname,
 * os-release and the libraries' own version calls; a fact that cannot be
 * read is left empty ("" or 0), never guessed. */
#ifndef PLUMB_SYSINFO_H
#define PLUMB_SYSINFO_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PLUMB_VERSION
#define PLUMB_VERSION "0.1.0-dev"
#endif

struct sysinfo_host {
    char hostname[256];
    char os[256];        /* /etc/os-release PRETTY_NAME */
    char kernel[256];    /* uname -r */
    char arch[64];       /* uname -m */
    char cpu_model[256]; /* hwloc's CPUModel of the first package */
    int cpus_online;     /* sysconf(_SC_NPROCESSORS_ONLN): hardware threads */
    int cores_physical;  /* hwloc cores */
    int cpus_allowed;    /* the process's binding: what it may use */
    int numa_nodes;      /* hwloc NUMA nodes (1 on a machine without NUMA) */
    int numa_os[8];      /* OS index of the first 8 nodes */
    char numa_cpus[8][128]; /* cpulist of the first 8 nodes */
    uint64_t mem_total;  /* bytes, /proc/meminfo MemTotal */
    uint64_t mem_available; /* bytes, MemAvailable */
};

void sysinfo_host_get(struct sysinfo_host *h);
/* {"hostname","os","kernel","arch","cpu_model","cores","physical_cores",
 *  "cores_allowed","numa_nodes","mem_total_bytes","mem_available_bytes"} */
json_t *sysinfo_host_json(const struct sysinfo_host *h);

/* Version strings (never NULL; "" when unknown). */
void sysinfo_compiler(char *buf, size_t n);      /* "gcc 12.2.0" */
void sysinfo_blas(char *buf, size_t n);          /* openblas_get_config() */
int sysinfo_blas_threads(void);                  /* openblas_get_num_threads() */
void sysinfo_mpi(char *buf, size_t n);           /* MPI_Get_library_version, first line */
void sysinfo_mpi_header(char *buf, size_t n);    /* the MPI version plumb was compiled against */
void sysinfo_jansson(char *buf, size_t n);
/* {"plumb","compiler","blas","mpi","jansson"} */
json_t *sysinfo_versions_json(void);

/* "2026-11-29T09:35:00Z" for a UTC wall time (seconds since the epoch). */
void sysinfo_utc_iso(double wall, char *buf, size_t n);
/* "20261129T093500Z" */
void sysinfo_utc_compact(double wall, char *buf, size_t n);

#endif
