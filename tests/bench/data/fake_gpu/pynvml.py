"""A fake pynvml for scripts/gpu_proof's test (tests/bench/test_gpu_proof.py): one RTX 3080 (the corpus card of
rtx3080-x16-gen4-loaded-p2-q-x.txt: 10 GiB, compute capability 8.6, Gen4 x16, 320 W limit) whose total energy
counter grows by 200 J per call. Only what tunehost's NVML readers call; anything else is absent (None)."""

MIB = 1024 * 1024
NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
_energy_mj = [5_000_000]


class NVMLError(Exception):
    pass


class _Memory:
    total, used, free = 10240 * MIB, 1024 * MIB, 9216 * MIB


class _Pci:
    busId = "00000000:01:00.0"


class _Util:
    gpu, memory = 65, 30


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "550.54.14"


def nvmlSystemGetCudaDriverVersion():
    return 12040


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    if index != 0:
        raise NVMLError("Invalid Argument")
    return "gpu0"


def nvmlDeviceGetName(h):
    return "NVIDIA GeForce RTX 3080"


def nvmlDeviceGetUUID(h):
    return "GPU-00000000-0000-0000-0000-000000003080"


def nvmlDeviceGetMemoryInfo(h):
    return _Memory()


def nvmlDeviceGetPciInfo(h):
    return _Pci()


def nvmlDeviceGetCudaComputeCapability(h):
    return (8, 6)


def nvmlDeviceGetCurrPcieLinkGeneration(h):
    return 4


def nvmlDeviceGetMaxPcieLinkGeneration(h):
    return 4


def nvmlDeviceGetCurrPcieLinkWidth(h):
    return 16


def nvmlDeviceGetMaxPcieLinkWidth(h):
    return 16


def nvmlDeviceGetTemperature(h, sensor):
    return 61


def nvmlDeviceGetPowerUsage(h):
    return 215_000


def nvmlDeviceGetEnforcedPowerLimit(h):
    return 320_000


def nvmlDeviceGetPowerManagementDefaultLimit(h):
    return 320_000


def nvmlDeviceGetPerformanceState(h):
    return 2


def nvmlDeviceGetUtilizationRates(h):
    return _Util()


def nvmlDeviceGetCurrentClocksEventReasons(h):
    return 0


def nvmlDeviceGetTotalEnergyConsumption(h):
    _energy_mj[0] += 200_000
    return _energy_mj[0]
