#!/usr/bin/env bash
# The main job: installs what is missing, builds thdc, compiles the bundled
# pipeline examples/megatron_graph_step.mlir and runs it: on the GPU if there
# is one, else on the CPU path. 100 random microbatches go through one
# captured launch and each is checked against the reference semantics; then
# the same from Python (examples/python/quickstart.py).
#
# Four phases, one line each: dependencies (scripts/setup.sh), configuring
# and building (scripts/build.sh; only the CMake target thdc-demo, what the
# demo runs: scripts/test.sh builds the rest), the demo. The first three
# keep their output in <build>/logs/{setup,configure,build}.log and show
# their progress: on a terminal on one line rewritten in place, else Ninja's
# [done/total] every 10% or minute. A phase that fails shows the end of its
# log (a failed build: from its first error on) and stops the script.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${THDC_BUILD_DIR:-$root/build}
# The demo needs no PyTorch (examples/python/quickstart.py runs on NumPy
# without it, on PyTorch where it is installed): setup.sh leaves out its
# 5 GB download here; scripts/test.sh installs it for the tests that need
# it. THDC_SKIP_TORCH=0 installs it anyway.
export THDC_SKIP_TORCH=${THDC_SKIP_TORCH:-1}
export THDC_BUILD_JOBS=${THDC_BUILD_JOBS:-$(nproc)}
logs=$build/logs
indent="      "
terminal=0
columns=80
if [ -t 1 ] && [ "${TERM:-dumb}" != dumb ]; then
  terminal=1
  read -r _ columns < <(stty size < /dev/tty 2>/dev/null) || true
  case $columns in '' | *[!0-9]* | ? | 1?) columns=80 ;; esac
fi
started=$SECONDS

duration() { # seconds, as "42 s" or "3 min 12 s"
  if [ "$1" -ge 60 ]; then
    echo "$(($1 / 60)) min $(($1 % 60)) s"
  else
    echo "$1 s"
  fi
}

follow() { # KIND: shows the progress of a phase's output (stdin)
  local kind=$1 line status shown=0 progress=0 finished total what percent next=10 last=$SECONDS
  local warnings=0 t
  say() { # a line that stays: first clears the terminal's status line
    if [ "$shown" = 1 ]; then printf '\r\033[K'; shown=0; fi
    echo "$indent$1"
  }
  while IFS= read -r line || [ -n "$line" ]; do
    status=
    if [ "$kind" = setup ] && [[ $line == "setup: "* ]]; then
      # setup.sh's own lines: what it installs, and how long that took.
      say "${line#setup: }"
      continue
    elif [ "$kind" = build ] && [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
      finished=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]} what=${BASH_REMATCH[3]}
      percent=100
      if [ "$total" -gt 0 ]; then percent=$((finished * 100 / total)); fi
      t=$((SECONDS - phase_started))
      printf -v status '[%*d/%d] %3d%% %2d:%02d %s' "${#total}" "$finished" "$total" "$percent" \
        $((t / 60)) $((t % 60)) "$what"
      if [ "$terminal" = 0 ]; then
        # In a log: every 10%, at least once a minute while lines come, and the last.
        if [ "$percent" -ge "$next" ] || [ $((SECONDS - last)) -ge 60 ] || [ "$finished" = "$total" ]; then
          echo "$indent$status"
          last=$SECONDS
          while [ "$next" -le "$percent" ]; do next=$((next + 10)); done
        fi
        continue
      fi
    elif [ "$kind" = build ] && [[ $line == *"warning: "* ]]; then
      warnings=$((warnings + 1))
    elif [ "$kind" = build ] && [ "$line" = "ninja: no work to do." ]; then
      say "nothing to do: up to date"
      continue
    fi
    # On a terminal, this line on the status line, until the next one.
    if [ "$terminal" = 1 ]; then
      progress=0
      if [ -n "$status" ]; then progress=1; fi
      status=${status:-$line}
      status=${status//$'\r'/}
      printf '\r\033[K%s' "${indent}${status:0:columns - ${#indent} - 1}"
      shown=1
    fi
  done
  # Ninja's last [done/total] stays; anything else goes.
  if [ "$shown" = 1 ]; then
    if [ "$progress" = 1 ]; then echo; else printf '\r\033[K'; fi
  fi
  if [ "$warnings" -gt 0 ]; then
    echo "${indent}$warnings compiler warnings (in $logs/build.log)"
  fi
}

phase() { # N TITLE: the phase's line
  phase=$1
  phase_started=$SECONDS
  echo "[$1/4] $2"
}

logged() { # NAME COMMAND...: runs a phase's command, its output into
           # $logs/NAME.log and through follow; stops the script if it fails
  local name=$1 log=$logs/$1.log codes
  shift
  mkdir -p "$logs"
  set +e
  "$@" 2>&1 | tee "$log" | follow "$name"
  codes=("${PIPESTATUS[@]}")
  set -e
  if [ "${codes[0]}" != 0 ] || [ "${codes[1]}" != 0 ] || [ "${codes[2]}" != 0 ]; then
    {
      echo "[$phase/4] failed (exit status ${codes[0]}) after $(duration $((SECONDS - phase_started)))"
      if grep -q '^FAILED: ' "$log"; then
        # Ninja's failed commands, with what they printed, and the rest.
        echo "== $log, from the first error on:"
        sed -n '/^FAILED: /,$p' "$log" | head -n 500
      else
        echo "== the end of $log:"
        tail -n 60 "$log"
      fi
      echo "== the whole output: $log"
    } >&2
    exit "$(( codes[0] ? codes[0] : 1 ))"
  fi
  echo "${indent}done in $(duration $((SECONDS - phase_started)))"
}

phase 1 "installing dependencies ($("$root/scripts/setup.sh" --check))"
logged setup "$root/scripts/setup.sh"

if [ -f "$build/build.ninja" ]; then
  phase 2 "configuring: $build is configured already"
else
  phase 2 "configuring $build (CMake: Ninja, Release, linked against the MLIR dylib)"
  logged configure "$root/scripts/build.sh" --configure
fi

phase 3 "building the compiler, the tools and the Python module (target thdc-demo, $THDC_BUILD_JOBS jobs)"
export NINJA_STATUS='[%f/%t] ' # what follow reads
logged build "$root/scripts/build.sh" thdc-demo

phase 4 "the demo (set up and built in $(duration $((SECONDS - started))))"
bin=$build/bin
example="$root/examples/megatron_graph_step.mlir"
params=(--param C=4096 --param cp=2 --param N=64)

echo "== the pipeline, with static shapes and fused into one kernel =="
"$bin/thd-opt" "$example" "${params[@]}" --thd-force-static-shapes --thd-fuse |
  grep -E "func.func|thd.fused|thd.yield" | cut -c1-160
echo
echo "== thdc: the bundle (PTX of one kernel, host code, manifest) =="
bundle=$(mktemp -d)
trap 'rm -rf "$bundle"' EXIT
"$bin/thdc" "$example" "${params[@]}" -o "$bundle"
ls -l "$bundle" | tail -n +2
grep -c "^.visible .entry" "$bundle/megatron_graph_step.ptx" | sed 's/^/kernels in the PTX: /'
echo
echo "== one microbatch of the running example of docs/semantics.md, through the reference =="
"$bin/thd-golden-step" | tail -1
echo
echo "== compiled in-process, captured once, replayed for 100 microbatches =="
"$bin/thdc-embed" "$example" "${params[@]}"
echo
echo "== the same from Python (thdc package; PyTorch and a GPU when present) =="
PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" \
  python3 "$root/examples/python/quickstart.py"
