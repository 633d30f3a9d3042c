"""megatron-compile: a Megatron training job spec compiled into reviewable, runnable artifacts."""

__version__ = "0.1.0"
TOOL = "megatron-compile"  # the command, as headers and hints name it
