/* Our own declarations of the few NVML functions and types plumb uses
 * (libnvidia-ml.so.1 is dlopen'ed; no NVIDIA header is needed to build).
 * Shapes follow nvml.h: all functions return nvmlReturn_t (0 = success). The
 * fake library tests/fake_nvml.c exports the same symbols with these shapes. */
#ifndef PLUMB_NVML_API_H
#define PLUMB_NVML_API_H

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_UNKNOWN = 999,
};

enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum { NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT = 0, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT = 1 };
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_EVENT_TYPE_DBE 0x2ull
#define NVML_EVENT_TYPE_XID 0x8ull

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

/* nvmlMemory_v2_t: version = sizeof | (2 << 24) */
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    signed int siVal;
} nvmlValue_t;
enum { NVML_VALUE_TYPE_DOUBLE = 0, NVML_VALUE_TYPE_UNSIGNED_INT = 1, NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
       NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
       NVML_VALUE_TYPE_SIGNED_INT = 5 };

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;            /* nvmlValueType_t */
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 and
 * nvmlDeviceGetNvLinkRemotePciInfo_v2 fill it (nvml.h since NVML 2.285:
 * busIdLegacy first, the 32-byte busId last, "00000000:3B:00.0"). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
/* nvmlIntNvLinkDeviceType_t: what the far end of an NVLink is */
enum { NVML_NVLINK_DEVICE_TYPE_GPU = 0, NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1, NVML_NVLINK_DEVICE_TYPE_SWITCH = 2,
       NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xff };

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* The function table filled by dlsym. Versioned names where NVML has them
 * (NVIDIA's nvml.h): nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlEventSetWait_v2. Optional entries (NULL when the driver lacks them) are
 * marked. */
struct nvml_api {
    nvmlReturn_t (*Init)(void);                                  /* nvmlInit_v2 */
    nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*SystemGetDriverVersion)(char *, unsigned int);
    nvmlReturn_t (*GetCount)(unsigned int *);                    /* nvmlDeviceGetCount_v2 */
    nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*GetName)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*GetUUID)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*GetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t *);   /* optional */
    nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned int *);             /* mW */
    nvmlReturn_t (*GetEnforcedPowerLimit)(nvmlDevice_t, unsigned int *);     /* mW */
    nvmlReturn_t (*GetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long *); /* mJ, optional */
    nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*GetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t *);        /* optional */
    nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*GetClocksEventReasons)(nvmlDevice_t, unsigned long long *); /* or ...ThrottleReasons */
    nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long *);
    nvmlReturn_t (*GetEccMode)(nvmlDevice_t, int *, int *);
    nvmlReturn_t (*GetRetiredPages)(nvmlDevice_t, int, unsigned int *, unsigned long long *);
    nvmlReturn_t (*GetRemappedRows)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                                    unsigned int *);                          /* optional */
    nvmlReturn_t (*GetCurrPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*GetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*GetCurrPcieLinkWidth)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*GetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*GetPcieReplayCounter)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*GetNvLinkState)(nvmlDevice_t, unsigned int, int *);        /* optional */
    nvmlReturn_t (*GetPersistenceMode)(nvmlDevice_t, int *);
    nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t *);
    nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int); /* _v2 */
    nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
};

#endif
