"""Device-only patch of the carried Bridge v0.5.1 copy: guard its hard `import transformer_engine.pytorch as te`.

Bridge's peft modules (imported by AutoBridge through peft_bridge) import TE at module level, even
though the conversion path never builds a TE module when TE is absent. The test machine has no TE;
real NGC images do. The placeholder classes only ever fail isinstance checks, which is the truth on
a machine without TE. Never used when TE imports.
"""
import pathlib
import sys

OLD = "import transformer_engine.pytorch as te\n"
NEW = '''try:
    import transformer_engine.pytorch as te
except ImportError:  # patched for a TE-less machine (see .bridge/patches/no_te.py)
    import types as _types
    import torch.nn as _nn

    te = _types.SimpleNamespace(
        Linear=type("Linear", (_nn.Module,), {}),
        LayerNormLinear=type("LayerNormLinear", (_nn.Module,), {}),
        ops=_types.SimpleNamespace(Sequential=type("Sequential", (_nn.Module,), {})),
    )
'''
root = pathlib.Path(sys.argv[1])
for rel in ("megatron/bridge/peft/lora_layers.py", "megatron/bridge/peft/lora.py"):
    p = root / rel
    s = p.read_text()
    if NEW in s:
        continue
    assert s.count(OLD) == 1, rel
    p.write_text(s.replace(OLD, NEW))
    print("patched", rel)
