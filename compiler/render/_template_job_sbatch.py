from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'job.sbatch.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_plan = resolve('plan')
    l_0_step = resolve('step')
    l_0_embedded = resolve('embedded')
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
        t_3 = environment.filters['heredoc']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'heredoc' found.")
    try:
        t_4 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    try:
        t_5 = environment.filters['sh_name']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'sh_name' found.")
    pass
    yield '#!/bin/bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n# The Slurm batch job: `mkdir -p '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'run_root'))))
    yield ' && sbatch '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'file'))))
    yield '` from a login node\n# (Slurm opens --output before the script starts, so the run root must exist). It needs pyxis and\n# enroot on the compute nodes and the shared storage mounted on every node.\n#SBATCH --job-name='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'name'))))
    yield '\n#SBATCH --partition='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'partition'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'has_account'):
        pass
        yield '#SBATCH --account='
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'account'))))
        yield '\n'
    yield '#SBATCH --nodes='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'nodes'))))
    yield '\n#SBATCH --ntasks-per-node=1\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'has_gpus'):
        pass
        yield '#SBATCH --gpus-per-node='
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'gpus_per_node'))))
        yield '\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'exclusive'):
        pass
        yield '#SBATCH --exclusive\n'
    yield '#SBATCH --time='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'time_limit'))))
    yield '\n#SBATCH --output='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'output'))))
    yield '\nset -euo pipefail\n\nRUN_ROOT='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'run_root'))))
    yield '\n\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'rendezvous'):
        pass
        yield '# Node 0 of the step is the first node of the allocation: it hosts torchrun\'s rendezvous. The\n# container has no Slurm commands, so the address is looked up here and exported to every task\n# (srun passes the environment on, and pyxis passes it into the container). sed reads the whole\n# list: head would close the pipe early and, on a long node list, pipefail would fail the job.\nMASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)\nMASTER_PORT=${MASTER_PORT:-'
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'default_master_port'))))
        yield '}\nexport MASTER_ADDR MASTER_PORT\n\n'
    yield '# Every node runs the same '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'script'))))
    yield '; it travels in this file (sbatch copies only the batch script)\n# and is written to the shared storage, which every node and container sees at the same path.\nLAUNCH="$RUN_ROOT/slurm/'
    yield str(environment.finalize(t_5(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'script_stem'))))
    yield '-$SLURM_JOB_ID.sh"\nmkdir -p "$RUN_ROOT/slurm"\ncat >"$LAUNCH" <<\'LAUNCH_SH\'\n'
    yield str(environment.finalize(t_3((undefined(name='embedded') if l_0_embedded is missing else l_0_embedded))))
    yield "\nLAUNCH_SH\n# One task per node, inside the image (pyxis), with the shared storage and without $HOME.\n# --kill-on-bad-exit ends every node's torchrun as soon as one task fails, instead of leaving the\n# others in torchrun's exit barrier or a hung collective."
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'rendezvous'):
        pass
        yield " --container-env keeps the two values\n# exported above over the image's own (pyxis lets the image's environment win otherwise)."
    yield '\nstatus=0\nsrun --ntasks-per-node=1 --kill-on-bad-exit=1 \\\n  --container-image='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'container_image'))))
    yield ' \\\n  --container-mounts='
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'container_mounts'))))
    yield ' \\\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'rendezvous'):
        pass
        yield '  --container-env=MASTER_ADDR,MASTER_PORT \\\n'
    yield '  --no-container-mount-home \\\n  bash "$LAUNCH" || status=$?\nprintf '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'exit_format'))))
    yield ' "$status"\nexit "$status"\n'

blocks = {}
debug_info = '2=45&4=47&7=51&8=53&9=55&10=58&12=61&14=63&15=66&17=68&20=72&21=74&24=76&26=78&32=81&36=84&38=86&41=88&45=90&50=94&51=96&52=98&57=102'

# Generated by `python -m compiler.render.render` from templates/job.sbatch.j2: do not edit.
KEY = 'e601a5e75dcf8354f8f967fb08dd860688efc935cc97bd46671534d5afa665f5'
