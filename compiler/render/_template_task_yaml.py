from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'task.yaml.j2'

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
        t_3 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    try:
        t_4 = environment.filters['yaml']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'yaml' found.")
    try:
        t_5 = environment.filters['yaml_heredoc']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'yaml_heredoc' found.")
    pass
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n# The SkyPilot task: `sky launch -c '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'name'))))
    yield ' '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'file'))))
    yield '` ('
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'nodes'))))
    yield ' node(s)). SkyPilot runs\n# the run section on every node, in the image, with the bucket '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'bucket'))))
    yield ' mounted at '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'mount_path'))))
    yield ';\n# verify.sh checks the run root from any machine that mounts it.\nname: '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'name'))))
    yield '\nresources:\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'has_gpus'):
        pass
        yield '  accelerators: '
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'accelerators'))))
        yield '\n'
    yield '  image_id: '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'image_id'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'has_cloud'):
        pass
        yield '  cloud: '
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'cloud'))))
        yield '\n'
    yield 'num_nodes: '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'nodes'))))
    yield '\nfile_mounts:\n  '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'mount_path'))))
    yield ':\n    name: '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'bucket'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'has_store'):
        pass
        yield '    store: '
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'store'))))
        yield '\n'
    yield '    mode: '
    yield str(environment.finalize(t_4(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'mode'))))
    yield '\nrun: |\n  set -euo pipefail\n'
    if environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'rendezvous'):
        pass
        yield '  # Node 0 hosts torchrun\'s rendezvous: its address is the first line of SKYPILOT_NODE_IPS. sed\n  # reads the whole list (head would close the pipe early, and pipefail would fail the task).\n  MASTER_ADDR=$(printf \'%s\\n\' "$SKYPILOT_NODE_IPS" | sed -n 1p)\n  MASTER_PORT=${MASTER_PORT:-'
        yield str(environment.finalize(t_3(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'job'), 'default_master_port'))))
        yield '}\n  export MASTER_ADDR MASTER_PORT\n'
    yield '  # The step\'s script travels in this file; every node writes it to a file of its own and runs it.\n  LAUNCH=$(mktemp)\n  cat >"$LAUNCH" <<\'LAUNCH_SH\'\n'
    yield str(environment.finalize(t_5((undefined(name='embedded') if l_0_embedded is missing else l_0_embedded))))
    yield '\n  LAUNCH_SH\n  status=0\n  bash "$LAUNCH" || status=$?\n  rm -f "$LAUNCH"\n  exit "$status"\n'

blocks = {}
debug_info = '1=44&3=46&4=52&6=56&8=58&9=61&11=64&12=66&13=69&15=72&17=74&18=76&19=78&20=81&22=84&25=86&29=89&35=92'

# Generated by `python -m compiler.render.render` from templates/task.yaml.j2: do not edit.
KEY = '425ce24877916e91dadc99dfffb7dab4e75d965e4969fe7eac3a9b061a75fd8a'
