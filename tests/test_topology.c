/* plumb comm --topology's facts and advice: PCIe paths in nvidia-smi topo's
 * terms and NICs from an hwloc XML topology with devices at known places
 * (tests/topology-4gpu.xml), NVLink pairs and the NVSwitch fabric through the
 * fake NVML, xGMI pairs through the fake ROCm SMI, the whole report, and the
 * mpirun / srun binding advice (accept/topology.h). */
#include "test.h"
#include "accept/topology.h"
#include "core/hostinfo.h"
#include "health/gpu_topo.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static const char *fixture(void)
{
    static char p[PATH_MAX];
    const char *root = getenv("PLUMB_ROOT");
    snprintf(p, sizeof p, "%s/tests/topology-4gpu.xml", root ? root : ".");
    return p;
}

static const char *fake_lib(const char *which)
{
    static char buf[2][PATH_MAX];
    char *b = buf[which[0] == 'r'];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return "";
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(b, PATH_MAX, "%s/tests/libfake_%s.so", exe, which);
    return b;
}

/* the fake, loaded and reset after the environment is set (gpu_topo's own
 * dlopen then gets this instance) */
static void *fake_load(const char *which)
{
    void *h = dlopen(fake_lib(which), RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    char name[64];
    snprintf(name, sizeof name, "fake_%s_reset", which);
    void (*reset)(void) = (void (*)(void))dlsym(h, name);
    if (reset) reset();
    setenv(which[0] == 'n' ? "PLUMB_NVML_LIB" : "PLUMB_RSMI_LIB", fake_lib(which), 1);
    return h;
}

static const char *GPUS[] = {"0000:12:00.0", "0000:13:00.0", "0000:23:00.0", "0000:31:00.0"};

TEST(topology_pci_paths_nvidia_smi_terms)
{
    plumb_err e = {0};
    struct hostinfo *h;
    REQUIRE(hostinfo_open(fixture(), HOSTINFO_PCI, &h, &e) == 0);
    /* GPU0..3, then the NICs ib 14:00.0, eth2 24:00.0, eth1 40:00.0 */
    const char *dev[] = {GPUS[0], GPUS[1], GPUS[2], GPUS[3], "14:00.0", "24:00.0", "40:00.0"};
    static const char *want[7][7] = {
        {"X", "PIX", "NODE", "SYS", "PIX", "NODE", "SYS"},  {"PIX", "X", "NODE", "SYS", "PIX", "NODE", "SYS"},
        {"NODE", "NODE", "X", "SYS", "NODE", "PXB", "SYS"}, {"SYS", "SYS", "SYS", "X", "SYS", "SYS", "PHB"},
        {"PIX", "PIX", "NODE", "SYS", "X", "NODE", "SYS"},  {"NODE", "NODE", "PXB", "SYS", "NODE", "X", "SYS"},
        {"SYS", "SYS", "SYS", "PHB", "SYS", "SYS", "X"},
    };
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j++) {
            enum hostinfo_path p;
            REQUIRE(hostinfo_pci_path(h, dev[i], dev[j], &p, &e) == 0);
            CHECK_MSG(!strcmp(hostinfo_path_name(p), want[i][j]), "%s - %s: %s, want %s", dev[i], dev[j],
                      hostinfo_path_name(p), want[i][j]);
        }
    enum hostinfo_path p;
    CHECK_EQ_INT(hostinfo_pci_path(h, GPUS[0], "0000:99:00.0", &p, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "no PCI device 0000:99:00.0"), "%s", e.msg);
    CHECK_EQ_INT(hostinfo_pci_path(h, "zz", GPUS[0], &p, &e), PLUMB_EUSAGE);
    struct hostinfo_pci_dev d[8];
    int n;
    REQUIRE(hostinfo_pci_list(h, 0x02, d, 8, &n, &e) == 0);
    REQUIRE(n == 3);
    CHECK_STREQ(d[0].bus_id, "0000:14:00.0");
    CHECK(d[0].class_id == 0x0207 && d[0].numa == 0);
    CHECK_STREQ(d[0].osdev, "mlx5_0,ib0");
    CHECK_STREQ(d[0].name, "Mellanox Technologies MT28908 Family [ConnectX-6]");
    CHECK(!strcmp(d[1].osdev, "eth2") && d[1].class_id == 0x0200 && d[1].numa == 0);
    CHECK(!strcmp(d[2].osdev, "eth1") && d[2].numa == 1);
    REQUIRE(hostinfo_pci_list(h, 0x03, d, 2, &n, &e) == 0);
    CHECK_EQ_INT(n, 4); /* counted past max */
    CHECK(d[0].vendor_id == 0x10de && d[0].device_id == 0x2335 && d[0].osdev[0] == 0);
    hostinfo_close(h);
}

