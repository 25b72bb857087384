/* Host topology through hwloc: CPU model, cores, hardware threads, NUMA
 * nodes and their CPUs, and where a PCI device (a GPU, a NIC) sits: its NUMA
 * node and the CPUs close to it. One module for every reader (results.json's
 * host, plumb doctor, the cpu device's name, the health provider's host
 * name, rank binding), instead of parsing /proc and /sys in each.
 *
 * CPU sets are written as Linux cpulists ("0-7,16-23") of OS indexes, the
 * form taskset, numactl and mpirun take. NUMA nodes are named by OS index. */
#ifndef PLUMB_HOSTINFO_H
#define PLUMB_HOSTINFO_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

struct hostinfo;

/* Also discover PCI devices (what hostinfo_pci_locality needs; it costs a
 * walk of the PCI bus, so the CPU-facts readers go without). */
#define HOSTINFO_PCI 1u

/* source: NULL or "" this machine; "synthetic:DESC" an hwloc synthetic
 * topology (e.g. "synthetic:pack:2 numa:1 core:4 pu:2"); anything else an
 * hwloc XML file (lstopo --of xml). flags: HOSTINFO_PCI or 0. PLUMB_EUSAGE
 * naming the source when hwloc cannot read it. */
int hostinfo_open(const char *source, unsigned flags, struct hostinfo **out, plumb_err *e);
void hostinfo_close(struct hostinfo *h);
/* This machine's CPUs and NUMA nodes (no PCI), loaded once per process
 * (thread-safe); NULL when hwloc could not load it (then every fact reads
 * as unknown). Never closed. */
struct hostinfo *hostinfo_this(void);

/* "" when unknown (synthetic topologies have none). */
const char *hostinfo_cpu_model(const struct hostinfo *h);
int hostinfo_packages(const struct hostinfo *h);
int hostinfo_cores(const struct hostinfo *h);  /* physical cores */
int hostinfo_pus(const struct hostinfo *h);    /* hardware threads */
int hostinfo_numa_nodes(const struct hostinfo *h);
/* OS index of the i-th NUMA node (0 <= i < hostinfo_numa_nodes), -1 if none. */
int hostinfo_numa_os_index(const struct hostinfo *h, int i);
/* CPUs and memory (bytes) of NUMA node `node` (OS index). PLUMB_EUSAGE when
 * there is no such node. */
int hostinfo_numa_cpus(const struct hostinfo *h, int node, char *cpus, size_t n, plumb_err *e);
uint64_t hostinfo_numa_memory(const struct hostinfo *h, int node);
/* Where the PCI device bus_id sits ("0000:3b:00.0", "3b:00.0" or NVML's
 * "00000000:3B:00.0"): *node = the OS index of its nearest NUMA node (-1 when
 * the topology has none) and cpus = the CPUs local to it. The topology must
 * have been opened with HOSTINFO_PCI. PLUMB_EUSAGE when the bus id is
 * malformed, PLUMB_EUNSUPPORTED when no such device is known. */
int hostinfo_pci_locality(const struct hostinfo *h, const char *bus_id, int *node, char *cpus, size_t n,
                          plumb_err *e);
/* The CPUs this process may run on now (its binding), this machine only. */
int hostinfo_bound_cpus(const struct hostinfo *h, char *cpus, size_t n, int *count, plumb_err *e);

#endif
