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
        t_2 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    try:
        t_3 = environment.filters['sh_command']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'sh_command' found.")
    try:
        t_4 = environment.filters['sh_inline']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'sh_inline' found.")
    try:
        t_5 = environment.filters['sh_name']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'sh_name' found.")
    try:
        t_6 = environment.filters['sh_word']
    except KeyError:
        @internalcode
        def t_6(*unused):
            raise TemplateRuntimeError("No filter named 'sh_word' found.")
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_aistudio'):
        pass
        yield "# The AIStudio launch command: paste it into the job's start command (job.json carries it too).\n"
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_slurm'):
        pass
        yield '# The Slurm launch command: job.sbatch carries it and srun runs it once on every node, in the image.\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_kubernetes'):
        pass
        yield "# The Kubernetes launch command: trainjob.yaml carries it as the trainer's command on every node.\n"
    yield "# It checks the worker, builds Megatron's dataset helper, records the runtime, runs torchrun with\n# a complete train.log, records torchrun's exit status for verify.sh, and exits with that status.\n# What it prints itself before torchrun (its checks, the helper build, the runtime probe) is also\n# appended to launch.log beside train.log, so that a run that stops early leaves its reason there.\nset -euo pipefail\n\nRUN_ROOT="
    yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'run_root'))))
    yield '\nMEGATRON_ROOT='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'root'))))
    yield '\nEXPECTED_GPUS='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'expected_gpus'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield 'EXPECTED_NNODES='
        yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'expected_nodes'))))
        yield '\n'
    yield '\n# launch.log: set as soon as this worker\'s log directory is known (a worker\'s index is needed).\nLAUNCH_LOG=""\n\n# log_line TEXT: append TEXT to launch.log (creating its directory); nothing before it is known\nlog_line() {\n  if [ -n "$LAUNCH_LOG" ]; then\n    { mkdir -p "${LAUNCH_LOG%/*}" && printf \'%s\\n\' "$*" >>"$LAUNCH_LOG"; } 2>/dev/null || true\n  fi\n}\n\ndie() {\n  printf \'launch.sh: %s\\n\' "$*" >&2\n  log_line "launch.sh: $*"\n  exit 1\n}\n\n# logged CMD...: CMD\'s output (stderr merged) on the console and appended to launch.log; CMD\'s status\nlogged() {\n  "$@" 2>&1 | tee -ia "$LAUNCH_LOG"\n  return "${PIPESTATUS[0]}"\n}\n\n# stderr_logged CMD...: CMD\'s stdout where it was going, its stderr on the console and in launch.log\nstderr_logged() {\n  "$@" 2>&1 >&3 | tee -ia "$LAUNCH_LOG" >&2\n  return "${PIPESTATUS[0]}"\n} 3>&1\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield '\nis_count() {\n  case "$1" in\n    \'\' | *[!0-9]*) return 1 ;;\n    *) return 0 ;;\n  esac\n}\n\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_aistudio'):
            pass
            yield "# AIStudio's PyTorch DDP framework injects the worker count as WORLD_SIZE and this worker's index\n# as RANK. They are read into names of our own and checked against the spec; torchrun gives each\n# process its own WORLD_SIZE and RANK, so the platform's values are not passed on.\nNNODES=${WORLD_SIZE:?AIStudio WORLD_SIZE is required}\nNODE_RANK=${RANK:?AIStudio RANK is required}\nMASTER_ADDR=${MASTER_ADDR:?AIStudio MASTER_ADDR is required}\nMASTER_PORT=${MASTER_PORT:-"
            yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'default_master_port'))))
            yield '}\nunset WORLD_SIZE RANK\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_slurm'):
            pass
            yield "# Slurm starts one task of this script on every node (srun --ntasks-per-node=1): SLURM_NNODES is\n# the step's node count, SLURM_NODEID this node's index in it, SLURM_NTASKS the step's task count.\n# job.sbatch exports MASTER_ADDR (the allocation's first node, which is node 0) and MASTER_PORT:\n# the image has no scontrol to ask.\nNODES_FROM=SLURM_NNODES\nRANK_FROM=SLURM_NODEID\nNNODES=${SLURM_NNODES:?Slurm SLURM_NNODES is required: start this with srun from job.sbatch}\nNODE_RANK=${SLURM_NODEID:?Slurm SLURM_NODEID is required: start this with srun from job.sbatch}\nMASTER_ADDR=${MASTER_ADDR:?job.sbatch exports MASTER_ADDR}\nMASTER_PORT=${MASTER_PORT:-"
            yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'default_master_port'))))
            yield '}\n# One torchrun per node: a second task on a node would start a second set of ranks.\n[ "${SLURM_NTASKS:-}" = "$NNODES" ] ||\n  die "one task per node is required, but the step has ${SLURM_NTASKS:-no} tasks on $NNODES nodes (srun --ntasks-per-node=1)"\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_kubernetes'):
            pass
            yield "# Kubeflow Trainer's torch plugin (v2.3.0, pkg/runtime/framework/plugins/torch/torch.go) sets these\n# in the `node` container: PET_NNODES (trainer.numNodes), PET_NODE_RANK (the pod's Job completion\n# index), PET_MASTER_ADDR (node 0's pod DNS name) and PET_MASTER_PORT (29500). They are read into\n# names of our own and checked against the spec; the flags below override torchrun's own PET_ reads.\nNODES_FROM=PET_NNODES\nRANK_FROM=PET_NODE_RANK\nNNODES=${PET_NNODES:?Kubeflow Trainer PET_NNODES is required}\nNODE_RANK=${PET_NODE_RANK:?Kubeflow Trainer PET_NODE_RANK is required}\nMASTER_ADDR=${PET_MASTER_ADDR:?Kubeflow Trainer PET_MASTER_ADDR is required}\nMASTER_PORT=${PET_MASTER_PORT:?Kubeflow Trainer PET_MASTER_PORT is required}\n"
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_aistudio'):
            pass
            yield 'is_count "$NNODES" || die "WORLD_SIZE must be the number of workers, got \'$NNODES\'"\nis_count "$NODE_RANK" || die "RANK must be this worker\'s index, got \'$NODE_RANK\'"\n'
        else:
            pass
            yield 'is_count "$NNODES" || die "$NODES_FROM must be the number of nodes, got \'$NNODES\'"\nis_count "$NODE_RANK" || die "$RANK_FROM must be this node\'s index, got \'$NODE_RANK\'"\n'
        yield 'LAUNCH_LOG='
        yield str(environment.finalize(t_6(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
        yield '/launch.log\nlog_line "launch.sh: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${HOSTNAME:-an unnamed host} as worker $NODE_RANK of $NNODES"\nis_count "$MASTER_PORT" || die "MASTER_PORT must be a port number, got \'$MASTER_PORT\'"\n[ "$NNODES" -eq "$EXPECTED_NNODES" ] ||\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'on_aistudio'):
            pass
            yield '  die "the spec asks for $EXPECTED_NNODES workers, but the platform started $NNODES (WORLD_SIZE)"\n[ "$NODE_RANK" -lt "$NNODES" ] || die "RANK $NODE_RANK is not below the worker count $NNODES"\n'
        else:
            pass
            yield '  die "the spec asks for $EXPECTED_NNODES nodes, but the platform started $NNODES ($NODES_FROM)"\n[ "$NODE_RANK" -lt "$NNODES" ] || die "$RANK_FROM $NODE_RANK is not below the node count $NNODES"\n'
    else:
        pass
        yield 'LAUNCH_LOG='
        yield str(environment.finalize(t_6(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
        yield '/launch.log\nlog_line "launch.sh: started $(date -u +%Y-%m-%dT%H:%M:%SZ) on ${HOSTNAME:-an unnamed host}"\n'
    yield '\n[ -d "$MEGATRON_ROOT" ] || die "Megatron-LM is not at $MEGATRON_ROOT: check the image tag and megatron.root"\ngpu_list=$(stderr_logged nvidia-smi --query-gpu=index --format=csv,noheader) || die "nvidia-smi failed: this worker sees no GPU"\nGPUS_PER_NODE=0\nwhile IFS= read -r gpu; do\n  if [ -n "$gpu" ]; then\n    GPUS_PER_NODE=$((GPUS_PER_NODE + 1))\n  fi\ndone <<<"$gpu_list"\n[ "$GPUS_PER_NODE" -eq "$EXPECTED_GPUS" ] ||\n  die "the spec asks for $EXPECTED_GPUS GPUs per worker, but nvidia-smi lists $GPUS_PER_NODE on this worker"\n\nLOG_DIR='
    yield str(environment.finalize(t_6(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'log_dir'))))
    yield '\nTRAIN_LOG="$LOG_DIR/train.log"\nEXIT_RECORD="$LOG_DIR/exit_status"\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'resume'):
        pass
        yield '# training.resume is set: this run continues the one in the run root, and appends to its log.\n'
    else:
        pass
        yield '# Never overwrite an earlier run\'s results: a run root holds one run (training.resume continues one).\nif [ -e "$TRAIN_LOG" ]; then\n  die "$TRAIN_LOG already exists: an earlier run used this run root; give this run its own storage.run_root, or set training.resume: true to continue it"\nfi\n'
    yield 'mkdir -p "$LOG_DIR"\n\n# The official mock-data example uses this small C++ helper; each worker\'s image filesystem is its\n# own, so every worker builds it.\nlogged make -C '
    yield str(environment.finalize(t_6(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'datasets_dir'))))
    yield ' ||\n  die "building Megatron\'s dataset helper failed: the image needs make, a C++ compiler, the Python headers and pybind11"\n\n{\n  stderr_logged python -c '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'runtime_probe'))))
    yield ' ||\n    die "the runtime probe (import torch, megatron.core) failed: Megatron-LM must be importable from $MEGATRON_ROOT (PYTHONPATH)"\n  [ -n "${MEGATRON_COMMIT:-}" ] || die "MEGATRON_COMMIT is required: the image sets it (the Dockerfile\'s ENV)"\n  printf \'megatron_commit: %s\\n\' "${MEGATRON_COMMIT:?MEGATRON_COMMIT is required}"\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'multi_worker'):
        pass
        yield '  printf \'nnodes: %s\\n\' "$NNODES"\n  printf \'node_rank: %s\\n\' "$NODE_RANK"\n'
    yield '} >"$LOG_DIR/runtime.txt"\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'has_env'):
        pass
        yield "\n# Extra environment from the spec's training.env.\n"
        for (l_1_name, l_1_value) in environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'env'):
            _loop_vars = {}
            pass
            yield 'export '
            yield str(environment.finalize(t_5(l_1_name)))
            yield '='
            yield str(environment.finalize(t_2(l_1_value)))
            yield '\n'
        l_1_name = l_1_value = missing
    yield '\nrecord_exit() {\n  printf \'%s\\n\' "$1" >"$EXIT_RECORD"\n}\ntrap \'record_exit 129; exit 129\' HUP\ntrap \'record_exit 130; exit 130\' INT\ntrap \'record_exit 143; exit 143\' TERM\n\n# torchrun writes through a plain pipe, which bash waits for: train.log is complete when the\n# script exits, and PIPESTATUS keeps torchrun\'s own exit status.\nlog_line "launch.sh: torchrun starts; its output is in $TRAIN_LOG"\ncd "$RUN_ROOT"\nset +e\n'
    yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'torchrun'))))
    yield ' 2>&1 | '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'launch'), 'tee'))))
    yield '\nstatuses=("${PIPESTATUS[@]}")\nset -e\ntorchrun_status=${statuses[0]}\nrecord_exit "$torchrun_status"\nlog_line "launch.sh: torchrun exited with status $torchrun_status"\nif [ "${statuses[1]}" -ne 0 ] && [ "$torchrun_status" -eq 0 ]; then\n  die "torchrun succeeded but $TRAIN_LOG could not be written completely"\nfi\nexit "$torchrun_status"\n'

blocks = {}
debug_info = '2=49&4=51&7=54&10=57&19=61&20=63&21=65&22=67&23=70&53=73&62=76&69=79&72=81&82=84&87=86&99=89&106=96&110=98&118=107&133=110&136=112&148=119&152=121&156=123&161=127&164=130&165=134&181=140'

# Generated by `python -m compiler.render.render` from templates/launch.sh.j2: do not edit.
KEY = 'f8ac315c30ca9f885c16abfe320c6947c4c9f3c6607783e7dcc9f5b025ce7781'
