"""Megatron-LM facts the compiler checks against (data files under data/)."""

# The commit whose source every fact in this wing was read from (Megatron Core 0.18.2); the seed's
# image and `init` pin it.
PINNED_COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"

# The Megatron-LM commit each Bridge release pairs with: Bridge v0.5.1's 3rdparty/Megatron-LM
# submodule is the parent of this commit (Megatron Core 0.18); v0.6 moves to Core 0.19.
BRIDGE_MEGATRON = {"0.5.1": PINNED_COMMIT}
