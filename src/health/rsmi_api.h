/* Our own declarations of the ROCm SMI functions and types plumb uses
 * (librocm_smi64.so.{7,6,5,1} is dlopen'ed). Shapes follow rocm_smi.h; the
 * test build compiles tests/test_health.c against Debian's rocm_smi.h to check
 * that these agree (sizes and argument types), and the fake library
 * tests/fake_rsmi.c exports the same symbols. Units: temperatures in
 * millidegrees C, power in microwatts, memory in bytes, clocks in Hz. */
#ifndef PLUMB_RSMI_API_H
#define PLUMB_RSMI_API_H
#include <stdint.h>

typedef int rsmi_status_t_;
enum { RSMI_OK = 0, RSMI_NOT_SUPPORTED = 2 };
enum { RSMI_TEMP_EDGE = 0, RSMI_TEMP_JUNCTION = 1, RSMI_TEMP_MEMORY = 2 };
enum { RSMI_TEMP_CURRENT_ = 0 };
enum { RSMI_MEM_VRAM = 0 };
enum { RSMI_CLK_SYS = 0, RSMI_CLK_MEM = 4 };
enum { RSMI_LINK_PCIE = 1, RSMI_LINK_XGMI = 2 };
#define RSMI_MAX_FREQS 32
#define RSMI_NUM_BLOCKS 14 /* RSMI_GPU_BLOCK_UMC (bit 0) .. RSMI_GPU_BLOCK_FUSE (bit 13) */

/* rsmi_frequencies_t before ROCm 6 (ROCm 6 adds a leading bool
 * has_deep_sleep, which shifts the fields by 4 bytes: read through
 * rsmi_freq_current() with the library's major version). */
typedef struct {
    uint32_t num_supported, current;
    uint64_t frequency[RSMI_MAX_FREQS];
} rsmi_freqs5_t;
typedef struct {
    uint32_t has_deep_sleep; /* bool + padding */
    uint32_t num_supported, current;
    uint32_t pad_;
    uint64_t frequency[RSMI_MAX_FREQS];
} rsmi_freqs6_t;
/* rsmi_pcie_bandwidth_t = { rsmi_frequencies_t transfer_rate; uint32_t lanes[32]; } */
typedef struct {
    rsmi_freqs5_t transfer_rate;
    uint32_t lanes[RSMI_MAX_FREQS];
} rsmi_pcie_bw5_t;
typedef struct {
    rsmi_freqs6_t transfer_rate;
    uint32_t lanes[RSMI_MAX_FREQS];
} rsmi_pcie_bw6_t;

typedef struct {
    uint64_t correctable_err, uncorrectable_err;
} rsmi_ecc_count_t_;

typedef struct {
    uint32_t major, minor, patch;
    const char *build;
} rsmi_version_t_;

/* gpu_metrics format 1 (dGPU). The prefix up to temperature_hbm is common to
 * content revisions 0..3 and to ROCm 6's unified struct; indep_throttle_status
 * exists from content revision 3 (amdgpu gpu_metrics_v1_3). Callers pass a
 * buffer of RSMI_METRICS_BUF bytes, larger than any version's struct. */
typedef struct {
    uint16_t structure_size;
    uint8_t format_revision, content_revision;
    uint16_t temperature_edge, temperature_hotspot, temperature_mem;
    uint16_t temperature_vrgfx, temperature_vrsoc, temperature_vrmem;
    uint16_t average_gfx_activity, average_umc_activity, average_mm_activity;
    uint16_t average_socket_power;
    uint64_t energy_accumulator;
    uint64_t system_clock_counter;
    uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency;
    uint16_t average_vclk0_frequency, average_dclk0_frequency, average_vclk1_frequency;
    uint16_t average_dclk1_frequency;
    uint16_t current_gfxclk, current_socclk, current_uclk, current_vclk0, current_dclk0;
    uint16_t current_vclk1, current_dclk1;
    uint32_t throttle_status;
    uint16_t current_fan_speed;
    uint16_t pcie_link_width;
    uint16_t pcie_link_speed; /* 0.1 GT/s */
    uint16_t padding;
    uint32_t gfx_activity_acc, mem_actvity_acc;
    uint16_t temperature_hbm[4];
    /* v1.2+ */
    uint64_t firmware_timestamp;
    /* v1.3+ */
    uint16_t voltage_soc, voltage_gfx, voltage_mem;
    uint16_t padding1;
    uint64_t indep_throttle_status;
} rsmi_metrics_v1_t;
#define RSMI_METRICS_BUF 16384

struct rsmi_api {
    rsmi_status_t_ (*init)(uint64_t);
    rsmi_status_t_ (*shut_down)(void);
    rsmi_status_t_ (*status_string)(rsmi_status_t_, const char **);
    rsmi_status_t_ (*version_get)(rsmi_version_t_ *);                    /* optional */
    rsmi_status_t_ (*num_monitor_devices)(uint32_t *);
    rsmi_status_t_ (*dev_name_get)(uint32_t, char *, size_t);
    rsmi_status_t_ (*dev_unique_id_get)(uint32_t, uint64_t *);            /* optional */
    rsmi_status_t_ (*dev_temp_metric_get)(uint32_t, uint32_t, int, int64_t *);
    rsmi_status_t_ (*dev_power_get)(uint32_t, uint64_t *, int *);         /* ROCm 6, optional */
    rsmi_status_t_ (*dev_power_ave_get)(uint32_t, uint32_t, uint64_t *);  /* optional */
    rsmi_status_t_ (*dev_power_cap_get)(uint32_t, uint32_t, uint64_t *);
    rsmi_status_t_ (*dev_energy_count_get)(uint32_t, uint64_t *, float *, uint64_t *); /* optional */
    rsmi_status_t_ (*dev_busy_percent_get)(uint32_t, uint32_t *);
    rsmi_status_t_ (*dev_memory_busy_percent_get)(uint32_t, uint32_t *); /* optional */
    rsmi_status_t_ (*dev_memory_usage_get)(uint32_t, int, uint64_t *);
    rsmi_status_t_ (*dev_memory_total_get)(uint32_t, int, uint64_t *);
    rsmi_status_t_ (*dev_gpu_clk_freq_get)(uint32_t, int, void *);        /* rsmi_freqs{5,6}_t */
    rsmi_status_t_ (*dev_gpu_metrics_info_get)(uint32_t, void *);         /* optional */
    rsmi_status_t_ (*dev_ecc_enabled_get)(uint32_t, uint64_t *);
    rsmi_status_t_ (*dev_ecc_count_get)(uint32_t, uint64_t, rsmi_ecc_count_t_ *);
    rsmi_status_t_ (*dev_memory_reserved_pages_get)(uint32_t, uint32_t *, void *); /* optional */
    rsmi_status_t_ (*dev_pci_bandwidth_get)(uint32_t, void *);            /* rsmi_pcie_bw{5,6}_t */
    rsmi_status_t_ (*dev_pci_replay_counter_get)(uint32_t, uint64_t *);   /* optional */
    rsmi_status_t_ (*topo_get_link_type)(uint32_t, uint32_t, uint64_t *, int *); /* optional */
};

#endif
