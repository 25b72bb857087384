/* Host topology over hwloc 2: see hostinfo.h. */
#include "core/hostinfo.h"
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hostinfo {
    hwloc_topology_t topo;
    int this_system;
    int pci; /* opened with HOSTINFO_PCI */
    char model[256];
};

/* The model string hwloc found: x86 and most arm64 Linux put it on the
 * package ("CPUModel"); some put it only on the machine. */
static void find_model(struct hostinfo *h)
{
    h->model[0] = '\0';
    int np = hwloc_get_nbobjs_by_type(h->topo, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i <= np && !h->model[0]; i++) {
        hwloc_obj_t o = i < np ? hwloc_get_obj_by_type(h->topo, HWLOC_OBJ_PACKAGE, (unsigned)i)
                               : hwloc_get_root_obj(h->topo);
        const char *m = o ? hwloc_obj_get_info_by_name(o, "CPUModel") : NULL;
        if (m && *m) snprintf(h->model, sizeof h->model, "%s", m);
    }
}

int hostinfo_open(const char *source, unsigned flags, struct hostinfo **out, plumb_err *e)
{
    *out = NULL;
    struct hostinfo *h = calloc(1, sizeof *h);
    if (!h) return err_set(e, PLUMB_ENOMEM, "hostinfo: out of memory");
    if (hwloc_topology_init(&h->topo)) {
        free(h);
        return err_set(e, PLUMB_EINTERNAL, "hostinfo: hwloc_topology_init failed");
    }
    /* hwloc's GPU components (OpenCL, GL, and CUDA/NVML/RSMI/Level Zero where
     * a build has them) would initialise the GPU drivers in every process
     * that asks for its CPU model: plumb reads GPUs through its own backends.
     * (Names this build lacks are refused: nothing to disable then.) */
    static const char *const gpu_components[] = {"opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"};
    for (size_t i = 0; i < sizeof gpu_components / sizeof gpu_components[0]; i++)
        (void)hwloc_topology_set_components(h->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, gpu_components[i]);
    if (flags & HOSTINFO_PCI) {
        /* PCI devices (GPUs, NICs) and the bridges to them, not every function of every chip */
        hwloc_topology_set_io_types_filter(h->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    } else {
        (void)hwloc_topology_set_components(h->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    }
    int rc = 0;
    const char *what = "this machine";
    if (source && !strncmp(source, "synthetic:", 10)) {
        what = source;
        rc = hwloc_topology_set_synthetic(h->topo, source + 10);
    } else if (source && *source) {
        what = source;
        rc = hwloc_topology_set_xml(h->topo, source);
    } else {
        h->this_system = 1;
    }
    if (!rc) rc = hwloc_topology_load(h->topo);
    if (rc) {
        int mine = h->this_system;
        hwloc_topology_destroy(h->topo);
        free(h);
        return err_set(e, mine ? PLUMB_EINTERNAL : PLUMB_EUSAGE,
                       "hostinfo: hwloc cannot load the topology of %s (expected an hwloc XML file or "
                       "synthetic:DESCRIPTION)", what);
    }
    find_model(h);
    h->pci = (flags & HOSTINFO_PCI) != 0;
    *out = h;
    return PLUMB_OK;
}

void hostinfo_close(struct hostinfo *h)
{
    if (!h) return;
    hwloc_topology_destroy(h->topo);
    free(h);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct hostinfo *g_this;
static void load_this(void)
{
    plumb_err e = {0};
    if (hostinfo_open(NULL, 0, &g_this, &e)) g_this = NULL;
}

struct hostinfo *hostinfo_this(void)
{
    pthread_once(&g_once, load_this);
    return g_this;
}

const char *hostinfo_cpu_model(const struct hostinfo *h) { return h ? h->model : ""; }

static int count(const struct hostinfo *h, hwloc_obj_type_t t)
{
    int n = h ? hwloc_get_nbobjs_by_type(h->topo, t) : 0;
    return n > 0 ? n : 0;
}

int hostinfo_packages(const struct hostinfo *h) { return count(h, HWLOC_OBJ_PACKAGE); }
int hostinfo_cores(const struct hostinfo *h) { return count(h, HWLOC_OBJ_CORE); }
int hostinfo_pus(const struct hostinfo *h) { return count(h, HWLOC_OBJ_PU); }
int hostinfo_numa_nodes(const struct hostinfo *h) { return count(h, HWLOC_OBJ_NUMANODE); }

int hostinfo_numa_os_index(const struct hostinfo *h, int i)
{
    hwloc_obj_t o = h && i >= 0 ? hwloc_get_obj_by_type(h->topo, HWLOC_OBJ_NUMANODE, (unsigned)i) : NULL;
    return o ? (int)o->os_index : -1;
}

static hwloc_obj_t numa_by_os(const struct hostinfo *h, int node)
{
    if (!h || node < 0) return NULL;
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_obj_by_type(h->topo, HWLOC_OBJ_NUMANODE, o)))
        if ((int)o->os_index == node) return o;
    return NULL;
}

/* a cpuset as a cpulist; PLUMB_EINTERNAL when it does not fit */
static int cpulist(hwloc_const_bitmap_t set, char *buf, size_t n, plumb_err *e)
{
    int len = hwloc_bitmap_list_snprintf(buf, n, set);
    if (len < 0 || (size_t)len >= n) return err_set(e, PLUMB_EINTERNAL, "hostinfo: cpu list longer than %zu bytes", n);
    return PLUMB_OK;
}

int hostinfo_numa_cpus(const struct hostinfo *h, int node, char *cpus, size_t n, plumb_err *e)
{
    hwloc_obj_t o = numa_by_os(h, node);
    if (!o) return err_set(e, PLUMB_EUSAGE, "hostinfo: no NUMA node %d (this host has %d)", node, hostinfo_numa_nodes(h));
    return cpulist(o->cpuset, cpus, n, e);
}

uint64_t hostinfo_numa_memory(const struct hostinfo *h, int node)
{
    hwloc_obj_t o = numa_by_os(h, node);
    return o && o->attr ? o->attr->numanode.local_memory : 0;
}

int hostinfo_pci_locality(const struct hostinfo *h, const char *bus_id, int *node, char *cpus, size_t n,
                          plumb_err *e)
{
    *node = -1;
    unsigned dom = 0, bus, dev, fn;
    char extra;
    /* hex digits, ':' and '.' only (sscanf's %x would also take "0x" prefixes) */
    if (!bus_id || bus_id[strspn(bus_id, "0123456789abcdefABCDEF:.")] ||
        (sscanf(bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &extra) != 4 &&
                    (dom = 0, sscanf(bus_id, "%x:%x.%x%c", &bus, &dev, &fn, &extra) != 3)))
        return err_set(e, PLUMB_EUSAGE, "hostinfo: PCI bus id '%s' (expected [domain:]bus:device.function, hex)",
                       bus_id ? bus_id : "(null)");
    if (!h) return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: no topology");
    if (!h->pci) return err_set(e, PLUMB_EINTERNAL, "hostinfo: topology opened without HOSTINFO_PCI");
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(h->topo, dom, bus, dev, fn);
    if (!pci)
        return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: no PCI device %04x:%02x:%02x.%x in the topology", dom, bus, dev,
                       fn);
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h->topo, pci);
    if (!anc) return err_set(e, PLUMB_EINTERNAL, "hostinfo: PCI device %s has no CPU-side parent", bus_id);
    /* the NUMA node(s) whose locality is the device's parent, else the
     * closest larger one (a device hanging off the machine) */
    struct hwloc_location loc = {.type = HWLOC_LOCATION_TYPE_OBJECT, .location = {.object = anc}};
    hwloc_obj_t nodes[64];
    unsigned nr = 64;
    if (hwloc_get_local_numanode_objs(h->topo, &loc, &nr, nodes, 0) || nr == 0) {
        nr = 64;
        if (hwloc_get_local_numanode_objs(h->topo, &loc, &nr, nodes, HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY)) nr = 0;
    }
    if (nr > 0) *node = (int)nodes[0]->os_index;
    return cpulist(anc->cpuset, cpus, n, e);
}

int hostinfo_bound_cpus(const struct hostinfo *h, char *cpus, size_t n, int *count_out, plumb_err *e)
{
    if (count_out) *count_out = 0;
    if (!h || !h->this_system) return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: binding is a fact of this machine only");
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set) return err_set(e, PLUMB_ENOMEM, "hostinfo: out of memory");
    int rc = PLUMB_OK;
    if (hwloc_get_cpubind(h->topo, set, HWLOC_CPUBIND_PROCESS)) rc = err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: hwloc_get_cpubind failed");
    if (!rc && cpus) rc = cpulist(set, cpus, n, e);
    if (!rc && count_out) *count_out = hwloc_bitmap_weight(set);
    hwloc_bitmap_free(set);
    return rc;
}
