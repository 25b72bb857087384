/* plumb comm --topology: per GPU its PCI bus, NUMA node, CPU list and
 * nearest NIC, the GPU-to-GPU link matrix (NVLink through NVML, xGMI
 * through ROCm SMI, otherwise the PCIe path hwloc finds, in nvidia-smi
 * topo's terms) and how to bind ranks to them with mpirun and srun
 * (docs/COMM.md, "Topology"). Facts from core/hostinfo.h (hwloc) and
 * health/gpu_topo.h (the vendor libraries). */
#ifndef PLUMB_TOPOLOGY_H
#define PLUMB_TOPOLOGY_H
#include <stddef.h>
#include <stdio.h>
#include "core/err.h"

/* Prints the report for this machine (xml NULL) or an hwloc XML topology;
 * GPUs from NVML / ROCm SMI when one answers, else the PCI tree's display
 * controllers (NVIDIA, AMD) without link facts. */
int topology_print(FILE *f, const char *xml, plumb_err *e);

/* Binding advice for n ranks, rank k driving GPU k (the vendor library's
 * order, i.e. PCI bus order; CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's the
 * same), GPU k nearest to NUMA node numa[k] (OS index, -1 unknown), on a
 * host whose NUMA nodes are nodes[0..nnodes) in hwloc's order. Fills the
 * mpirun and srun options (or "" when there is nothing to say) and a note
 * explaining them. */
void topology_advice(const int *numa, int n, const int *nodes, int nnodes, char *mpirun, size_t mn, char *srun,
                     size_t sn, char *note, size_t nn);

#endif
