"""The rules, by wing: each takes the sections that validated and the facts, and yields located
diagnostics. A rule names the sections it needs and runs only when all of them validated, so a
schema error in one section never hides a rule about another. Every rule's code is in
diagnostics.CODES and has a case in tests/bad_specs/.
"""

from __future__ import annotations

from ...diagnostics import Diagnostic
from ..context import Rule, RuleContext
from .args import check_raw_args, check_unread_shape_flags
from .data import check_data_path_globs, check_prepare_paths, check_prepare_tokenizer
from .init import check_init_contradictions, check_init_from, check_model_fields
from .platform import check_engine, check_platform_sections
from .megatron import (
    check_distributed_optimizer_resume, check_duplicate_flags, check_megatron_batch, check_megatron_data,
    check_megatron_model, check_megatron_optimizer, check_memory, check_pretrain_sections,
    check_sequence_parallel, check_storage_quota, check_training_length,
)
from .precision import check_fp8, check_performance
from .parallel import (
    check_bounded_args, check_bounded_layout, check_expert_divisibility, check_parallel_divisibility, check_rdma,
    check_tensor_spans_workers,
)
from .parallel_args import check_parallel_args
from .runtime import check_kernel_needs, check_pipeline_split, check_validate_args
from .scripts import check_script_exists
from .slow import check_routing, check_slow_training
from .stop import check_stop, check_stop_limit
from .safety import (
    check_credentials, check_image_values, check_import_markers, check_reserved_env, check_visible_devices,
)
from .storage import check_read_only, check_reserved_mount, check_run_root, check_script_in_root

RULES: tuple[Rule, ...] = (
    Rule("run-root-is-mount", ("storage",), check_run_root),
    Rule("read-only-storage", ("storage",), check_read_only),
    Rule("reserved-mount-path", ("storage",), check_reserved_mount),
    Rule("script-outside-root", ("training", "megatron"), check_script_in_root),
    Rule("script-not-in-megatron", ("training", "megatron"), check_script_exists),
    Rule("args-parallel-mismatch", ("training", "parallelism"), check_parallel_args),
    Rule("parallel-divisibility", ("resources", "parallelism"), check_parallel_divisibility),
    Rule("expert-divisibility", ("resources", "parallelism"), check_expert_divisibility),
    Rule("bounded-example-layout", ("training", "parallelism", "resources"), check_bounded_layout),
    Rule("bounded-example-args", ("training",), check_bounded_args),
    Rule("unsafe-character", ("megatron",), check_image_values),
    Rule("reserved-env", ("training",), check_reserved_env),
    Rule("visible-devices", ("training", "resources"), check_visible_devices),
    Rule("rdma-single-worker", ("resources",), check_rdma),
    Rule("tensor-spans-workers", ("resources", "parallelism"), check_tensor_spans_workers),
    Rule("credential-in-spec", (), check_credentials),
    Rule("import-marker", (), check_import_markers),
    Rule("pretrain-missing-section", ("training",), check_pretrain_sections),
    Rule("megatron-heads-tp", ("training", "parallelism"), check_megatron_model),
    Rule("megatron-layers-pp", ("training", "parallelism"), check_pipeline_split),
    Rule("megatron-batch", ("training", "parallelism", "resources"), check_megatron_batch),
    Rule("megatron-lr", ("training",), check_megatron_optimizer),
    Rule("megatron-train-length", ("training",), check_training_length),
    Rule("megatron-data-source", ("training",), check_megatron_data),
    Rule("megatron-sequence-parallel", ("training", "parallelism"), check_sequence_parallel),
    Rule("fp8-transformer-engine", ("training", "parallelism", "resources"), check_fp8),
    Rule("performance-option", ("training", "parallelism"), check_performance),
    Rule("args-duplicate-flag", ("training", "parallelism"), check_duplicate_flags),
    Rule("megatron-unknown-flag", ("training",), check_raw_args),
    Rule("args-unread-shape-flag", ("training",), check_unread_shape_flags),
    Rule("megatron-validate-args", ("training", "parallelism", "resources"), check_validate_args),
    Rule("megatron-local-crash", ("training", "parallelism"), check_kernel_needs),
    Rule("prepare-input-path", ("training", "storage"), check_prepare_paths),
    Rule("path-glob", ("training",), check_data_path_globs),
    Rule("platform-section", (), check_platform_sections),
    Rule("slow-detection", ("resources", "training"), check_slow_training),
    Rule("job-routing", ("training",), check_routing),
    Rule("missing-key", ("training",), check_model_fields),
    Rule("init-from", ("init_from", "training"), check_init_from),
    Rule("init-from-contradiction", ("init_from", "training"), check_init_contradictions),
    Rule("engine", (), check_engine),
    Rule("tokenizer-files", ("training",), check_prepare_tokenizer),
    Rule("memory-over-capacity", ("training", "parallelism", "resources"), check_memory),
    Rule("storage-over-quota", ("training", "storage"), check_storage_quota),
    Rule("distributed-optimizer-resume", ("training",), check_distributed_optimizer_resume),
    Rule("stop-grace-short", ("training",), check_stop),
    Rule("stop-time-limit-engine", ("stop",), check_stop_limit),
)


def run_rules(ctx: RuleContext) -> list[Diagnostic]:
    """Every rule whose sections validated, in order."""
    out: list[Diagnostic] = []
    for rule in RULES:
        if all(name in ctx.sections for name in rule.needs):
            out.extend(rule.check(ctx))
    return out
