"""Megatron-LM facts the compiler checks against (data files under data/)."""
