/* Host topology over hwloc 2: see hostinfo.h. */
#include "core/hostinfo.h"
#include <hwloc.h>
#include <errno.h>
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

/* ---- PCI paths and devices ---- */

const char *hostinfo_path_name(enum hostinfo_path p)
{
    static const char *n[] = {"X", "PIX", "PXB", "PHB", "NODE", "SYS"};
    return (unsigned)p <= HOSTINFO_PATH_SYS ? n[p] : "?";
}

const char *hostinfo_path_desc(enum hostinfo_path p)
{
    static const char *d[] = {"the same device", "behind the same PCIe switch (at most one bridge apart)",
                              "several PCIe bridges apart, no host bridge", "through a PCIe host bridge",
                              "between PCIe host bridges of one NUMA node", "across NUMA nodes (socket interconnect)"};
    return (unsigned)p <= HOSTINFO_PATH_SYS ? d[p] : "?";
}

static int parse_busid(const char *bus_id, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    char extra;
    *dom = 0;
    if (!bus_id || bus_id[strspn(bus_id, "0123456789abcdefABCDEF:.")]) return -1;
    if (sscanf(bus_id, "%x:%x:%x.%x%c", dom, bus, dev, fn, &extra) == 4) return 0;
    *dom = 0;
    return sscanf(bus_id, "%x:%x.%x%c", bus, dev, fn, &extra) == 3 ? 0 : -1;
}

static int find_pci(const struct hostinfo *h, const char *bus_id, hwloc_obj_t *out, plumb_err *e)
{
    unsigned dom, bus, dev, fn;
    if (parse_busid(bus_id, &dom, &bus, &dev, &fn))
        return err_set(e, PLUMB_EUSAGE, "hostinfo: PCI bus id '%s' (expected [domain:]bus:device.function, hex)",
                       bus_id ? bus_id : "(null)");
    if (!h) return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: no topology");
    if (!h->pci) return err_set(e, PLUMB_EINTERNAL, "hostinfo: topology opened without HOSTINFO_PCI");
    *out = hwloc_get_pcidev_by_busid(h->topo, dom, bus, dev, fn);
    if (!*out)
        return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: no PCI device %04x:%02x:%02x.%x in the topology", dom, bus, dev, fn);
    return PLUMB_OK;
}

static int is_host_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

static int nearest_numa(const struct hostinfo *h, hwloc_obj_t pci)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h->topo, pci);
    if (!anc) return -1;
    struct hwloc_location loc = {.type = HWLOC_LOCATION_TYPE_OBJECT, .location = {.object = anc}};
    hwloc_obj_t nodes[64];
    unsigned nr = 64;
    if (hwloc_get_local_numanode_objs(h->topo, &loc, &nr, nodes, 0) || nr == 0) {
        nr = 64;
        if (hwloc_get_local_numanode_objs(h->topo, &loc, &nr, nodes, HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY)) nr = 0;
    }
    return nr > 0 ? (int)nodes[0]->os_index : -1;
}

int hostinfo_pci_path(const struct hostinfo *h, const char *a, const char *b, enum hostinfo_path *p, plumb_err *e)
{
    *p = HOSTINFO_PATH_SYS;
    hwloc_obj_t oa, ob;
    int rc = find_pci(h, a, &oa, e);
    if (!rc) rc = find_pci(h, b, &ob, e);
    if (rc) return rc;
    if (oa == ob) {
        *p = HOSTINFO_PATH_SELF;
        return PLUMB_OK;
    }
    /* the lowest common ancestor, by parent pointers (IO objects have no
     * ordinary depth), and how many bridges each side climbs below it */
    int da = 0, db = 0;
    hwloc_obj_t common = NULL;
    for (hwloc_obj_t x = oa->parent; x && !common; x = x->parent, da++) {
        int k = 0;
        for (hwloc_obj_t y = ob->parent; y; y = y->parent, k++)
            if (y == x) {
                common = x;
                db = k;
                break;
            }
        if (common) break;
    }
    if (!common) return err_set(e, PLUMB_EINTERNAL, "hostinfo: %s and %s have no common ancestor", a, b);
    if (common->type == HWLOC_OBJ_BRIDGE) {
        if (is_host_bridge(common)) *p = HOSTINFO_PATH_PHB;
        else *p = da <= 1 && db <= 1 ? HOSTINFO_PATH_PIX : HOSTINFO_PATH_PXB;
        return PLUMB_OK;
    }
    int na = nearest_numa(h, oa), nb = nearest_numa(h, ob);
    *p = na >= 0 && na == nb ? HOSTINFO_PATH_NODE : HOSTINFO_PATH_SYS;
    return PLUMB_OK;
}

