from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'verify.sh.j2'

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
        t_2 = environment.filters['sh']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'sh' found.")
    try:
        t_3 = environment.filters['sh_inline']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'sh_inline' found.")
    try:
        t_4 = environment.filters['sh_name']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'sh_name' found.")
    pass
    yield '#!/usr/bin/env bash\n'
    yield str(environment.finalize(t_1(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'header'))))
    yield '\n#\n# The checks after the job, from any machine that mounts the shared storage:\n#   verify.sh [--json] [RUN_ROOT]        (RUN_ROOT defaults to the spec\'s run root)\n# One line per check with what it expected and what it found; exit 0 only if every check passes.\n# Needs bash alone: every file is read with bash builtins.\nset -uo pipefail\n\njson=0\nif [ "${1:-}" = "--json" ]; then\n  json=1\n  shift\nfi\nif [ "$#" -gt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then\n  printf \'usage: verify.sh [--json] [RUN_ROOT]\\n\' >&2\n  exit 2\nfi\nRUN_ROOT=${1:-'
    yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'verify'), 'root'))))
    yield '}\n\npassed=0\nfailed=0\njson_items=()\n\njson_string() {\n  local s=$1\n  s=${s//\\\\/\\\\\\\\}\n  s=${s//\\"/\\\\\\"}\n  s=${s//$\'\\n\'/\\\\n}\n  s=${s//$\'\\t\'/\\\\t}\n  s=${s//[$\'\\001\'-$\'\\037\']/}\n  printf \'"%s"\' "$s"\n}\n\nreport() {\n  local status=$1 label=$2 expected=$3 found=$4\n  if [ "$status" = pass ]; then\n    passed=$((passed + 1))\n  else\n    failed=$((failed + 1))\n  fi\n  if [ "$json" -eq 1 ]; then\n    json_items+=("{\\"check\\": $(json_string "$label"), \\"status\\": \\"$status\\", \\"expected\\": $(json_string "$expected"), \\"found\\": $(json_string "$found")}")\n  elif [ "$status" = pass ]; then\n    printf \'ok    %s: expected %s, found %s\\n\' "$label" "$expected" "$found"\n  else\n    printf \'FAIL  %s: expected %s, found %s\\n\' "$label" "$expected" "$found"\n  fi\n}\n\n# compare LABEL EXPECTED FOUND\ncompare() {\n  if [ "$2" = "$3" ]; then\n    report pass "$1" "$2" "$3"\n  else\n    report fail "$1" "$2" "$3"\n  fi\n}\n\n# check_exit LABEL FILE: launch.sh\'s record of torchrun\'s exit status is 0\ncheck_exit() {\n  local found="no record ($2)"\n  if [ -r "$2" ]; then\n    IFS= read -r found <"$2" || true\n  fi\n  compare "$1" 0 "$found"\n}\n\n# check_value LABEL FILE KEY EXPECTED: the line `KEY: VALUE` of a runtime record\ncheck_value() {\n  local label=$1 file=$2 key=$3 expected=$4 found line\n  if [ ! -r "$file" ]; then\n    report fail "$label" "$expected" "no file $file"\n    return\n  fi\n  found="no \'$key:\' line"\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line == "$key: "* ]]; then\n      found=${line#"$key: "}\n    fi\n  done <"$file"\n  compare "$label" "$expected" "$found"\n}\n\n# count_matching FILE TEXT: lines of FILE that contain TEXT\ncount_matching() {\n  local n=0 line\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line == *"$2"* ]]; then\n      n=$((n + 1))\n    fi\n  done <"$1"\n  printf \'%s\' "$n"\n}\n\n# check_count LABEL FILE TEXT EXPECTED: TEXT occurs on EXPECTED lines (once per rank)\ncheck_count() {\n  if [ ! -r "$2" ]; then\n    report fail "$1" "$4 lines" "no file $2"\n    return\n  fi\n  compare "$1" "$4 lines" "$(count_matching "$2" "$3") lines"\n}\n\n# check_iterations LABEL FILE N RANKS: \'Iteration i:\' for i in 0..N-1, each printed by RANKS ranks\ncheck_iterations() {\n  local label=$1 file=$2 n=$3 ranks=$4 i count found="" expected=""\n  if [ ! -r "$file" ]; then\n    report fail "$label" "iterations 0-$((n - 1)) x $ranks" "no file $file"\n    return\n  fi\n  for ((i = 0; i < n; i++)); do\n    count=$(count_matching "$file" "Iteration $i: ")\n    expected+="${expected:+ }$i:$ranks"\n    found+="${found:+ }$i:$count"\n  done\n  compare "$label" "$expected" "$found"\n}\n\n# check_file LABEL FILE: FILE exists and is not empty\ncheck_file() {\n  if [ -s "$2" ]; then\n    report pass "$1" "a file" "$2"\n  else\n    report fail "$1" "a file" "nothing at $2"\n  fi\n}\n\n# check_content LABEL FILE EXPECTED: the first line of FILE\ncheck_content() {\n  local found="no file $2"\n  if [ -r "$2" ]; then\n    IFS= read -r found <"$2" || true\n  fi\n  compare "$1" "$3" "$found"\n}\n\n# check_argument LABEL FILE NAME EXPECTED: `  NAME ........ VALUE` in Megatron\'s arguments dump\ncheck_argument() {\n  local label=$1 file=$2 name=$3 expected=$4 found="not in the arguments dump" line\n  if [ ! -r "$file" ]; then\n    report fail "$label" "$expected" "no file $file"\n    return\n  fi\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line =~ ^\\ \\ ([a-z0-9_]+)\\ \\.+\\ (.*)$ ]] && [ "${BASH_REMATCH[1]}" = "$name" ]; then\n      found=${BASH_REMATCH[2]}\n    fi\n  done <"$file"\n  compare "$label" "$expected" "$found"\n}\n\n# check_last_iteration LABEL FILE EXPECTED: the last ` iteration N/ M |` line Megatron logged\ncheck_last_iteration() {\n  local found="no iteration line" line\n  if [ ! -r "$2" ]; then\n    report fail "$1" "$3" "no file $2"\n    return\n  fi\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line =~ \\ iteration\\ +([0-9]+)/\\ *([0-9]+)\\ \\| ]]; then\n      found=${BASH_REMATCH[1]}\n    fi\n  done <"$2"\n  compare "$1" "$3" "$found"\n}\n\n# check_no_bad_iterations LABEL FILE [fp16]: every logged interval reports 0 skipped and 0 NaN\n# iterations; with fp16, whose loss scaler skips iterations while it lowers the scale, 0 NaN\n# iterations and at least one iteration not skipped (one step that updated the weights)\ncheck_no_bad_iterations() {\n  local bad=0 intervals=0 stepped=0 previous=0 line\n  if [ ! -r "$2" ]; then\n    report fail "$1" "0 bad intervals" "no file $2"\n    return\n  fi\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line =~ \\ iteration\\ +([0-9]+)/.*number\\ of\\ skipped\\ iterations:\\ +([0-9]+)\\ \\|\\ number\\ of\\ nan\\ iterations:\\ +([0-9]+) ]]; then\n      intervals=$((intervals + 1))\n      if [ "${3:-}" = fp16 ]; then\n        [ "${BASH_REMATCH[3]}" = 0 ] || bad=$((bad + 1))\n        [ "${BASH_REMATCH[2]}" -ge $((BASH_REMATCH[1] - previous)) ] || stepped=1\n        previous=${BASH_REMATCH[1]}\n      elif [ "${BASH_REMATCH[2]}" != 0 ] || [ "${BASH_REMATCH[3]}" != 0 ]; then\n        bad=$((bad + 1))\n      fi\n    fi\n  done <"$2"\n  if [ "$intervals" -eq 0 ]; then\n    report fail "$1" "0 bad intervals" "no logged interval"\n  elif [ "${3:-}" = fp16 ] && [ "$stepped" -eq 0 ]; then\n    report fail "$1" "a step taken" "every logged iteration was skipped by the fp16 loss scaler"\n  else\n    compare "$1" "0 bad intervals" "$bad bad intervals"\n  fi\n}\n\n# check_positive LABEL FILE KEY: the line `KEY: N` of a record, with N > 0\ncheck_positive() {\n  local label=$1 file=$2 key=$3 found line\n  found="no \'$key:\' line"\n  if [ ! -r "$file" ]; then\n    report fail "$label" "more than 0" "no file $file"\n    return\n  fi\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line == "$key: "* ]]; then\n      found=${line#"$key: "}\n    fi\n  done <"$file"\n  if [[ $found =~ ^[0-9]+$ ]] && [ "$found" -gt 0 ]; then\n    report pass "$label" "more than 0" "$found"\n  else\n    report fail "$label" "more than 0" "$found"\n  fi\n}\n\n# check_contains LABEL FILE TEXT: some line of FILE contains TEXT\ncheck_contains() {\n  if [ ! -r "$2" ]; then\n    report fail "$1" "a line with \'$3\'" "no file $2"\n  elif [ "$(count_matching "$2" "$3")" -gt 0 ]; then\n    report pass "$1" "a line with \'$3\'" "$(count_matching "$2" "$3") lines"\n  else\n    report fail "$1" "a line with \'$3\'" "none"\n  fi\n}\n\n# check_first_loss_below LABEL FILE LIMIT: the first `lm loss:` Megatron logged is below LIMIT\ncheck_first_loss_below() {\n  local found="no lm loss line" line\n  if [ ! -r "$2" ]; then\n    report fail "$1" "below $3" "no file $2"\n    return\n  fi\n  while IFS= read -r line || [ -n "$line" ]; do\n    if [[ $line =~ lm\\ loss:\\ ([0-9.]+E[+-][0-9]+|[0-9.]+) ]]; then\n      found=${BASH_REMATCH[1]}\n      break\n    fi\n  done <"$2"\n  if [[ $found =~ ^[0-9.]+(E[+-][0-9]+)?$ ]] && awk -v a="$found" -v b="$3" \'BEGIN { exit !(a + 0 < b + 0) }\'; then\n    report pass "$1" "below $3" "$found"\n  else\n    report fail "$1" "below $3" "$found"\n  fi\n}\n\n'
    for l_1_check in environment.getattr(environment.getattr((undefined(name='step') if l_0_step is missing else l_0_step), 'verify'), 'checks'):
        _loop_vars = {}
        pass
        yield str(environment.finalize(t_4(environment.getattr(l_1_check, 'function'))))
        yield ' '
        yield str(environment.finalize(t_3(environment.getattr(l_1_check, 'args'))))
        yield '\n'
    l_1_check = missing
    yield '\ntotal=$((passed + failed))\nif [ "$json" -eq 1 ]; then\n  printf \'{"run_root": %s, "passed": %s, "checks": [\' "$(json_string "$RUN_ROOT")" "$([ "$failed" -eq 0 ] && echo true || echo false)"\n  sep=""\n  for item in "${json_items[@]}"; do\n    printf \'%s\\n  %s\' "$sep" "$item"\n    sep=","\n  done\n  printf \'\\n]}\\n\'\nelse\n  printf \'%s of %s checks passed for %s\\n\' "$passed" "$total" "$RUN_ROOT"\nfi\n[ "$failed" -eq 0 ]\n'

blocks = {}
debug_info = '2=38&19=40&249=42&250=45'

# Generated by `python -m compiler.render.render` from templates/verify.sh.j2: do not edit.
KEY = 'f316ab5163c995aaa4854067a98c3da78dd1c1b42b752f889a4a29d68e20311d'
