/* GPUs and the links between them, from the vendor libraries (for plumb
 * comm --topology, accept/topology.h): NVML on NVIDIA (PCI bus ids,
 * NVLinks and where each goes: a peer GPU or an NVSwitch), ROCm SMI on AMD
 * (PCI bus ids, xGMI or PCIe between each pair, with hops). The PCIe path
 * between GPUs without such a link comes from hwloc (core/hostinfo.h). */
#ifndef PLUMB_GPU_TOPO_H
#define PLUMB_GPU_TOPO_H
#include "core/err.h"

#define GPU_TOPO_MAX 64

enum gpu_link_kind {
    GPU_LINK_NONE = 0,     /* no NVLink/xGMI: the PCIe path */
    GPU_LINK_NVLINK = 1,   /* NVLinks straight between the two */
    GPU_LINK_NVSWITCH = 2, /* NVLinks of both into the NVSwitch fabric */
    GPU_LINK_XGMI = 3,     /* AMD xGMI (hops in hops[][]) */
};

struct gpu_topo_gpu {
    char name[96];
    char bus_id[32];   /* as the library writes it ("00000000:3B:00.0", "0000:c1:00.0") */
    int nvlinks_up;    /* NVIDIA: links up; -1 unknown */
    int nvlinks_switch;/* of which to an NVSwitch */
};

struct gpu_topo {
    char vendor[16];   /* "nvidia", "amd" */
    char source[600];  /* the library that answered */
    int n;
    struct gpu_topo_gpu gpu[GPU_TOPO_MAX];
    unsigned char kind[GPU_TOPO_MAX][GPU_TOPO_MAX];  /* enum gpu_link_kind */
    unsigned char links[GPU_TOPO_MAX][GPU_TOPO_MAX]; /* NVLinks between the two (NVSwitch: the fewer of both sides') */
    unsigned char hops[GPU_TOPO_MAX][GPU_TOPO_MAX];  /* xGMI hops */
};

/* Tries NVML (PLUMB_NVML_LIB or libnvidia-ml.so.1), then ROCm SMI
 * (PLUMB_RSMI_LIB or librocm_smi64.so.*). PLUMB_EUNSUPPORTED saying why
 * when neither answers with a GPU (then t->n = 0). */
int gpu_topo_read(struct gpu_topo *t, plumb_err *e);
/* Two bus ids name the same function (case, leading zeros of the domain). */
int gpu_topo_same_bus(const char *a, const char *b);

#endif
