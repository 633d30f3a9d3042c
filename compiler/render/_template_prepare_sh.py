from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'prepare.sh.j2'

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
    try:
        t_4 = environment.filters['sh_command']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'sh_command' found.")
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n# The data preparation job ('
    yield str(environment.finalize(t_2(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'document'))))
    yield " carries this command): Megatron-LM's\n# tools/preprocess_data.py turns each input into .bin/.idx prefixes under the output directory,\n# which the training step reads. Idempotent: a prefix whose .bin, .idx and manifest exist is\n# skipped; a new one is written in a temporary directory and published file by file, the\n# manifest last, so a killed run leaves no prefix that training would read.\nset -euo pipefail\n\nOUTPUT_DIR="
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'prepare'), 'output_dir'))))
    yield '\nMEGATRON_ROOT='
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'root'))))
    yield '\nMANIFEST_SUFFIX=.manifest\n\ndie() {\n  printf \'prepare.sh: %s\\n\' "$*" >&2\n  exit 1\n}\n\n[ -d "$MEGATRON_ROOT" ] || die "Megatron-LM is not at $MEGATRON_ROOT: check the image tag and megatron.root"\nmkdir -p "$OUTPUT_DIR"\n# Temporary directories of an earlier run that was killed: nothing reads them.\nfor stale in "$OUTPUT_DIR"/.prepare-*; do\n  if [ -d "$stale" ]; then\n    printf \'prepare.sh: removing %s, left by an interrupted run\\n\' "$stale"\n    rm -rf -- "$stale"\n  fi\ndone\ntmp=""\ntrap \'if [ -n "$tmp" ]; then rm -rf -- "$tmp"; fi\' EXIT\n\n# complete PREFIX...: for each, both files and the manifest are there\ncomplete() {\n  local prefix\n  for prefix in "$@"; do\n    [ -s "$prefix.bin" ] && [ -s "$prefix.idx" ] && [ -s "$prefix$MANIFEST_SUFFIX" ] || return 1\n  done\n}\n\n# publish PRODUCED PREFIX INPUT KEY SECONDS: move a finished prefix into place, the manifest last\npublish() {\n  local produced=$1 prefix=$2 input=$3 key=$4 seconds=$5 counts\n  counts=$(python -c '
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'prepare'), 'count_probe'))))
    yield ' "$produced") || die "cannot read back $produced"\n  case $counts in\n  *"documents: 0"*) die "$input gave no document under the key \'$key\': check json_keys" ;;\n  esac\n  rm -f -- "$prefix$MANIFEST_SUFFIX" "$prefix.bin" "$prefix.idx"\n  mv -- "$produced.bin" "$prefix.bin"\n  mv -- "$produced.idx" "$prefix.idx"\n  {\n    printf \'input: %s\\n\' "$input"\n    printf \'input_bytes: %s\\n\' "$(stat -c %s -- "$input")"\n    printf \'input_sha256_first_mb: %s\\n\' "$(head -c 1048576 -- "$input" | sha256sum | cut -d\' \' -f1)"\n    printf \'json_key: %s\\n\' "$key"\n'
    for (l_1_name, l_1_value) in environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'prepare'), 'manifest'):
        _loop_vars = {}
        pass
        yield "    printf '%s: %s\\n' "
        yield str(environment.finalize(t_3(l_1_name)))
        yield ' '
        yield str(environment.finalize(t_3(l_1_value)))
        yield '\n'
    l_1_name = l_1_value = missing
    yield '    printf \'%s\\n\' "$counts"\n    printf \'bin_bytes: %s\\n\' "$(stat -c %s -- "$prefix.bin")"\n    printf \'idx_bytes: %s\\n\' "$(stat -c %s -- "$prefix.idx")"\n    printf \'seconds: %s\\n\' "$seconds"\n  } >"$prefix$MANIFEST_SUFFIX.tmp"\n  mv -- "$prefix$MANIFEST_SUFFIX.tmp" "$prefix$MANIFEST_SUFFIX"\n  printf \'prepare.sh: wrote %s (.bin, .idx, manifest)\\n\' "$prefix"\n}\n'
    for l_1_item in environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'prepare'), 'inputs'):
        _loop_vars = {}
        pass
        yield '\n# '
        yield str(environment.finalize(t_3(environment.getattr(l_1_item, 'input'))))
        yield '\nif complete'
        for l_2_out in environment.getattr(l_1_item, 'outputs'):
            _loop_vars = {}
            pass
            yield ' '
            yield str(environment.finalize(t_3(environment.getattr(l_2_out, 'prefix'))))
        l_2_out = missing
        yield "; then\n  printf 'prepare.sh: %s is prepared already; skipping it\\n' "
        yield str(environment.finalize(t_3(environment.getattr(l_1_item, 'input'))))
        yield '\nelse\n  [ -r '
        yield str(environment.finalize(t_3(environment.getattr(l_1_item, 'input'))))
        yield ' ] || die '
        yield str(environment.finalize(t_3(environment.getattr(l_1_item, 'input'))))
        yield '": cannot read the input"\n  tmp=$(mktemp -d "$OUTPUT_DIR/.prepare-XXXXXX")\n  started=$SECONDS\n  '
        yield str(environment.finalize(t_4(environment.getattr(l_1_item, 'command'))))
        yield '\n'
        for l_2_out in environment.getattr(l_1_item, 'outputs'):
            _loop_vars = {}
            pass
            yield '  publish "$tmp/"'
            yield str(environment.finalize(t_3(environment.getattr(l_2_out, 'produced'))))
            yield ' '
            yield str(environment.finalize(t_3(environment.getattr(l_2_out, 'prefix'))))
            yield ' '
            yield str(environment.finalize(t_3(environment.getattr(l_1_item, 'input'))))
            yield ' '
            yield str(environment.finalize(t_3(environment.getattr(l_2_out, 'key'))))
            yield ' "$((SECONDS - started))"\n'
        l_2_out = missing
        yield '  rm -rf -- "$tmp"\n  tmp=""\nfi\n'
    l_1_item = missing
    yield "printf 'prepare.sh: done; verify with verify-prepare.sh\\n'\n"

blocks = {}
debug_info = '2=38&4=40&11=42&12=44&43=46&55=48&56=52&66=58&68=62&69=64&70=71&72=73&75=77&76=79&77=83'

# Generated by `python -m compiler.render.render` from templates/prepare.sh.j2: do not edit.
KEY = '784e4505f246c2a1c8e5a29dc8f112f9014c67d9a1cd9be0e074b381a9923757'