TEST(topology_binding_advice)
{
    char mp[256], sr[256], note[256];
    const int two[] = {0, 1}, four[] = {0, 1, 2, 3};
    const int even[] = {0, 0, 1, 1};
    topology_advice(even, 4, two, 2, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK_STREQ(mp, "-np 4 --map-by ppr:2:numa --bind-to numa");
    CHECK_STREQ(sr, "--ntasks-per-node=4 --cpu-bind=map_ldom:0,0,1,1 --mem-bind=map_ldom:0,0,1,1");
    const int uneven[] = {0, 0, 0, 1}, reversed[] = {1, 1, 0, 0}, nps4[] = {0, 0, 2, 2};
    const int *self_bind[] = {uneven, reversed, nps4};
    const int *nodes_of[] = {two, two, four};
    const int nn[] = {2, 2, 4};
    for (int k = 0; k < 3; k++) {
        topology_advice(self_bind[k], 4, nodes_of[k], nn[k], mp, sizeof mp, sr, sizeof sr, note, sizeof note);
        CHECK_MSG(!strcmp(mp, "-np 4 --bind-to none plumb train --bind numa ..."), "case %d: %s", k, mp);
        CHECK_MSG(strstr(sr, "--cpu-bind=map_ldom:") != NULL, "case %d: %s", k, sr);
    }
    CHECK_STREQ(sr, "--ntasks-per-node=4 --cpu-bind=map_ldom:0,0,2,2 --mem-bind=map_ldom:0,0,2,2");
    topology_advice(four, 4, four, 4, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK_STREQ(mp, "-np 4 --map-by ppr:1:numa --bind-to numa");
    const int same[] = {1, 1}, unknown[] = {0, -1};
    topology_advice(same, 2, two, 2, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK(!strcmp(mp, "--map-by core --bind-to core") && strstr(note, "same NUMA node"));
    topology_advice(unknown, 2, two, 2, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK(!strcmp(sr, "--cpu-bind=cores") && strstr(note, "unknown"));
    topology_advice(even, 4, two, 1, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK(strstr(note, "one NUMA node") != NULL);
    topology_advice(NULL, 0, two, 2, mp, sizeof mp, sr, sizeof sr, note, sizeof note);
    CHECK(!strcmp(mp, "--map-by numa --bind-to numa") && !strcmp(sr, "--cpu-bind=ldoms --mem-bind=local"));
}

TEST(topology_nvlinks_from_nvml)
{
    CHECK(gpu_topo_same_bus("00000000:3B:00.0", "0000:3b:00.0"));
    CHECK(gpu_topo_same_bus("3b:00.0", "0000:3B:00.0"));
    CHECK(!gpu_topo_same_bus("0000:3b:00.1", "0000:3b:00.0"));
    plumb_err e = {0};
    setenv("FAKE_NVML_DEVICES", "4", 1);
    setenv("FAKE_NVML_PCI", "00000000:12:00.0,00000000:13:00.0,00000000:23:00.0,00000000:31:00.0", 1);
    setenv("FAKE_NVML_NVLINK", "0-1:4,1-2:2,2-3:6", 1);
    void *lib = fake_load("nvml");
    REQUIRE(lib);
    struct gpu_topo *t = calloc(1, sizeof *t);
    REQUIRE(gpu_topo_read(t, &e) == 0);
    CHECK_STREQ(t->vendor, "nvidia");
    REQUIRE(t->n == 4);
    CHECK_STREQ(t->gpu[2].bus_id, "00000000:23:00.0");
    CHECK(t->kind[0][1] == GPU_LINK_NVLINK && t->links[0][1] == 4 && t->links[1][0] == 4);
    CHECK(t->links[1][2] == 2 && t->links[2][3] == 6 && t->links[3][2] == 6);
    CHECK(t->kind[0][2] == GPU_LINK_NONE && t->kind[0][3] == GPU_LINK_NONE);
    CHECK(t->gpu[1].nvlinks_up == 6 && t->gpu[1].nvlinks_switch == 0);
    dlclose(lib);
    /* every link into the NVSwitch fabric: all pairs NV18 */
    setenv("FAKE_NVML_NVLINK", "switch", 1);
    lib = fake_load("nvml");
    REQUIRE(gpu_topo_read(t, &e) == 0);
    int all = 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            if (i != j) all &= t->kind[i][j] == GPU_LINK_NVSWITCH && t->links[i][j] == 18;
    CHECK(all && t->gpu[0].nvlinks_switch == 18);
    /* the report, on the fixture */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/topo.txt", test_tmpdir());
    setenv("FAKE_NVML_NVLINK", "0-1:4,2-3:2", 1);
    dlclose(lib);
    lib = fake_load("nvml");
    FILE *f = fopen(path, "w+");
    REQUIRE(f);
    REQUIRE(topology_print(f, fixture(), &e) == 0);
    rewind(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    const char *want[] = {
        "GPUs: 4 from NVML (",
        "0    00000000:12:00.0  0     0-3          mlx5_0,ib0 0000:14:00.0 PIX",
        "2    00000000:23:00.0  0     0-3          eth2 0000:24:00.0 PXB",
        "3    00000000:31:00.0  1     4-7          eth1 0000:40:00.0 PHB",
        "GPU0   X      NV4    NODE   SYS",
        "GPU2   NODE   NODE   X      NV2",
        "NICs: mlx5_0,ib0 0000:14:00.0 (InfiniBand, NUMA 0); eth2 0000:24:00.0 (Ethernet, NUMA 0); eth1 0000:40:00.0 (Ethernet, NUMA 1)",
        "  mpirun -np 4 --bind-to none plumb train --bind numa ...",
        "  srun --ntasks-per-node=4 --cpu-bind=map_ldom:0,0,0,1 --mem-bind=map_ldom:0,0,0,1 <command>",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK_MSG(strstr(text, want[i]), "missing '%s' in:\n%s", want[i], text);
    dlclose(lib);
    unsetenv("FAKE_NVML_DEVICES"), unsetenv("FAKE_NVML_PCI"), unsetenv("FAKE_NVML_NVLINK"), unsetenv("PLUMB_NVML_LIB");
    free(t);
}

TEST(topology_xgmi_from_rocm_smi)
{
    plumb_err e = {0};
    setenv("PLUMB_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("FAKE_RSMI_DEVICES", "4", 1);
    setenv("FAKE_RSMI_PCI", "0000:12:00.0,0000:13:00.0,0000:23:00.0,0000:31:00.0", 1);
    setenv("FAKE_RSMI_XGMI", "0-1,2-3", 1);
    void *lib = fake_load("rsmi");
    REQUIRE(lib);
    struct gpu_topo *t = calloc(1, sizeof *t);
    REQUIRE(gpu_topo_read(t, &e) == 0);
    CHECK_STREQ(t->vendor, "amd");
    REQUIRE(t->n == 4);
    CHECK_STREQ(t->gpu[3].bus_id, "0000:31:00.0");
    CHECK(t->kind[0][1] == GPU_LINK_XGMI && t->hops[0][1] == 1 && t->kind[3][2] == GPU_LINK_XGMI);
    CHECK(t->kind[0][2] == GPU_LINK_NONE && t->kind[1][3] == GPU_LINK_NONE);
    dlclose(lib);
    /* neither library: PLUMB_EUNSUPPORTED naming both */
    setenv("PLUMB_RSMI_LIB", "/nonexistent/librocm_smi64.so.7", 1);
    CHECK_EQ_INT(gpu_topo_read(t, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "nvml: cannot load /nonexistent/libnvidia-ml.so.1") && strstr(e.msg, "rocm-smi: cannot load"),
              "%s", e.msg);
    CHECK_EQ_INT(t->n, 0);
    unsetenv("PLUMB_NVML_LIB"), unsetenv("PLUMB_RSMI_LIB"), unsetenv("FAKE_RSMI_DEVICES"), unsetenv("FAKE_RSMI_PCI"),
        unsetenv("FAKE_RSMI_XGMI");
    free(t);
}
