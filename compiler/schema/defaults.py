"""The spec's defaults that code outside the models reads (the models use them too).

The compile path never imports the pydantic models (schema/validator.py), so a default another
stage needs is named here once rather than copied.
"""

MEGATRON_REPO = "https://github.com/NVIDIA/Megatron-LM.git"
MEGATRON_ROOT = "/opt/Megatron-LM"  # megatron.root: where the image holds the Megatron-LM source
