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
/* How two PCI devices reach each other, in nvidia-smi topo's terms, from
 * the closest to the farthest. */
enum hostinfo_path {
    HOSTINFO_PATH_SELF = 0, /* the same device */
    HOSTINFO_PATH_PIX,      /* at most one PCIe bridge apart: behind the same switch */
    HOSTINFO_PATH_PXB,      /* several PCIe bridges, no host bridge: cascaded switches */
    HOSTINFO_PATH_PHB,      /* through a PCIe host bridge (the CPU's root complex) */
    HOSTINFO_PATH_NODE,     /* between host bridges of one NUMA node */
    HOSTINFO_PATH_SYS,      /* across NUMA nodes (the socket interconnect) */
};
const char *hostinfo_path_name(enum hostinfo_path p); /* "X", "PIX", "PXB", "PHB", "NODE", "SYS" */
const char *hostinfo_path_desc(enum hostinfo_path p); /* "behind the same PCIe switch", ... */
/* The path between PCI devices a and b (bus ids as hostinfo_pci_locality
 * takes them). PLUMB_EUNSUPPORTED when either is not in the topology. */
int hostinfo_pci_path(const struct hostinfo *h, const char *a, const char *b, enum hostinfo_path *p, plumb_err *e);

/* A PCI device of the topology. */
struct hostinfo_pci_dev {
    char bus_id[16];     /* "0000:3b:00.0" */
    unsigned class_id;   /* class << 8 | subclass: 0x0200 Ethernet, 0x0207 InfiniBand, 0x0302 3D controller */
    unsigned vendor_id, device_id;
    char name[128];      /* "vendor device" as hwloc read it ("" when unknown) */
    char osdev[96];      /* its OS devices, comma-separated ("mlx5_0,ib0"; "" none) */
    int numa;            /* nearest NUMA node (OS index), -1 unknown */
};
/* The PCI devices whose class base (class_id >> 8) is class_base (0x02
 * network, 0x03 display), in bus order; *n their number (at most max are
 * stored). Needs HOSTINFO_PCI. */
int hostinfo_pci_list(const struct hostinfo *h, unsigned class_base, struct hostinfo_pci_dev *out, int max, int *n,
                      plumb_err *e);

/* Binds this process to NUMA node `node` (OS index) of this machine: every
 * thread to the node's CPUs (hwloc_set_cpubind, the whole process), and
 * memory the calling thread, and threads it starts later, allocate from now
 * on to the node (hwloc_set_membind: Linux keeps a memory policy per
 * thread). So call it before starting threads. Not strict: hwloc maps it to
 * MPOL_PREFERRED_MANY (Linux 5.15+; MPOL_PREFERRED before), so allocations
 * go to the node and spill to others when it is full instead of failing
 * (numactl --preferred, not --membind). h must be this machine.
 * PLUMB_EUSAGE when there is no such node, PLUMB_EUNSUPPORTED when the
 * system refuses (cpus says which CPUs were asked for). */
int hostinfo_bind_numa(const struct hostinfo *h, int node, plumb_err *e);
/* The memory binding of the calling thread: *node the OS index of the one NUMA
 * node it is bound to, -1 when memory is not bound to a single node;
 * policy "bind", "default", ... (hwloc_get_membind). */
int hostinfo_mem_binding(const struct hostinfo *h, int *node, char *policy, size_t n, plumb_err *e);

/* The CPUs this process may run on now (its binding), this machine only. */
int hostinfo_bound_cpus(const struct hostinfo *h, char *cpus, size_t n, int *count, plumb_err *e);

/* Bytes this machine can still hand out without swapping (/proc/meminfo
 * MemAvailable); 0 when unknown. For "needs X, has Y" errors before a large
 * allocation. */
double hostinfo_mem_available(void);

#endif
