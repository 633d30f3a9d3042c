from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'convert.sh.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_plan = resolve('plan')
    l_0_step = resolve('step')
    try:
        t_1 = environment.filters['comment']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'comment' found.")
    try:
        t_2 = environment.filters['comment_text']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'comment_text' found.")
    try:
        t_3 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n# The weight conversion job ('
    yield str(environment.finalize(t_2(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'document'))))
    yield ' carries it; one GPU): Megatron Bridge turns the\n# Hugging Face model into a Megatron torch_dist checkpoint, which the training step loads with\n# --pretrained-checkpoint. Idempotent: a finished conversion is never redone or overwritten; a new\n# one is written in a temporary directory beside it and renamed into place when complete. It\n# first checks that the config.json on the storage is the committed one the flags derive from.\nset -euo pipefail\n\nHF_DIR='
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'init'), 'hf_path'))))
    yield '\nCONVERTED='
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'init'), 'converted'))))
    yield '\nCONFIG_SHA256='
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'init'), 'config_sha256'))))
    yield '\nCOMMITTED_CONFIG='
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'init'), 'config'))))
    yield '\n\ndie() {\n  printf \'convert.sh: %s\\n\' "$*" >&2\n  exit 1\n}\n\nif [ -s "$CONVERTED/latest_checkpointed_iteration.txt" ]; then\n  printf \'convert.sh: %s is converted already; not redone\\n\' "$CONVERTED"\n  exit 0\nfi\n[ -f "$HF_DIR/config.json" ] || die "no $HF_DIR/config.json: download the model onto the storage first"\n# The committed config.json, compared as JSON (key order and spacing aside).\nfound=$(python -c \'import hashlib, json, sys; print(hashlib.sha256(json.dumps(json.load(open(sys.argv[1])), sort_keys=True, separators=(",", ":")).encode()).hexdigest())\' "$HF_DIR/config.json") ||\n  die "cannot read $HF_DIR/config.json"\n[ "$found" = "$CONFIG_SHA256" ] ||\n  die "$HF_DIR/config.json is not the committed $COMMITTED_CONFIG: the training flags would not fit the weights"\n\nmkdir -p "${CONVERTED%/*}"\nfor stale in "${CONVERTED%/*}"/.convert-*; do\n  if [ -d "$stale" ]; then\n    printf \'convert.sh: removing %s, left by an interrupted conversion\\n\' "$stale"\n    rm -rf -- "$stale"\n  fi\ndone\ntmp=$(mktemp -d "${CONVERTED%/*}/.convert-XXXXXX")\ntrap \'rm -rf -- "$tmp"\' EXIT\n\n# Megatron Bridge\'s AutoBridge.import_ckpt, step by step (auto_bridge.py at v0.5.1): the provider\n# from the Hugging Face config with its weights, the distributed model on one GPU, a torch_dist save\n# with the tokenizer. Without Transformer Engine (a test image) the provider takes Bridge\'s local\n# layer spec.\ncat >"$tmp/convert.py" <<\'PY\'\nimport importlib.util\nimport sys\n\nimport torch\n\n\ndef main() -> None:\n    from megatron.bridge import AutoBridge\n\n    hf_dir, out = sys.argv[1], sys.argv[2]\n    bridge = AutoBridge.from_hf_pretrained(hf_dir, torch_dtype=torch.bfloat16)\n    provider = bridge.to_megatron_provider(load_weights=True)\n    if importlib.util.find_spec("transformer_engine") is None:\n        from megatron.bridge.models.gpt_provider import local_layer_spec\n\n        provider.transformer_layer_spec = local_layer_spec\n        provider.apply_rope_fusion = False\n        provider.persist_layer_norm = False\n    provider.finalize()\n    model = provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)\n    kwargs = getattr(bridge._model_bridge, "get_hf_tokenizer_kwargs", lambda: {})() or {}\n    bridge.save_megatron_model(model, out, hf_tokenizer_path=hf_dir, hf_tokenizer_kwargs=kwargs, low_memory_save=True)\n    print("convert.sh: converted", hf_dir, "->", out, flush=True)\n\n\nif __name__ == "__main__":  # Bridge\'s low-memory save starts processes that import this file\n    main()\nPY\ntorchrun --nproc_per_node=1 --master_port="${MASTER_PORT:-29510}" "$tmp/convert.py" "$HF_DIR" "$tmp/out"\n[ -s "$tmp/out/latest_checkpointed_iteration.txt" ] || die "Bridge wrote no checkpoint"\nmv -- "$tmp/out" "$CONVERTED"\nprintf \'convert.sh: %s is ready; the training step loads it with --pretrained-checkpoint\\n\' "$CONVERTED"\n'

blocks = {}
debug_info = '2=32&4=34&11=36&12=38&13=40&14=42'

# Generated by `python -m compiler.render.render` from templates/convert.sh.j2: do not edit.
KEY = '4423a85fd7e9c2bf1146c60b0f3e2ef41d127b458f088b5f071a76df638e6508'
