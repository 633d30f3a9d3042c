from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'buildx.sh.j2'

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
    yield "\n#\n# Path 2: build the Megatron image with Docker Buildx from the Dockerfile beside this script and\n# push it to the target availability zone's registry. Run it on a machine or CI runner with Docker\n# Engine, Buildx, git, and access to the base registry, GitHub and the target registry.\n# Credentials are never stored: NGC_API_KEY and DST_PASSWORD are read from the environment when\n# set; an nvcr.io base is logged in to as image.base_login says ("
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'base_login'))))
    yield ').\nset -euo pipefail\n\nPLATFORM='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'platform'))))
    yield '\nMEGATRON_IMAGE='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'reference'))))
    yield '\nMEGATRON_REPO='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'repo'))))
    yield '\nMEGATRON_COMMIT='
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'megatron'), 'commit'))))
    yield '\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'has_registry_username'):
        pass
        yield 'DST_REGISTRY='
        yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'registry'))))
        yield '\nDST_USERNAME='
        yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'registry_username'))))
        yield '\n'
    yield '\ndie() {\n  printf \'buildx.sh: %s\\n\' "$*" >&2\n  exit 1\n}\n\nhere=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n[ -f "$here/Dockerfile" ] || die "the generated Dockerfile must sit beside this script ($here)"\nwork=$(mktemp -d)\ntrap \'rm -rf "$work"\' EXIT\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'ngc_login'):
        pass
        yield '\n# NGC: the user name is literally $oauthtoken, the password an NGC API key.\n'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'ngc_login_required'):
            pass
            yield '# image.base_login is always: the base needs a login.\nif [ -n "${NGC_API_KEY:-}" ]; then\n  printf \'%s\' "$NGC_API_KEY" | docker login nvcr.io --username "\\$oauthtoken" --password-stdin\nelse\n  [ -t 0 ] || die "image.base_login is always: set NGC_API_KEY to an NGC API key (no terminal to prompt on)"\n  docker login nvcr.io --username "\\$oauthtoken"\nfi\n'
        else:
            pass
            yield '# image.base_login is auto: log in only when NGC_API_KEY is set; the NGC PyTorch images pull\n# anonymously.\nif [ -n "${NGC_API_KEY:-}" ]; then\n  printf \'%s\' "$NGC_API_KEY" | docker login nvcr.io --username "\\$oauthtoken" --password-stdin\nfi\n'
        yield 'unset NGC_API_KEY\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'image'), 'has_registry_username'):
        pass
        yield '\n# The target registry: the password the image center gave for DST_USERNAME.\nif [ -n "${DST_PASSWORD:-}" ]; then\n  printf \'%s\' "$DST_PASSWORD" | docker login "$DST_REGISTRY" --username "$DST_USERNAME" --password-stdin\nelse\n  docker login "$DST_REGISTRY" --username "$DST_USERNAME"\nfi\nunset DST_PASSWORD\n'
    else:
        pass
        yield '\n# image.registry_username is not set in the spec: log in to the target registry (the host part\n# of MEGATRON_IMAGE) with docker login before running this script.\n'
    yield '\n# The pinned commit, verified, exported without git history into the build context.\ngit clone --filter=blob:none "$MEGATRON_REPO" "$work/Megatron-LM"\ngit -C "$work/Megatron-LM" checkout --detach "$MEGATRON_COMMIT"\n[ "$(git -C "$work/Megatron-LM" rev-parse HEAD)" = "$MEGATRON_COMMIT" ] ||\n  die "the checkout is not at $MEGATRON_COMMIT"\nmkdir -p "$work/megatron-image/Megatron-LM"\ngit -C "$work/Megatron-LM" archive "$MEGATRON_COMMIT" | tar -x -C "$work/megatron-image/Megatron-LM"\ncp "$here/Dockerfile" "$work/megatron-image/Dockerfile"\n\ndocker buildx build \\\n  --platform "$PLATFORM" \\\n  --build-arg MEGATRON_COMMIT="$MEGATRON_COMMIT" \\\n  --tag "$MEGATRON_IMAGE" \\\n  --push \\\n  "$work/megatron-image"\n\ndocker buildx imagetools inspect "$MEGATRON_IMAGE"\n\n# Record the digest just pushed in the lock beside the spec: the job then runs that exact image.\nprintf \'buildx.sh: pushed %s; now run: megatron-compile lock --record-built %s\\n\' "$MEGATRON_IMAGE" '
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'), 'spec'))))
    yield ' >&2\n'

blocks = {}
debug_info = '2=25&8=27&11=29&12=31&13=33&14=35&15=37&16=40&17=42&29=45&32=48&49=55&83=62'

# Generated by `python -m compiler.render.render` from templates/buildx.sh.j2: do not edit.
KEY = '5547905d5e5e80fc8febb6d881523f51db659d33a9b06b5b9437e0696dacb3e4'
