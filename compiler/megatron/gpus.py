"""The GPUs a job may ask for: memory, dense bf16 peak, HBM and NVLink bandwidth, with sources.

Every figure is the vendor's datasheet figure for the SXM (or the named) part, DENSE: NVIDIA's
tables print bf16 Tensor Core throughput "with sparsity" (2:4 structured sparsity, twice the dense
figure) and mark it with an asterisk; Megatron's dense GEMMs never use sparsity, so the table holds
half of the starred figure. NVLink is per direction: the datasheets print the bidirectional total.

The worker network figures are assumptions, not measurements: the AIStudio job API says only that
RDMA is on or off (resources.rdma), not which NICs a flavor has.
"""

from __future__ import annotations

import re
from ..tuples import NamedTuple


class Gpu(NamedTuple):
    name: str  # the --gpu key
    memory_gb: float  # as the vendor states it (10**9 bytes)
    bf16_dense_tflops: float  # Tensor Core, dense (no sparsity)
    hbm_tb_s: float  # memory bandwidth, 10**12 bytes/s
    nvlink_gb_s: float  # GPU-to-GPU bandwidth per direction within a worker, 10**9 bytes/s
    source: str  # the datasheet the figures come from
    intra_link: str = "NVLink"  # what carries traffic between GPUs of one worker
    # CUDA compute capability (NVIDIA's CUDA GPUs table): what kernels and number formats the part runs,
    # FP8 Tensor Cores from 8.9 (Ada) and 9.0 (Hopper) on (megatron/fp8.py); A100 is 8.0, H100/H200/H20 9.0
    compute_capability: tuple[int, int] = (0, 0)  # (0, 0): not stated
    # streaming multiprocessors (NVIDIA's architecture whitepapers: H100 SXM5 132, A100 108; H200 is the H100
    # SXM's GH100 with HBM3e, 132; L40S 18,176 CUDA cores at 128 a SM, 142): what a comm kernel's SMs take
    # from a GEMM beside it (comm_time.userbuffer_exposed); 0: not stated
    sms: int = 0


GPUS: dict[str, Gpu] = {
    "h200": Gpu("h200", 141.0, 989.5, 4.8, 450.0,
                "NVIDIA H200 Tensor Core GPU datasheet (Nov 2024), H200 SXM column: BF16 Tensor Core "
                "1,979 TFLOPS with sparsity, 141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s", compute_capability=(9, 0), sms=132),
    "h100": Gpu("h100", 80.0, 989.5, 3.35, 450.0,
                "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column: BF16 Tensor Core "
                "1,979 TFLOPS with sparsity, 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s", compute_capability=(9, 0), sms=132),
    "a100": Gpu("a100", 80.0, 312.0, 2.039, 300.0,
                "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column: BF16 Tensor Core "
                "312 TFLOPS (624 with sparsity), 80 GB HBM2e, 2,039 GB/s, NVLink 600 GB/s", compute_capability=(8, 0), sms=108),
    "h20": Gpu("h20", 96.0, 148.0, 4.0, 450.0,
               "NVIDIA H20 product brief as reported by server vendors (2024; no public NVIDIA datasheet): "
               "BF16 Tensor Core 148 TFLOPS dense, 96 GB HBM3, 4.0 TB/s, NVLink 900 GB/s", compute_capability=(9, 0)),
    "l40s": Gpu("l40s", 48.0, 362.05, 0.864, 32.0,
                "NVIDIA L40S datasheet (2023): BF16 Tensor Core 733 TFLOPS with sparsity (362.05 dense), "
                "48 GB GDDR6, 864 GB/s; no NVLink: PCIe Gen4 x16, 64 GB/s bidirectional", "PCIe",
                compute_capability=(8, 9), sms=142),
}

# The GPU the step model's rates were measured on (tools/microbench.py on the lent H200, rates.py): every
# other GPU scales from its datasheet figures against this one's
MEASURED_GPU = "h200"

# Which GPU a worker flavor name means: the GPU's name appears in the flavor string. This is the one
# table that memory.py (and the capacity rule through it) and timing.py read. AIStudio's flavor list is not in
# this repository; an unknown flavor maps to nothing rather than to a guess. Longest names first so
# that "H200" is not read as "H20".
_FLAVOR_PATTERNS: tuple[tuple[str, str], ...] = (
    ("H200", "h200"), ("H100", "h100"), ("H800", "h100"), ("A100", "a100"), ("A800", "a100"),
    ("L40S", "l40s"), ("H20", "h20"),
)
# H800 and A800 are the export variants of H100 and A100: the same dense bf16 peak and HBM, with
# NVLink cut to 400 GB/s bidirectional (NVIDIA H800/A800 product briefs, 2023); mapped to the parent
# part for compute, and their NVLink corrected below.
_NVLINK_OVERRIDE_GB_S = {"H800": 200.0, "A800": 200.0}


def gpu_of_flavor(flavor: str | None) -> Gpu | None:
    """The GPU a worker flavor's name says, or None when it names none this table knows."""
    text = (flavor or "").upper()
    for needle, key in _FLAVOR_PATTERNS:
        if re.search(rf"{needle}(?![0-9])", text):
            gpu = GPUS[key]
            if needle in _NVLINK_OVERRIDE_GB_S:
                return gpu._replace(name=needle.lower(), nvlink_gb_s=_NVLINK_OVERRIDE_GB_S[needle])
            return gpu
    return None


def gpu_named(name: str) -> Gpu:
    """The GPU for a --gpu value (h200, H100, a100-80gb …); KeyError names the choices."""
    key = name.lower().split("-")[0]
    if key in GPUS:
        return GPUS[key]
    found = gpu_of_flavor(name)
    if found is None:
        raise KeyError(f"unknown GPU {name!r}; choose one of {', '.join(sorted(GPUS))}")
    return found


class Network(NamedTuple):
    gb_s_per_gpu: float  # what one GPU can send to another worker, per direction, 10**9 bytes/s
    assumption: str


# RDMA on: an HGX H100/H200 worker has one 400 Gb/s InfiniBand/RoCE NIC per GPU (NVIDIA DGX H200
# datasheet, 2024: "8x NVIDIA ConnectX-7, 400 Gb/s"), so 50 GB/s per GPU per direction.
# RDMA off: NCCL falls back to TCP sockets over the worker's front-end Ethernet; assumed 100 Gb/s
# per worker shared by all its GPUs. Neither figure has been measured on AIStudio.
RDMA_NETWORK_GB_S_PER_GPU = 50.0
TCP_NETWORK_GB_S_PER_WORKER = 12.5


def worker_network(rdma: bool, gpus_per_worker: int) -> Network:
    """The cross-worker bandwidth one GPU gets, RDMA on or off (assumptions, stated)."""
    if rdma:
        return Network(RDMA_NETWORK_GB_S_PER_GPU,
                       "RDMA: one 400 Gb/s NIC per GPU (DGX H200 datasheet); not measured on AIStudio")
    return Network(TCP_NETWORK_GB_S_PER_WORKER / gpus_per_worker,
                   f"no RDMA: TCP over 100 Gb/s per worker shared by {gpus_per_worker} GPUs; an assumption, "
                   "not measured")


# NCCL reaches a fraction of the link rate: nccl-tests' bus bandwidth on NVLink and InfiniBand
# typically tops out at 70-85 % of it for large messages. One factor for all links, an assumption
# that no multi-GPU run here has checked.
LINK_EFFICIENCY = 0.8
