"""Bridge v0.5.1's provider against Megatron-LM's config from the compiled flags, for every altered
copy of the real config.json files that compiles (hf_alterations.py): the fixture
tests/fixtures/bridge-altered.json that tests/test_hf_config_corpus.py reads.

    PYTHONPATH=BRIDGE/src:MEGATRON_LM:REPO python tools/bridge/altered_fields.py OUT.json NAME...

NAME is a directory under tests/fixtures/hf-configs/. For each copy whose derive() compiles, the same
two dictionaries as provider_fields.py are made (Bridge's provider from the copy written to a temporary
directory; Megatron's parser, validate_args and core_transformer_config_from_args on the flags) and the
fields where they differ are recorded with a digest of the flags; a copy Bridge itself cannot load is
recorded with the exception's type. Offline on a CPU, as provider_fields.py (its docstring says how).
"""
import contextlib
import hashlib
import io
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_alterations import alterations  # noqa: E402
from provider_fields import bridge_fields, megatron_fields  # noqa: E402


def flags_digest(flags, te_flags) -> str:
    return hashlib.sha256(" ".join(list(flags) + ["|"] + list(te_flags)).encode()).hexdigest()[:16]


# values one field writes two ways that build the same model: (field, Bridge's, Megatron's)
def _same(field: str, want, got) -> bool:
    if field == "moe_layer_freq" and isinstance(want, list) and got == 1:
        return all(v == 1 for v in want)  # every layer MoE: a list of ones or Megatron's default 1
    if field == "mtp_num_layers":
        return (want or None) == (got or None)  # 0 layers is no MTP
    if field == "moe_router_topk_scaling_factor":
        return (1.0 if want is None else want) == (1.0 if got is None else got)  # None: no scaling
    return False


def differing(bridge: dict, megatron: dict) -> dict:
    """The fields where the two models differ (the comparison of tests/test_bridge_mapping.py); without
    experts on either side the MoE fields build nothing and are left out."""
    out = {}
    dense = bridge.get("num_moe_experts") in (None, "<absent>") and megatron.get("num_moe_experts") in (None, "<absent>")
    for field, want in bridge.items():
        if dense and field.startswith("moe_"):
            continue
        if _same(field, want, megatron[field]):
            continue
        if field == "mtp_loss_scaling_factor" and not bridge.get("mtp_num_layers") and not megatron.get("mtp_num_layers"):
            continue  # no MTP layers: nothing is scaled
        got = megatron[field]
        if want in (None, "<absent>") and got in (None, "<absent>"):
            continue
        if field == "kv_channels" and want is None:
            want = bridge["hidden_size"] // bridge["num_attention_heads"]
        if isinstance(want, float) or isinstance(got, float):
            if want is not None and got is not None and math.isclose(want, got, rel_tol=1e-12):
                continue
        if want != got:
            out[field] = [want, got]
    return out


def main():
    from compiler.megatron.huggingface import HFConfigError, derive

    out_path = Path(sys.argv[1])
    fixtures = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hf-configs"
    record = json.loads(out_path.read_text()) if out_path.exists() else {}
    for name in sys.argv[2:]:
        base = json.loads((fixtures / name / "config.json").read_text())
        for case, config in alterations(name, base, hostile=False):
            if case in record:
                continue
            try:
                arch = derive(config)
            except HFConfigError:
                continue
            entry = {"flags": flags_digest(arch.flags, arch.te_flags)}
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "config.json").write_text(json.dumps(config))
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        bridge = bridge_fields(tmp)
                except Exception as exc:  # noqa: BLE001 - what Bridge says of the copy is the record
                    entry["bridge_error"] = type(exc).__name__
                    record[case] = entry
                    continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    megatron = megatron_fields(list(arch.flags))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - Megatron refusing the flags is the record
                entry["megatron_error"] = f"{type(exc).__name__}: {exc}"[:200]
                record[case] = entry
                print(case, entry, flush=True)
                continue
            for flag in arch.te_flags:
                megatron[flag[2:].replace("-", "_")] = True
            entry["differing"] = differing(bridge, megatron)
            record[case] = entry
            print(case, entry, flush=True)
            out_path.write_text(json.dumps(record, indent=0, sort_keys=True) + "\n")
    out_path.write_text(json.dumps(record, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
