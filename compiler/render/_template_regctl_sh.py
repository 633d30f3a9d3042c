from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'regctl.sh.j2'

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
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield "\n#\n# Path 1: copy the base image into the target availability zone's registry with regctl, then\n# derive the Megatron image from it by adding the pinned source as one layer (regctl image mod).\n# Log in to the target registry with regctl first. An nvcr.io base is logged in to as\n# image.base_login says ("
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'base_login'))))
    yield ').\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'pinned'):
        pass
        yield '# The base is pinned by the lock beside the spec: its digest is written here and compared, never\n# resolved again.\n'
    yield 'set -euo pipefail\n\nPLATFORM='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'platform'))))
    yield '\nSRC_BASE_IMAGE='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'regctl_source'))))
    yield '\nBASE_IMAGE='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'base_mirror'))))
    yield '\nMEGATRON_IMAGE='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'reference'))))
    yield '\nMEGATRON_REPO='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'repo'))))
    yield '\nMEGATRON_COMMIT='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'commit'))))
    yield '\nMEGATRON_ROOT='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'root'))))
    yield '\nMEGATRON_SOURCE_URL='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'source_url'))))
    yield '\n\ndie() {\n  printf \'regctl.sh: %s\\n\' "$*" >&2\n  exit 1\n}\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'ngc_login'):
        pass
        yield '\n# NGC: the user name is literally $oauthtoken, the password an NGC API key; it is never stored.\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'ngc_login_required'):
            pass
            yield '# image.base_login is always: the base needs a login.\nif [ -z "${NGC_API_KEY:-}" ]; then\n  [ -t 0 ] || die "image.base_login is always: set NGC_API_KEY to an NGC API key (no terminal to prompt on)"\n  read -rsp \'NGC API key: \' NGC_API_KEY || die "no NGC API key: set NGC_API_KEY"\n  printf \'\\n\' >&2\n  [ -n "$NGC_API_KEY" ] || die "image.base_login is always: the NGC API key is empty"\nfi\n'
        else:
            pass
            yield '# image.base_login is auto: log in only when NGC_API_KEY is set; the NGC PyTorch images pull\n# anonymously.\n'
        yield 'if [ -n "${NGC_API_KEY:-}" ]; then\n  printf \'%s\' "$NGC_API_KEY" |\n    regctl registry login nvcr.io \\\n      --user "\\$oauthtoken" \\\n      --pass-stdin\nfi\nunset NGC_API_KEY\n'
    yield '\nwork=$(mktemp -d)\ntrap \'rm -rf "$work"\' EXIT\ncd "$work"\n\n# Copy the base image for one platform and check that the copy is the same image.\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'pinned'):
        pass
        yield "# The lock's digest of the base for PLATFORM, as a literal (megatron-compile lock): the copy must have it.\nSRC_BASE_DIGEST="
        yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'base_digest'))))
        yield '\n'
    else:
        pass
        yield 'SRC_BASE_DIGEST=$(\n  regctl image digest \\\n    --platform "$PLATFORM" \\\n    "$SRC_BASE_IMAGE"\n)\n'
    yield 'regctl image copy \\\n  --platform "$PLATFORM" \\\n  "$SRC_BASE_IMAGE" \\\n  "$BASE_IMAGE"\n[ "$(regctl image digest "$BASE_IMAGE")" = "$SRC_BASE_DIGEST" ] ||\n  die "$BASE_IMAGE does not have the digest of $SRC_BASE_IMAGE ($SRC_BASE_DIGEST)"\n\n# The pinned commit, verified, exported without git history as the layer\'s root filesystem.\ngit clone --filter=blob:none "$MEGATRON_REPO" Megatron-LM\ngit -C Megatron-LM checkout --detach "$MEGATRON_COMMIT"\n[ "$(git -C Megatron-LM rev-parse HEAD)" = "$MEGATRON_COMMIT" ] ||\n  die "the checkout is not at $MEGATRON_COMMIT"\nmkdir -p "megatron-rootfs$MEGATRON_ROOT"\ngit -C Megatron-LM archive "$MEGATRON_COMMIT" | tar -x -C "megatron-rootfs$MEGATRON_ROOT"\n\n# --create writes MEGATRON_IMAGE only; BASE_IMAGE is left as it was.\nregctl image mod "$BASE_IMAGE" \\\n  --create "$MEGATRON_IMAGE" \\\n  --layer-add "dir=megatron-rootfs,platform=$PLATFORM" \\\n  --env "MEGATRON_COMMIT=$MEGATRON_COMMIT" \\\n  --env "PYTHONPATH=$MEGATRON_ROOT" \\\n  --label "org.opencontainers.image.source=$MEGATRON_SOURCE_URL" \\\n  --label "org.opencontainers.image.revision=$MEGATRON_COMMIT"\n\n[ "$(regctl image digest "$BASE_IMAGE")" = "$SRC_BASE_DIGEST" ] || die "$BASE_IMAGE changed while deriving $MEGATRON_IMAGE"\nregctl image get-file \\\n  --platform "$PLATFORM" \\\n  "$MEGATRON_IMAGE" \\\n  "$MEGATRON_ROOT/megatron/core/package_info.py" \\\n  >/dev/null\nregctl image digest "$MEGATRON_IMAGE"\n\n# regctl\'s layer is not reproducible: record the digest just pushed in the lock beside the spec.\nprintf \'regctl.sh: pushed %s; now run: megatron-compile lock --record-built %s\\n\' "$MEGATRON_IMAGE" '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'), 'spec'))))
    yield ' >&2\n'

blocks = {}
debug_info = '2=25&7=27&8=29&14=33&15=35&16=37&17=39&18=41&19=43&20=45&21=47&27=49&30=52&56=60&58=63&99=69'

# Generated by `python -m compiler.render.render` from templates/regctl.sh.j2: do not edit.
KEY = '1e3ba0bc870faa0ce92530f8d4778c8574c1d290ff3b7807c496b7c167a6ae13'
