/* A stand-in for libnvidia-ml.so.1, built by the tests: the NVML functions ringperf's sampler
 * calls through nvml-wrapper, in NVML's own units (milliwatts, millijoules), with values
 * scripted by environment variables so that a test knows what a real driver would have said.
 *
 *   STANDIN_INIT            ok (default) | no_permission | driver_not_loaded
 *   STANDIN_GPUS            number of devices (default 1)
 *   STANDIN_POWER_MW        power draw in mW (default 300000)
 *   STANDIN_POWER_RAMP_MW_S power added per second since init (default 0)
 *   STANDIN_ENERGY_START_MJ energy counter at init in mJ (default 1000000)
 *   STANDIN_ENERGY_WRAP_MJ  the counter restarts from 0 past this (default: never)
 *   STANDIN_ENERGY          ok (default) | not_supported
 *   STANDIN_LOST_AFTER_MS   every device call fails with GPU_IS_LOST this long after init
 *
 * The energy counter is the exact integral of the scripted power since init, so energy and
 * power agree as on a real GPU. Return codes and struct layouts are NVML's (nvml.h).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct { int index; } device_t;
typedef device_t *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
};

static device_t devices[8];
static double t0;
static int ready;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double env(const char *name, double fallback) {
    const char *v = getenv(name);
    return v && *v ? atof(v) : fallback;
}

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

static int gpus(void) {
    int n = (int)env("STANDIN_GPUS", 1);
    return n < 0 ? 0 : n > 8 ? 8 : n;
}

/* Checks the handle and the scripted loss; seconds since init in *t. */
static nvmlReturn_t check(nvmlDevice_t d, double *t) {
    if (!ready) return NVML_ERROR_UNINITIALIZED;
    if (!d || d < devices || d >= devices + gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    *t = now_s() - t0;
    double lost = env("STANDIN_LOST_AFTER_MS", -1);
    if (lost >= 0 && *t * 1e3 >= lost) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    if (env_is("STANDIN_INIT", "no_permission")) return NVML_ERROR_NO_PERMISSION;
    if (env_is("STANDIN_INIT", "driver_not_loaded")) return NVML_ERROR_DRIVER_NOT_LOADED;
    for (int i = 0; i < 8; i++) devices[i].index = i;
    t0 = now_s();
    ready = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void) {
    ready = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!ready) return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned int)gpus();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!ready) return NVML_ERROR_UNINITIALIZED;
    if ((int)index >= gpus()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    const char *n = "NVIDIA Stand-in H200";
    if (length < strlen(n) + 1) return NVML_ERROR_INVALID_ARGUMENT;
    strcpy(name, n);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    *mw = (unsigned int)(env("STANDIN_POWER_MW", 300000) + env("STANDIN_POWER_RAMP_MW_S", 0) * t);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    if (env_is("STANDIN_ENERGY", "not_supported")) return NVML_ERROR_NOT_SUPPORTED;
    /* ∫ (P0 + ramp·s) ds from 0 to t, in mW·s = mJ. */
    double p0 = env("STANDIN_POWER_MW", 300000), ramp = env("STANDIN_POWER_RAMP_MW_S", 0);
    double e = env("STANDIN_ENERGY_START_MJ", 1000000) + p0 * t + ramp * t * t / 2;
    double wrap = env("STANDIN_ENERGY_WRAP_MJ", 0);
    if (wrap > 0) {
        while (e >= wrap) e -= wrap;
    }
    *mj = (unsigned long long)e;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    u->gpu = 87;
    u->memory = 41;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    m->total = 141ULL << 30;
    m->reserved = 0;
    m->used = 100ULL << 30;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    *mhz = type == 1 ? 1980 : 1500; /* NVML_CLOCK_SM is 1 */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    (void)sensor;
    *c = 55;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons) {
    double t;
    nvmlReturn_t r = check(d, &t);
    if (r) return r;
    *reasons = 0;
    return NVML_SUCCESS;
}
