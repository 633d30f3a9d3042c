"""Megatron-LM facts the compiler checks against (data files under data/)."""

# The commit whose source every fact in this wing was read from (Megatron Core 0.18.2); the seed's
# image and `init` pin it.
PINNED_COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
PINNED_SHORT = PINNED_COMMIT[:8]

# The Megatron-LM commit each Bridge release pairs with: Bridge v0.5.1's 3rdparty/Megatron-LM
# submodule is the parent of this commit (Megatron Core 0.18); v0.6 moves to Core 0.19.
BRIDGE_MEGATRON = {"0.5.1": PINNED_COMMIT}


def cited(hint: str | None, where: str) -> str:
    """A rule's hint ending with where Megatron-LM at the pinned commit refuses the same thing (`where`: a path from
    the repository's root and its lines), so that a user can read the check the compiler reproduces."""
    cite = f"Megatron refuses it at {where} ({PINNED_SHORT})"
    return f"{hint}; {cite}" if hint else cite
