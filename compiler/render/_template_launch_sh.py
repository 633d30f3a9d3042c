from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'launch.sh.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_plan = resolve('plan')
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
        t_3 = environment.filters['dq_text']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'dq_text' found.")
    try:
        t_4 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    try:
        t_5 = environment.filters['sh_command']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'sh_command' found.")
    try:
        t_6 = environment.filters['sh_inline']
    except KeyError:
        @internalcode
        def t_6(*unused):
            raise TemplateRuntimeError("No filter named 'sh_inline' found.")
    try:
        t_7 = environment.filters['sh_name']
    except KeyError:
        @internalcode
        def t_7(*unused):
            raise TemplateRuntimeError("No filter named 'sh_name' found.")
    try:
        t_8 = environment.filters['sh_names']
    except KeyError:
        @internalcode
        def t_8(*unused):
            raise TemplateRuntimeError("No filter named 'sh_names' found.")
    try:
        t_9 = environment.filters['sh_param']
    except KeyError:
        @internalcode
        def t_9(*unused):
            raise TemplateRuntimeError("No filter named 'sh_param' found.")
    try:
        t_10 = environment.filters['sh_word']
    except KeyError:
        @internalcode
        def t_10(*unused):
            raise TemplateRuntimeError("No filter named 'sh_word' found.")
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n'
    for l_1_line in environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'note'):
        _loop_vars = {}
        pass
        yield '# '
        yield str(environment.finalize(t_2(l_1_line)))
        yield '\n'
    l_1_line = missing
    yield "# It checks the worker, builds Megatron's dataset helper, records the runtime, runs torchrun with\n# a complete train.log, records torchrun's exit status for verify.sh, and exits with that status.\n# What it prints itself before torchrun (its checks, the helper build, the runtime probe) is also\n# appended to launch.log beside train.log, so that a run that stops early leaves its reason there.\nset -euo pipefail\n\nRUN_ROOT="
    yield str(environment.finalize(t_4(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'run_root'))))
    yield '\nMEGATRON_ROOT='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'root'))))
    yield '\nEXPECTED_GPUS='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'expected_gpus'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield 'EXPECTED_NNODES='
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'expected_nodes'))))
        yield '\n'
    yield '\n# launch.log: set as soon as this worker\'s log directory is known (a worker\'s index is needed).\nLAUNCH_LOG=""\n\n# log_line TEXT: append TEXT to launch.log (creating its directory); nothing before it is known\nlog_line() {\n  if [ -n "$LAUNCH_LOG" ]; then\n    { mkdir -p "${LAUNCH_LOG%/*}" && printf \'%s\\n\' "$*" >>"$LAUNCH_LOG"; } 2>/dev/null || true\n  fi\n}\n\ndie() {\n  printf \'launch.sh: %s\\n\' "$*" >&2\n  log_line "launch.sh: $*"\n  exit 1\n}\n\n# logged CMD...: CMD\'s output (stderr merged) on the console and appended to launch.log; CMD\'s status\nlogged() {\n  "$@" 2>&1 | tee -ia "$LAUNCH_LOG"\n  return "${PIPESTATUS[0]}"\n}\n\n# stderr_logged CMD...: CMD\'s stdout where it was going, its stderr on the console and in launch.log\nstderr_logged() {\n  "$@" 2>&1 >&3 | tee -ia "$LAUNCH_LOG" >&2\n  return "${PIPESTATUS[0]}"\n} 3>&1\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield '\nis_count() {\n  case "$1" in\n    \'\' | *[!0-9]*) return 1 ;;\n    *) return 0 ;;\n  esac\n}\n\n'
        for l_1_line in environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'comment'):
            _loop_vars = {}
            pass
            yield '# '
            yield str(environment.finalize(t_2(l_1_line)))
            yield '\n'
        l_1_line = missing
        for (l_1_name, l_1_source) in environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'shown_names'):
            _loop_vars = {}
            pass
            yield str(environment.finalize(t_7(l_1_name)))
            yield '='
            yield str(environment.finalize(t_7(l_1_source)))
            yield '\n'
        l_1_name = l_1_source = missing
        yield 'NNODES='
        yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'nnodes'))))
        yield '\nNODE_RANK='
        yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'node_rank'))))
        yield '\nMASTER_ADDR='
        yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'master_addr'))))
        yield '\nMASTER_PORT='
        yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'master_port'))))
        yield '\n'
        if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'has_unset'):
            pass
            yield 'unset '
            yield str(environment.finalize(t_8(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'unset'))))
            yield '\n'
        if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'checks_task_count'):
            pass
            yield '# One torchrun per node: a second task on a node would start a second set of ranks.\n[ "'
            yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'task_count'))))
            yield '" = "$NNODES" ] ||\n  die "one task per node is required, but the step has '
            yield str(environment.finalize(t_9(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'task_count_shown'))))
            yield ' tasks on $NNODES nodes ('
            yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'task_hint'))))
            yield ')"\n'
        yield 'is_count "$NNODES" || die "'
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'nodes_named'))))
        yield ' must be the number of '
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'unit'))))
        yield 's, got \'$NNODES\'"\nis_count "$NODE_RANK" || die "'
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'rank_named'))))
        yield ' must be this '
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'unit'))))
        yield '\'s index, got \'$NODE_RANK\'"\nLAUNCH_LOG='
        yield str(environment.finalize(t_10(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
        yield '/launch.log\nlog_line "launch.sh: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${HOSTNAME:-an unnamed host} as worker $NODE_RANK of $NNODES"\nis_count "$MASTER_PORT" || die "MASTER_PORT must be a port number, got \'$MASTER_PORT\'"\n[ "$NNODES" -eq "$EXPECTED_NNODES" ] ||\n  die "the spec asks for $EXPECTED_NNODES '
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'unit'))))
        yield 's, but the platform started $NNODES ('
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'nodes_named'))))
        yield ')"\n[ "$NODE_RANK" -lt "$NNODES" ] || die "'
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'rank_named'))))
        yield ' $NODE_RANK is not below the '
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'node_env'), 'unit'))))
        yield ' count $NNODES"\n'
    else:
        pass
        yield 'LAUNCH_LOG='
        yield str(environment.finalize(t_10(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
        yield '/launch.log\nlog_line "launch.sh: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${HOSTNAME:-an unnamed host}"\n'
    yield '\n[ -d "$MEGATRON_ROOT" ] || die "Megatron-LM is not at $MEGATRON_ROOT: check the image tag and megatron.root"\ngpu_list=$(stderr_logged nvidia-smi --query-gpu=index --format=csv,noheader) || die "nvidia-smi failed: this worker sees no GPU"\nGPUS_PER_NODE=0\nwhile IFS= read -r gpu; do\n  if [ -n "$gpu" ]; then\n    GPUS_PER_NODE=$((GPUS_PER_NODE + 1))\n  fi\ndone <<<"$gpu_list"\n[ "$GPUS_PER_NODE" -eq "$EXPECTED_GPUS" ] ||\n  die "the spec asks for $EXPECTED_GPUS GPUs per worker, but nvidia-smi lists $GPUS_PER_NODE on this worker"\n\nLOG_DIR='
    yield str(environment.finalize(t_10(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
    yield '\nTRAIN_LOG="$LOG_DIR/train.log"\nEXIT_RECORD="$LOG_DIR/exit_status"\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'resume'):
        pass
        yield '# training.resume is set: this run continues the one in the run root, and appends to its log.\n'
    else:
        pass
        yield '# Never overwrite an earlier run\'s results: a run root holds one run (training.resume continues one).\nif [ -e "$TRAIN_LOG" ]; then\n  die "$TRAIN_LOG already exists: an earlier run used this run root; give this run its own storage.run_root, or set training.resume: true to continue it"\nfi\n'
    yield 'mkdir -p "$LOG_DIR"\n\n# The official mock-data example uses this small C++ helper; each worker\'s image filesystem is its\n# own, so every worker builds it.\nlogged make -C '
    yield str(environment.finalize(t_10(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'datasets_dir'))))
    yield ' ||\n  die "building Megatron\'s dataset helper failed: the image needs make, a C++ compiler, the Python headers and pybind11"\n\n{\n  stderr_logged python -c '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'runtime_probe'))))
    yield ' ||\n    die "the runtime probe (import torch, megatron.core) failed: Megatron-LM must be importable from $MEGATRON_ROOT (PYTHONPATH)"\n  [ -n "${MEGATRON_COMMIT:-}" ] || die "MEGATRON_COMMIT is required: the image sets it (the Dockerfile\'s ENV)"\n  printf \'megatron_commit: %s\\n\' "${MEGATRON_COMMIT:?MEGATRON_COMMIT is required}"\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield '  printf \'nnodes: %s\\n\' "$NNODES"\n  printf \'node_rank: %s\\n\' "$NODE_RANK"\n'
    yield '} >"$LOG_DIR/runtime.txt"\n'
    if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'has_check'):
        pass
        yield "\n# The training data, before torchrun (and before the job's GPUs wait on it): every prefix has its\n# .bin and .idx; where the preparation left its manifest beside a prefix, the data was prepared with\n# the spec's tokenizer"
        if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'has_vocab_check'):
            pass
            yield " and its token ids fit the model's embedding"
        yield '.\nDATA_MANIFEST_LINES=('
        for l_1_line in environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'manifest_lines'):
            _loop_vars = {}
            pass
            yield ' '
            yield str(environment.finalize(t_4(l_1_line)))
        l_1_line = missing
        yield ' )\ncheck_data_prefix() {\n  local prefix=$1 manifest want found\n  manifest=$1'
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'manifest_suffix'))))
        yield '\n  if [ ! -f "$prefix.bin" ] || [ ! -f "$prefix.idx" ]; then\n    die "the data prefix $prefix has no $prefix.bin/.idx: the data was never prepared there (run the preparation first: training.data.prepare; or fix training.data.paths)"\n  fi\n  [ -f "$manifest" ] || return 0\n  for want in "${DATA_MANIFEST_LINES[@]}"; do\n    if ! grep -qxF -- "$want" "$manifest"; then\n      found=$(grep -m 1 "^${want%%:*}:" "$manifest" || printf \'no %s\' "${want%%:*}")\n      die "the data prefix $prefix was prepared with $found, but the spec says $want: prepare it again with training.data.tokenizer, or set the tokenizer it was prepared with"\n    fi\n  done\n'
        if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'has_vocab_check'):
            pass
            yield '  local rows='
            yield str(environment.finalize(t_4(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'embedding_rows'))))
            yield '\n  found=$(sed -n \'s/^max_token_id: //p\' "$manifest")\n  if [ -n "$found" ] && [ "$found" -ge "$rows" ] 2>/dev/null; then\n    die "the data prefix $prefix was prepared with token ids up to $found, beyond the model\'s $rows embedding rows: training.model.vocab_size must cover the tokenizer that prepared it"\n  fi\n'
        yield '}\n'
        for l_1_prefix in environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'data'), 'prefixes'):
            _loop_vars = {}
            pass
            yield 'check_data_prefix '
            yield str(environment.finalize(t_4(l_1_prefix)))
            yield '\n'
        l_1_prefix = missing
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'has_env'):
        pass
        yield "\n# Extra environment from the spec's training.env.\n"
        for (l_1_name, l_1_value) in environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'env'):
            _loop_vars = {}
            pass
            yield 'export '
            yield str(environment.finalize(t_7(l_1_name)))
            yield '='
            yield str(environment.finalize(t_4(l_1_value)))
            yield '\n'
        l_1_name = l_1_value = missing
    yield '\nrecord_exit() {\n  printf \'%s\\n\' "$1" >"$EXIT_RECORD"\n}\ntrap \'record_exit 129; exit 129\' HUP\ntrap \'record_exit 130; exit 130\' INT\ntrap \'record_exit 143; exit 143\' TERM\n\n# torchrun writes through a plain pipe, which bash waits for: train.log is complete when the\n# script exits, and PIPESTATUS keeps torchrun\'s own exit status.\nlog_line "launch.sh: torchrun starts; its output is in $TRAIN_LOG"\ncd "$RUN_ROOT"\nset +e\n'
    yield str(environment.finalize(t_5(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'torchrun'))))
    yield ' 2>&1 | '
    yield str(environment.finalize(t_6(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'tee'))))
    yield '\nstatuses=("${PIPESTATUS[@]}")\nset -e\ntorchrun_status=${statuses[0]}\nrecord_exit "$torchrun_status"\nlog_line "launch.sh: torchrun exited with status $torchrun_status"\nif [ "${statuses[1]}" -ne 0 ] && [ "$torchrun_status" -eq 0 ]; then\n  die "torchrun succeeded but $TRAIN_LOG could not be written completely"\nfi\nexit "$torchrun_status"\n'

blocks = {}
debug_info = '2=73&4=75&5=79&13=83&14=85&15=87&16=89&17=92&47=95&56=98&57=102&59=105&60=108&62=114&63=116&64=118&65=120&66=122&67=125&69=127&71=130&72=132&74=137&75=141&76=145&80=147&81=151&83=158&98=161&101=163&113=170&117=172&121=174&126=178&130=181&131=185&134=192&145=194&146=197&153=200&154=204&157=207&160=210&161=214&177=220'

# Generated by `python -m compiler.render.render` from templates/launch.sh.j2: do not edit.
KEY = '89375904082bac2747d508e8045f4b9ea79c31cec416b12aefe0d0df40e56777'
