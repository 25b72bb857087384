/* core/hostinfo.h over hwloc: a synthetic topology and an XML fixture with
 * PCI devices at known places (tests/topology-2pkg-gpu.xml: a NIC on package
 * 0, a GPU behind a PCIe switch on package 1, an NVMe drive under the
 * machine), then this machine, checked against what Linux's sysfs says. */
#include "test.h"
#include "core/hostinfo.h"
#include <dirent.h>
#include <hwloc.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

/* the fixture in the source tree: PLUMB_ROOT (tests/run.sh), else next to BUILD/.. */
static const char *fixture(char *buf, size_t n)
{
    const char *root = getenv("PLUMB_ROOT");
    if (root && *root) {
        snprintf(buf, n, "%s/tests/topology-2pkg-gpu.xml", root);
        return buf;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(buf, n, "%s/../tests/topology-2pkg-gpu.xml", exe);
    return buf;
}

TEST(hostinfo_synthetic_counts_and_numa_cpus)
{
    plumb_err e = {0};
    struct hostinfo *h;
    REQUIRE(hostinfo_open("synthetic:pack:2 numa:2 core:3 pu:2", 0, &h, &e) == 0);
    CHECK_EQ_INT(hostinfo_packages(h), 2);
    CHECK_EQ_INT(hostinfo_cores(h), 12);
    CHECK_EQ_INT(hostinfo_pus(h), 24);
    CHECK_EQ_INT(hostinfo_numa_nodes(h), 4);
    CHECK_STREQ(hostinfo_cpu_model(h), "");
    char cpus[64];
    static const char *want[] = {"0-5", "6-11", "12-17", "18-23"};
    for (int i = 0; i < 4; i++) {
        int os = hostinfo_numa_os_index(h, i);
        CHECK_EQ_INT(os, i);
        REQUIRE(hostinfo_numa_cpus(h, os, cpus, sizeof cpus, &e) == 0);
        CHECK_STREQ(cpus, want[i]);
        CHECK(hostinfo_numa_memory(h, os) > 0);
    }
    CHECK_EQ_INT(hostinfo_numa_os_index(h, 4), -1);
    CHECK_EQ_INT(hostinfo_numa_cpus(h, 9, cpus, sizeof cpus, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "no NUMA node 9 (this host has 4)") != NULL, "%s", e.msg);
    /* a list that does not fit is an error, not a cut */
    CHECK_EQ_INT(hostinfo_numa_cpus(h, 2, cpus, 4, &e), PLUMB_EINTERNAL);
    /* binding is a fact of this machine only */
    CHECK_EQ_INT(hostinfo_bound_cpus(h, cpus, sizeof cpus, NULL, &e), PLUMB_EUNSUPPORTED);
    hostinfo_close(h);
    CHECK_EQ_INT(hostinfo_open("synthetic:pack:two", 0, &h, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "synthetic:pack:two") != NULL, "%s", e.msg);
    CHECK_EQ_INT(hostinfo_open("/nonexistent/topology.xml", 0, &h, &e), PLUMB_EUSAGE);
}

TEST(hostinfo_pci_locality_from_xml)
{
    char path[PATH_MAX];
    plumb_err e = {0};
    struct hostinfo *h;
    const int rc = hostinfo_open(fixture(path, sizeof path), HOSTINFO_PCI, &h, &e);
    CHECK_MSG(rc == 0, "%s: %s", path, e.msg);
    REQUIRE(rc == 0);
    CHECK_STREQ(hostinfo_cpu_model(h), "Test CPU 9000");
    CHECK_EQ_INT(hostinfo_numa_nodes(h), 2);
    char cpus[64];
    int node = 7;
    /* the GPU behind a switch on package 1, in every spelling of its bus id */
    static const char *gpu[] = {"0000:3b:00.0", "3b:00.0", "00000000:3B:00.0"};
    for (int i = 0; i < 3; i++) {
        node = 7;
        REQUIRE(hostinfo_pci_locality(h, gpu[i], &node, cpus, sizeof cpus, &e) == 0);
        CHECK_EQ_INT(node, 1);
        CHECK_STREQ(cpus, "4-7");
    }
    /* the NIC on package 0 */
    REQUIRE(hostinfo_pci_locality(h, "0000:17:00.0", &node, cpus, sizeof cpus, &e) == 0);
    CHECK_EQ_INT(node, 0);
    CHECK_STREQ(cpus, "0-3");
    /* under the machine: near no node in particular, all CPUs */
    REQUIRE(hostinfo_pci_locality(h, "0000:80:00.0", &node, cpus, sizeof cpus, &e) == 0);
    CHECK_EQ_INT(node, -1);
    CHECK_STREQ(cpus, "0-7");
    CHECK_EQ_INT(hostinfo_pci_locality(h, "0000:99:00.0", &node, cpus, sizeof cpus, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "no PCI device 0000:99:00.0") != NULL, "%s", e.msg);
    CHECK_EQ_INT(hostinfo_pci_locality(h, "gpu0", &node, cpus, sizeof cpus, &e), PLUMB_EUSAGE);
    CHECK_EQ_INT(hostinfo_pci_locality(h, "3b:00.0x", &node, cpus, sizeof cpus, &e), PLUMB_EUSAGE);
    hostinfo_close(h);
}

static int read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* cpulist a is a subset of cpulist b (and equal when the process may use every CPU) */
static int cpus_within(const char *a, const char *b, int exact)
{
    hwloc_bitmap_t x = hwloc_bitmap_alloc(), y = hwloc_bitmap_alloc();
    int ok = x && y && hwloc_bitmap_list_sscanf(x, a) == 0 && hwloc_bitmap_list_sscanf(y, b) == 0 &&
             (exact ? hwloc_bitmap_isequal(x, y) : hwloc_bitmap_isincluded(x, y));
    hwloc_bitmap_free(x), hwloc_bitmap_free(y);
    return ok;
}

TEST(hostinfo_this_machine_agrees_with_sysfs)
{
    struct hostinfo *h = hostinfo_this();
    REQUIRE(h != NULL);
    CHECK(hostinfo_this() == h);
    int pus = hostinfo_pus(h), nodes = hostinfo_numa_nodes(h);
    CHECK(pus >= 1 && hostinfo_cores(h) >= 1 && hostinfo_cores(h) <= pus && nodes >= 1);
    char cpus[4096], sys[4096], path[512];
    int bound = 0;
    plumb_err e = {0};
    REQUIRE(hostinfo_bound_cpus(h, cpus, sizeof cpus, &bound, &e) == 0);
    CHECK(bound >= 1 && bound <= pus);
    int all = bound == pus;
    int checked = 0;
    for (int i = 0; i < nodes; i++) {
        int os = hostinfo_numa_os_index(h, i);
        REQUIRE(hostinfo_numa_cpus(h, os, cpus, sizeof cpus, &e) == 0);
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", os);
        if (!read_text(path, sys, sizeof sys)) continue;
        CHECK_MSG(cpus_within(cpus, sys, all), "node %d: hwloc %s, sysfs %s", os, cpus, sys);
        checked++;
    }
    /* every PCI device hwloc kept: its node and CPUs are what sysfs says */
    struct hostinfo *hp;
    REQUIRE(hostinfo_open(NULL, HOSTINFO_PCI, &hp, &e) == 0);
    int node0 = 0;
    CHECK_EQ_INT(hostinfo_pci_locality(h, "0000:00:00.0", &node0, cpus, sizeof cpus, &e), PLUMB_EINTERNAL); /* no PCI in h */
    DIR *d = opendir("/sys/bus/pci/devices");
    int pci = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        int node = -2;
        if (hostinfo_pci_locality(hp, de->d_name, &node, cpus, sizeof cpus, &e)) continue; /* not kept: unimportant */
        char nn[32], lc[4096];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", de->d_name);
        int sys_node = read_text(path, nn, sizeof nn) ? atoi(nn) : -1;
        if (sys_node >= 0) CHECK_MSG(node == sys_node, "%s: hwloc node %d, sysfs %d", de->d_name, node, sys_node);
        else if (nodes == 1) CHECK_MSG(node == hostinfo_numa_os_index(h, 0), "%s: node %d", de->d_name, node);
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", de->d_name);
        if (read_text(path, lc, sizeof lc)) CHECK_MSG(cpus_within(cpus, lc, all), "%s: hwloc %s, sysfs %s", de->d_name, cpus, lc);
        pci++;
    }
    if (d) closedir(d);
    hostinfo_close(hp);
    fprintf(stderr, "  %s: %d cores, %d threads, %d NUMA node%s (%d checked against sysfs), %d PCI devices checked\n",
            hostinfo_cpu_model(h)[0] ? hostinfo_cpu_model(h) : "(no model)", hostinfo_cores(h), pus, nodes,
            nodes == 1 ? "" : "s", checked, pci);
}
