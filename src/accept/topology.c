/* plumb comm --topology (topology.h). */
#include "accept/topology.h"
#include "core/file.h"
#include "core/hostinfo.h"
#include "health/gpu_topo.h"
#include <stdlib.h>
#include <string.h>

/* the most bytes of a --topology-xml file read (lstopo --of xml of a large host is a few MB) */
#define TOPOLOGY_XML_CAP ((size_t)64 << 20)

void topology_advice(const int *numa, int n, const int *nodes, int nnodes, char *mpirun, size_t mn, char *srun,
                     size_t sn, char *note, size_t nn)
{
    mpirun[0] = srun[0] = note[0] = 0;
    if (n <= 0) {
        if (nnodes > 1) {
            snprintf(mpirun, mn, "--map-by numa --bind-to numa");
            snprintf(srun, sn, "--cpu-bind=ldoms --mem-bind=local");
            snprintf(note, nn, "no GPU: cpu ranks spread round-robin over the %d NUMA nodes, each bound to one", nnodes);
        } else {
            snprintf(mpirun, mn, "--map-by core --bind-to core");
            snprintf(srun, sn, "--cpu-bind=cores");
            snprintf(note, nn, "no GPU and one NUMA node: bind ranks to cores");
        }
        return;
    }
    int known = 0, distinct = 0, seen[256] = {0};
    for (int k = 0; k < n; k++)
        if (numa[k] >= 0) {
            known++;
            if (numa[k] < 256 && !seen[numa[k]]++) distinct++;
        }
    if (known < n || nnodes <= 1 || distinct <= 1) {
        snprintf(mpirun, mn, "--map-by core --bind-to core");
        snprintf(srun, sn, "--cpu-bind=cores");
        snprintf(note, nn, "%s", known < n ? "the NUMA node of some GPU is unknown: bind ranks to cores"
                                 : nnodes <= 1 ? "one NUMA node: nothing to gain from NUMA binding; bind ranks to cores"
                                               : "every GPU is nearest the same NUMA node: bind ranks to its cores");
        return;
    }
    /* srun maps local task k to a locality domain by list: exact for any order */
    size_t L = (size_t)snprintf(srun, sn, "--ntasks-per-node=%d --cpu-bind=map_ldom:", n);
    for (int k = 0; k < n && L < sn; k++) L += (size_t)snprintf(srun + L, sn - L, "%s%d", k ? "," : "", numa[k]);
    size_t L2 = L;
    if (L2 < sn) L2 += (size_t)snprintf(srun + L2, sn - L2, " --mem-bind=map_ldom:");
    for (int k = 0; k < n && L2 < sn; k++) L2 += (size_t)snprintf(srun + L2, sn - L2, "%s%d", k ? "," : "", numa[k]);
    /* Open MPI's ppr:G:numa fills NUMA nodes in hwloc's order, G ranks each:
     * right when the GPUs come grouped by node in that order, G per node,
     * on every node from the first */
    int g = 0, ok = 1, k = 0;
    for (int ni = 0; ni < nnodes && k < n && ok; ni++) {
        int c = 0;
        while (k < n && numa[k] == nodes[ni]) c++, k++;
        if (!g) g = c;
        if (c != g) ok = 0;
    }
    if (k < n || g == 0) ok = 0;
    if (ok) {
        snprintf(mpirun, mn, "-np %d --map-by ppr:%d:numa --bind-to numa", n, g);
        snprintf(note, nn, "GPUs come %d per NUMA node in node order: rank k lands on GPU k's node", g);
    } else {
        snprintf(mpirun, mn, "-np %d --bind-to none plumb train --bind numa ...", n);
        snprintf(note, nn, "GPUs are not %s per NUMA node in node order, which mpirun's mappers cannot follow: let each "
                           "rank bind itself to its GPU's node (plumb train --bind numa), or use srun's list",
                 "evenly spread");
    }
}

static const char *link_cell(const struct gpu_topo *gt, const struct hostinfo *h, int have_h, int i, int j, char *buf,
                             size_t n)
{
    if (i == j) return "X";
    if (gt->kind[i][j] == GPU_LINK_NVLINK || gt->kind[i][j] == GPU_LINK_NVSWITCH) {
        snprintf(buf, n, "NV%d", gt->links[i][j]);
        return buf;
    }
    if (gt->kind[i][j] == GPU_LINK_XGMI) {
        if (gt->hops[i][j] > 1) snprintf(buf, n, "XGMI%d", gt->hops[i][j]);
        else snprintf(buf, n, "XGMI");
        return buf;
    }
    enum hostinfo_path p;
    plumb_err e = {0};
    if (!have_h || hostinfo_pci_path(h, gt->gpu[i].bus_id, gt->gpu[j].bus_id, &p, &e)) return "?";
    return hostinfo_path_name(p);
}

