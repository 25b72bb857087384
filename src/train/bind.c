/* Rank binding (bind.h). */
#include "train/bind.h"
#include "core/hostinfo.h"
#include "core/log.h"
#include "dev/dev.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bind_locate(const char *source, const char *gpu_bus, int local_rank, int *node, char *why, size_t n, plumb_err *e)
{
    *node = -1;
    struct hostinfo *h = NULL;
    int gpu = gpu_bus && *gpu_bus;
    int rc = hostinfo_open(source, gpu ? HOSTINFO_PCI : 0, &h, e);
    if (rc) return rc;
    if (gpu) {
        char cpus[256];
        rc = hostinfo_pci_locality(h, gpu_bus, node, cpus, sizeof cpus, e);
        if (rc == PLUMB_EUNSUPPORTED)
            rc = err_set(e, PLUMB_EUSAGE, "--bind numa: GPU %s is not in the PCI tree of %s", gpu_bus,
                         source ? source : "this machine");
        else if (!rc && *node < 0)
            rc = err_set(e, PLUMB_EUSAGE, "--bind numa: %s shows no NUMA node near GPU %s", source ? source : "this machine",
                         gpu_bus);
        if (!rc) snprintf(why, n, "the NUMA node nearest GPU %s", gpu_bus);
    } else {
        int nn = hostinfo_numa_nodes(h);
        if (nn < 1) {
            rc = err_set(e, PLUMB_EUNSUPPORTED, "--bind numa: %s shows no NUMA node", source ? source : "this machine");
        } else {
            *node = hostinfo_numa_os_index(h, local_rank % nn);
            snprintf(why, n, "cpu rank: local rank %d of the host's ranks over %d NUMA node%s", local_rank, nn,
                     nn == 1 ? "" : "s");
        }
    }
    hostinfo_close(h);
    return rc;
}

/* the GPU this local rank trains on, as the trainer picks it */
static int gpu_bus_of(const char *device, int local_rank, int local_world, char *bus, size_t n, plumb_err *e)
{
    char spec[32];
    if (!strchr(device, ':') && local_world > 1) {
        int rc = dev_spec_for_local_rank(device, local_rank, local_world, spec, e);
        if (rc) return rc;
    } else {
        snprintf(spec, sizeof spec, "%s", device);
    }
    struct dev *d = NULL;
    int rc = dev_open(spec, &d, e);
    if (rc) return err_wrap(e, "--bind numa");
    snprintf(bus, n, "%s", d->info.pci_bus_id);
    dev_close(d);
    if (!*bus) return err_set(e, PLUMB_EUNSUPPORTED, "--bind numa: device %s does not say its PCI bus id", spec);
    return PLUMB_OK;
}

int bind_apply(const char *policy, const char *device, int local_rank, int local_world, struct bind_result *out,
               plumb_err *e)
{
    memset(out, 0, sizeof *out);
    out->node = out->mem_node = -1;
    snprintf(out->policy, sizeof out->policy, "%s", policy ? policy : "none");
    struct hostinfo *h = hostinfo_this();
    int rc = PLUMB_OK;
    if (!strcmp(out->policy, "numa")) {
        if (!h) return err_set(e, PLUMB_EUNSUPPORTED, "--bind numa: hwloc cannot read this machine's topology");
        int gpu = strncmp(device, "cpu", 3) != 0;
        if (gpu && (rc = gpu_bus_of(device, local_rank, local_world, out->gpu_bus, sizeof out->gpu_bus, e))) return rc;
        const char *src = getenv("PLUMB_BIND_TOPOLOGY");
        if ((rc = bind_locate(src && *src ? src : NULL, out->gpu_bus, local_rank, &out->node, out->why, sizeof out->why, e)))
            return rc;
        if ((rc = hostinfo_bind_numa(h, out->node, e))) return err_wrap(e, "--bind numa");
    } else if (strcmp(out->policy, "none")) {
        return err_set(e, PLUMB_EUSAGE, "--bind: '%s' is not none or numa", out->policy);
    } else {
        snprintf(out->why, sizeof out->why, "left to the launcher");
    }
    /* what holds now, read back */
    plumb_err re = {0};
    int count = 0;
    if (hostinfo_bound_cpus(h, out->cpus, sizeof out->cpus, &count, &re)) snprintf(out->cpus, sizeof out->cpus, "?");
    if (hostinfo_mem_binding(h, &out->mem_node, out->mem_policy, sizeof out->mem_policy, &re))
        snprintf(out->mem_policy, sizeof out->mem_policy, "?");
    if (!strcmp(out->policy, "numa"))
        log_info("bind: NUMA node %d (%s): CPUs %s, memory %s%s", out->node, out->why, out->cpus, out->mem_policy,
                 out->mem_node >= 0 ? " to that node" : "");
    return PLUMB_OK;
}

json_t *bind_json(const struct bind_result *b)
{
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(b->policy));
    json_object_set_new(o, "why", json_string(b->why));
    if (b->gpu_bus[0]) json_object_set_new(o, "gpu_pci_bus", json_string(b->gpu_bus));
    json_object_set_new(o, "numa_node", b->node >= 0 ? json_integer(b->node) : json_null());
    json_object_set_new(o, "cpus", json_string(b->cpus));
    json_object_set_new(o, "mem_policy", json_string(b->mem_policy));
    json_object_set_new(o, "mem_node", b->mem_node >= 0 ? json_integer(b->mem_node) : json_null());
    return o;
}
