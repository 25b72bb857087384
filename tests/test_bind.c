/* Rank binding (train/bind.h): where a rank goes (its GPU's NUMA node in an
 * hwloc topology with GPUs at known places, tests/topology-4gpu.xml; cpu
 * ranks spread over the nodes) and what binding does to this process, read
 * back with sched_getaffinity and get_mempolicy rather than through hwloc.
 * The binding runs in a child process so the test binary keeps its own. */
#include "test.h"
#include "core/hostinfo.h"
#include "train/bind.h"
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *fixture(void)
{
    static char p[PATH_MAX];
    const char *root = getenv("PLUMB_ROOT");
    snprintf(p, sizeof p, "%s/tests/topology-4gpu.xml", root ? root : ".");
    return p;
}

TEST(bind_locate_gpu_numa_node)
{
    plumb_err e = {0};
    int node;
    char why[160];
    REQUIRE(bind_locate(fixture(), "0000:12:00.0", 0, &node, why, sizeof why, &e) == 0);
    CHECK_EQ_INT(node, 0);
    CHECK_STREQ(why, "the NUMA node nearest GPU 0000:12:00.0");
    /* NVML's spelling of the same kind of id */
    REQUIRE(bind_locate(fixture(), "00000000:31:00.0", 0, &node, why, sizeof why, &e) == 0);
    CHECK_EQ_INT(node, 1);
    /* cpu ranks: local rank mod nodes */
    for (int lr = 0; lr < 4; lr++) {
        REQUIRE(bind_locate(fixture(), "", lr, &node, why, sizeof why, &e) == 0);
        CHECK_EQ_INT(node, lr % 2);
    }
    CHECK_MSG(strstr(why, "local rank 3 of the host's ranks over 2 NUMA nodes"), "%s", why);
    CHECK_EQ_INT(bind_locate(fixture(), "0000:77:00.0", 0, &node, why, sizeof why, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--bind numa: GPU 0000:77:00.0 is not in the PCI tree of"), "%s", e.msg);
    CHECK_EQ_INT(bind_locate(fixture(), "12-00", 0, &node, why, sizeof why, &e), PLUMB_EUSAGE);
}

/* linux/mempolicy.h: MPOL_PREFERRED 1, MPOL_BIND 2, MPOL_PREFERRED_MANY 5; the mask names the nodes */
static int mempolicy(unsigned long *mask)
{
    int mode = -1;
    *mask = 0;
    if (syscall(SYS_get_mempolicy, &mode, mask, sizeof *mask * 8, NULL, 0)) return -1;
    return mode;
}

TEST(bind_numa_pins_cpus_and_memory)
{
    struct hostinfo *h = hostinfo_this();
    if (!h) TEST_SKIP("hwloc cannot read this machine");
    int node0 = hostinfo_numa_os_index(h, 0);
    char want[256];
    plumb_err e = {0};
    REQUIRE(hostinfo_numa_cpus(h, node0, want, sizeof want, &e) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct bind_result b;
        plumb_err ce = {0};
        /* local rank = the number of nodes: wraps to node 0 */
        if (bind_apply("numa", "cpu", hostinfo_numa_nodes(h), 1, &b, &ce)) {
            fprintf(stderr, "  bind_apply: %s\n", ce.msg);
            _exit(10);
        }
        if (b.node != node0 || strcmp(b.cpus, want) || strcmp(b.mem_policy, "bind") || b.mem_node != node0) {
            fprintf(stderr, "  bound to node %d cpus %s mem %s/%d, want %d %s bind/%d\n", b.node, b.cpus, b.mem_policy,
                    b.mem_node, node0, want, node0);
            _exit(11);
        }
        /* the kernel's view */
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set)) _exit(12);
        char got[256] = "";
        size_t L = 0;
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &set)) continue;
            int end = c;
            while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) end++;
            L += (size_t)snprintf(got + L, sizeof got - L, "%s%d", L ? "," : "", c);
            if (end > c) L += (size_t)snprintf(got + L, sizeof got - L, "-%d", end);
            c = end;
        }
        if (strcmp(got, want)) {
            fprintf(stderr, "  sched_getaffinity: %s, want %s\n", got, want);
            _exit(13);
        }
        unsigned long mask;
        int mode = mempolicy(&mask);
        /* hwloc's non-strict bind: MPOL_PREFERRED_MANY (5) where the kernel has it, else MPOL_PREFERRED (1) */
        if ((mode != 5 && mode != 1) || mask != 1ul << node0) {
            fprintf(stderr, "  get_mempolicy: mode %d mask %#lx, want 5 or 1 (preferred) %#lx\n", mode, mask, 1ul << node0);
            _exit(14);
        }
        /* a node this machine lacks */
        if (hostinfo_bind_numa(h, 1000, &ce) != PLUMB_EUSAGE || !strstr(ce.msg, "no NUMA node 1000 on this machine")) {
            fprintf(stderr, "  node 1000: %s\n", ce.msg);
            _exit(15);
        }
        json_t *j = bind_json(&b);
        int ok = json_integer_value(json_object_get(j, "numa_node")) == node0 &&
                 !strcmp(json_string_value(json_object_get(j, "policy")), "numa");
        json_decref(j);
        _exit(ok ? 0 : 16);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    /* none: nothing changes, the current binding is reported */
    struct bind_result b;
    REQUIRE(bind_apply("none", "cpu", 0, 1, &b, &e) == 0);
    CHECK(b.node == -1 && b.cpus[0] && strcmp(b.cpus, "?"));
    CHECK_EQ_INT(bind_apply("socket", "cpu", 0, 1, &b, &e), PLUMB_EUSAGE);
}
