"""Megatron-LM flags of Hugging Face models, per family, as Megatron Bridge v0.5.1 maps them.

huggingface.py is the entry point (derive); common.py reads config.json fields with located
reasons, families.py says which architectures are supported or refused and why, moe.py and mla.py
give the mixture-of-experts and multi-latent-attention flags. Pure functions over plain data.
"""