int topology_print(FILE *f, const char *xml, plumb_err *e)
{
    struct hostinfo *h = NULL;
    plumb_err he = {0};
    /* an XML file is a regular file of bounded size: a FIFO blocked hwloc's reader for ever, and '' printed this
     * machine's topology as if it were the file's */
    if (xml && !*xml) return err_set(e, PLUMB_EUSAGE, "--topology-xml '': expected an hwloc XML file or synthetic:DESCRIPTION");
    if (xml && strncmp(xml, "synthetic:", 10) && file_check_input(xml, TOPOLOGY_XML_CAP, &he))
        return err_set(e, PLUMB_EUSAGE, "--topology-xml: %s", he.msg);
    int have_h = hostinfo_open(xml, HOSTINFO_PCI, &h, &he) == PLUMB_OK;
    if (!have_h && xml) return err_set(e, PLUMB_EUSAGE, "--topology-xml: %s", he.msg);
    struct gpu_topo *gt = calloc(1, sizeof *gt);
    struct hostinfo_pci_dev *nics = calloc(64, sizeof *nics), *disp = calloc(64, sizeof *disp);
    if (!gt || !nics || !disp) {
        free(gt), free(nics), free(disp);
        hostinfo_close(h);
        return err_set(e, PLUMB_ENOMEM, "topology: out of memory");
    }
    fprintf(f, "# plumb comm --topology: %s\n", xml ? xml : "this machine");
    if (have_h) {
        const char *model = hostinfo_cpu_model(h);
        fprintf(f, "host: %d package%s, %d NUMA node%s, %d cores, %d hardware threads%s%s\n", hostinfo_packages(h),
                hostinfo_packages(h) == 1 ? "" : "s", hostinfo_numa_nodes(h), hostinfo_numa_nodes(h) == 1 ? "" : "s",
                hostinfo_cores(h), hostinfo_pus(h), *model ? "; " : "", model);
        for (int i = 0; i < hostinfo_numa_nodes(h); i++) {
            int node = hostinfo_numa_os_index(h, i);
            char cpus[256] = "?";
            plumb_err ce = {0};
            hostinfo_numa_cpus(h, node, cpus, sizeof cpus, &ce);
            fprintf(f, "NUMA node %d: CPUs %s, %.1f GiB\n", node, cpus, (double)hostinfo_numa_memory(h, node) / (1 << 30));
        }
    } else {
        fprintf(f, "host: hwloc could not read this machine (%s)\n", he.msg);
    }
    /* the GPUs: the vendor library's list, else the PCI tree's */
    plumb_err ge = {0};
    int nics_n = 0, disp_n = 0;
    if (have_h) {
        plumb_err le = {0};
        hostinfo_pci_list(h, 0x02, nics, 64, &nics_n, &le);
        if (nics_n > 64) nics_n = 64;
    }
    if (gpu_topo_read(gt, &ge) == PLUMB_OK) {
        fprintf(f, "GPUs: %d from %s\n", gt->n, gt->source);
    } else if (have_h) {
        plumb_err le = {0};
        hostinfo_pci_list(h, 0x03, disp, 64, &disp_n, &le);
        for (int i = 0; i < disp_n && i < 64 && gt->n < GPU_TOPO_MAX; i++) {
            if (disp[i].vendor_id != 0x10de && disp[i].vendor_id != 0x1002) continue;
            struct gpu_topo_gpu *g = &gt->gpu[gt->n++];
            snprintf(g->bus_id, sizeof g->bus_id, "%s", disp[i].bus_id);
            snprintf(g->name, sizeof g->name, "%s", disp[i].name);
            g->nvlinks_up = -1;
        }
        fprintf(f, "GPUs: %d from the PCI tree (no link facts: %s)\n", gt->n, ge.msg);
    } else {
        fprintf(f, "GPUs: none found (%s)\n", ge.msg);
    }
    int *numa = calloc((size_t)(gt->n ? gt->n : 1), sizeof *numa);
    if (!numa) {
        free(gt), free(nics), free(disp);
        hostinfo_close(h);
        return err_set(e, PLUMB_ENOMEM, "topology: out of memory");
    }
    if (gt->n) fprintf(f, "%-4s %-17s %-5s %-12s %-40s %s\n", "GPU", "PCI bus", "NUMA", "CPUs", "nearest NIC", "name");
    for (int i = 0; i < gt->n; i++) {
        struct gpu_topo_gpu *g = &gt->gpu[i];
        char cpus[256] = "-", nic[160] = "-";
        numa[i] = -1;
        plumb_err le = {0};
        if (!have_h || hostinfo_pci_locality(h, g->bus_id, &numa[i], cpus, sizeof cpus, &le)) {
            snprintf(cpus, sizeof cpus, "-");
            numa[i] = -1;
        }
        int best = -1;
        enum hostinfo_path bp = HOSTINFO_PATH_SYS;
        for (int k = 0; k < nics_n; k++) {
            enum hostinfo_path p;
            plumb_err pe = {0};
            if (hostinfo_pci_path(h, g->bus_id, nics[k].bus_id, &p, &pe)) continue;
            if (best < 0 || p < bp) best = k, bp = p;
        }
        if (best >= 0)
            snprintf(nic, sizeof nic, "%s %s %s", nics[best].osdev[0] ? nics[best].osdev : "(no OS device)",
                     nics[best].bus_id, hostinfo_path_name(bp));
        char nn[8];
        snprintf(nn, sizeof nn, "%d", numa[i]);
        fprintf(f, "%-4d %-17s %-5s %-12s %-40s %s", i, g->bus_id, numa[i] >= 0 ? nn : "-", cpus, nic, g->name);
        if (g->nvlinks_up >= 0)
            fprintf(f, " (NVLinks up: %d%s)", g->nvlinks_up,
                    g->nvlinks_switch ? (g->nvlinks_switch == g->nvlinks_up ? ", all to NVSwitch" : ", some to NVSwitch") : "");
        fprintf(f, "\n");
    }
    if (gt->n > 1) {
        fprintf(f, "links:\n%-6s", "");
        for (int j = 0; j < gt->n; j++) {
            char nm[16];
            snprintf(nm, sizeof nm, "GPU%d", j);
            fprintf(f, " %-6s", nm);
        }
        fprintf(f, "\n");
        for (int i = 0; i < gt->n; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "GPU%d", i);
            fprintf(f, "%-6s", nm);
            for (int j = 0; j < gt->n; j++) {
                char buf[16];
                fprintf(f, " %-6s", link_cell(gt, h, have_h, i, j, buf, sizeof buf));
            }
            fprintf(f, "\n");
        }
        fprintf(f, "legend: NV# # NVLinks (through the NVSwitch fabric where the GPUs say so); XGMI xGMI (XGMI# # hops); "
                   "PCIe: PIX %s, PXB %s, PHB %s, NODE %s, SYS %s\n",
                hostinfo_path_desc(HOSTINFO_PATH_PIX), hostinfo_path_desc(HOSTINFO_PATH_PXB),
                hostinfo_path_desc(HOSTINFO_PATH_PHB), hostinfo_path_desc(HOSTINFO_PATH_NODE),
                hostinfo_path_desc(HOSTINFO_PATH_SYS));
    }
    if (nics_n) {
        fprintf(f, "NICs:");
        for (int k = 0; k < nics_n; k++)
            fprintf(f, "%s %s %s (%s, NUMA %d)", k ? ";" : "", nics[k].osdev[0] ? nics[k].osdev : "-", nics[k].bus_id,
                    nics[k].class_id == 0x0207 ? "InfiniBand" : nics[k].class_id == 0x0200 ? "Ethernet" : "network",
                    nics[k].numa);
        fprintf(f, "\n");
    }
    int nodes[256], nnodes = have_h ? hostinfo_numa_nodes(h) : 0;
    if (nnodes > 256) nnodes = 256;
    for (int i = 0; i < nnodes; i++) nodes[i] = hostinfo_numa_os_index(h, i);
    char mp[512], sr[512], note[512];
    topology_advice(numa, gt->n, nodes, nnodes, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    fprintf(f, "binding (%s):\n  mpirun %s%s\n  srun %s <command>\n", note, mp, strstr(mp, "plumb train") ? "" : " <command>",
            sr);
    if (gt->n && !strcmp(gt->vendor, "nvidia"))
        fprintf(f, "  with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that CUDA numbers the GPUs in the order above\n");
    free(numa);
    free(gt), free(nics), free(disp);
    hostinfo_close(h);
    return PLUMB_OK;
}
