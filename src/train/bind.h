/* Rank binding (plumb train --bind, docs/COMM.md "Topology and binding"):
 * pin this rank's threads and memory to the NUMA node of its GPU, so host
 * work for the GPU (data loading, staging, the host reductions) runs next to
 * it and its pinned buffers are allocated there.
 *
 *   none  leave the binding to the launcher
 *   numa  a GPU rank: the nearest NUMA node of its GPU's PCI bus (hwloc);
 *         a cpu rank: NUMA node (local rank mod nodes), in hwloc's order,
 *         so the ranks of a host spread over its nodes
 *
 * The CPU binding covers every thread of the process (hwloc_set_cpubind
 * HWLOC_CPUBIND_PROCESS; threads started later inherit it); the memory
 * binding (hwloc_set_membind, policy bind) the calling thread and the
 * threads it starts afterwards (Linux keeps a memory policy per thread),
 * so plumb train binds right after MPI starts, before the device, the data
 * loader and the OpenMP pool exist. */
#ifndef PLUMB_BIND_H
#define PLUMB_BIND_H
#include <jansson.h>
#include "core/err.h"

struct bind_result {
    char policy[8];      /* "none" or "numa" */
    char why[160];       /* how the node was chosen */
    char gpu_bus[32];    /* the GPU's PCI bus id ("" for a cpu rank) */
    int node;            /* NUMA node bound to (-1: none) */
    char cpus[256];      /* the CPUs this process may run on afterwards */
    char mem_policy[16]; /* hwloc_get_membind's policy afterwards */
    int mem_node;        /* the single node memory is bound to, -1 none */
};

/* Where a rank goes: the NUMA node (OS index) nearest PCI device gpu_bus
 * ("" or NULL: a cpu rank, node local_rank mod nodes) in topology `source`
 * (NULL this machine; an hwloc XML file otherwise, see core/hostinfo.h).
 * PLUMB_EUSAGE naming the bus id when the topology does not know it. */
int bind_locate(const char *source, const char *gpu_bus, int local_rank, int *node, char *why, size_t n, plumb_err *e);
/* Applies policy ("none" or "numa") for this process: device is the device
 * spec the rank trains on ("cpu", "cuda", "cuda:1", ...; "cuda"/"hip" mean
 * the GPU of this local rank), local_rank / local_world its place on the
 * host. The GPU's bus id comes from its backend (dev_info.pci_bus_id); the
 * GPU is located in PLUMB_BIND_TOPOLOGY (an hwloc XML file, tests) or this
 * machine, and the binding applied to this machine. Fills out either way. */
int bind_apply(const char *policy, const char *device, int local_rank, int local_world, struct bind_result *out,
               plumb_err *e);
json_t *bind_json(const struct bind_result *b);

#endif
