"""The largest value each size of a model or a job may take: far above any released model or real
job, far below what would make the compile's per-layer or per-microbatch work run for minutes or
exhaust memory (10^9 layers did). The spec's schema (schema/models.py) and the committed config.json
reader (load/jsonfile.py) both bound by these, so that the two inputs agree."""

from __future__ import annotations

MAX_LAYERS = 4096  # the deepest released models have ~200
MAX_HIDDEN = 1 << 20
MAX_FFN = 1 << 22
MAX_HEADS = 1 << 14  # attention heads, query groups, head dimension
MAX_VOCAB = 1 << 24  # the largest vocabularies are ~1M
MAX_POSITIONS = 1 << 28  # sequence length and position embeddings (10M-token contexts exist)
MAX_EXPERTS = 1 << 16
MAX_TOPK = 1 << 10
MAX_ROTARY_BASE = 10**12  # RoPE theta: 1e4 to 1e7 in practice
MAX_PARALLEL = 1 << 14  # any parallel size: the world size is at most 1024 workers x 16 GPUs
MAX_MICRO_BATCH = 1 << 16
MAX_GLOBAL_BATCH = 1 << 32
MAX_ITERATIONS = 10**12  # iterations, samples, intervals
MAX_GPU_MEMORY_GB = 10_000
MAX_STORAGE_GB = 1e9  # an exabyte
MAX_INPUT_MB = 1e9  # a petabyte of text in one input