int hostinfo_pci_list(const struct hostinfo *h, unsigned class_base, struct hostinfo_pci_dev *out, int max, int *n,
                      plumb_err *e)
{
    *n = 0;
    if (!h) return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: no topology");
    if (!h->pci) return err_set(e, PLUMB_EINTERNAL, "hostinfo: topology opened without HOSTINFO_PCI");
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_pcidev(h->topo, o))) {
        const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
        if ((unsigned)(a->class_id >> 8) != class_base) continue;
        if (*n < max) {
            struct hostinfo_pci_dev *d = &out[*n];
            memset(d, 0, sizeof *d);
            snprintf(d->bus_id, sizeof d->bus_id, "%04x:%02x:%02x.%x", (unsigned)a->domain, (unsigned)a->bus,
                     (unsigned)a->dev, (unsigned)a->func);
            d->class_id = a->class_id;
            d->vendor_id = a->vendor_id;
            d->device_id = a->device_id;
            const char *v = hwloc_obj_get_info_by_name(o, "PCIVendor"), *m = hwloc_obj_get_info_by_name(o, "PCIDevice");
            snprintf(d->name, sizeof d->name, "%s%s%s", v ? v : "", v && m ? " " : "", m ? m : "");
            size_t L = 0;
            for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
                if (c->type == HWLOC_OBJ_OS_DEVICE && c->name && L < sizeof d->osdev)
                    L += (size_t)snprintf(d->osdev + L, sizeof d->osdev - L, "%s%s", L ? "," : "", c->name);
            d->numa = nearest_numa(h, o);
        }
        (*n)++;
    }
    return PLUMB_OK;
}

int hostinfo_bind_numa(const struct hostinfo *h, int node, plumb_err *e)
{
    if (!h || !h->this_system) return err_set(e, PLUMB_EINTERNAL, "hostinfo: binding needs this machine's topology");
    hwloc_obj_t o = numa_by_os(h, node);
    if (!o) return err_set(e, PLUMB_EUSAGE, "hostinfo: no NUMA node %d on this machine (it has %d)", node, hostinfo_numa_nodes(h));
    char cpus[256] = "";
    hwloc_bitmap_list_snprintf(cpus, sizeof cpus, o->cpuset);
    if (hwloc_set_cpubind(h->topo, o->cpuset, HWLOC_CPUBIND_PROCESS))
        return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: binding to the CPUs of NUMA node %d (%s) refused: %s", node, cpus,
                       strerror(errno));
    /* Linux binds memory per thread (set_mempolicy); threads started later
     * inherit the caller's policy, so the caller binds before it starts them */
    if (hwloc_set_membind(h->topo, o->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET))
        return err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: binding memory to NUMA node %d refused: %s", node, strerror(errno));
    return PLUMB_OK;
}

int hostinfo_mem_binding(const struct hostinfo *h, int *node, char *policy, size_t n, plumb_err *e)
{
    *node = -1;
    if (policy && n) policy[0] = 0;
    if (!h || !h->this_system) return err_set(e, PLUMB_EINTERNAL, "hostinfo: memory binding is a fact of this machine only");
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set) return err_set(e, PLUMB_ENOMEM, "hostinfo: out of memory");
    hwloc_membind_policy_t pol;
    int rc = PLUMB_OK;
    if (hwloc_get_membind(h->topo, set, &pol, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET)) {
        rc = err_set(e, PLUMB_EUNSUPPORTED, "hostinfo: hwloc_get_membind failed: %s", strerror(errno));
    } else {
        const char *pn = pol == HWLOC_MEMBIND_BIND ? "bind" : pol == HWLOC_MEMBIND_DEFAULT ? "default"
                         : pol == HWLOC_MEMBIND_FIRSTTOUCH ? "firsttouch" : pol == HWLOC_MEMBIND_INTERLEAVE ? "interleave"
                         : pol == HWLOC_MEMBIND_NEXTTOUCH ? "nexttouch" : "mixed";
        if (policy) snprintf(policy, n, "%s", pn);
        if (pol == HWLOC_MEMBIND_BIND && hwloc_bitmap_weight(set) == 1) *node = hwloc_bitmap_first(set);
    }
    hwloc_bitmap_free(set);
    return rc;
}

double hostinfo_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024.0;
}
