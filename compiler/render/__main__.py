"""`python -m compiler.render`: regenerate compiler/render/precompiled.json from templates/ (precompile.py)."""

import json
import sys

from .precompile import PRECOMPILED, generate
from .render import _environment

document = generate(_environment())
PRECOMPILED.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
sys.stdout.write(f"{len(document['templates'])} templates precompiled into {PRECOMPILED}\n")
