#!/usr/bin/env bash
# Full-iteration graphs on one GPU: the GPU tests, then examples/megatron.
# From the repository root:
#   run.sh OUT [tests] "PRESET:C:STEPS:WARMUP:TIMEOUT:MODES[:rerun][:--option=value...] ..."
# MODES: comma-separated or all; rerun: megatron-eager once more (the bf16 noise);
# --option=value: passed to train.py.
# PROFILE=1: each mode's last iteration profiled too, to OUT/profile-PRESET-CC/.
set -uo pipefail
out=$1; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
here=$(dirname "$0")
source "$here/site.sh"
{ date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, transformer_engine as te, megatron.core as m, thdc; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| TE', te.__version__, '| megatron-core', m.__version__, '(dev d48bd6be0a)', '| thdc jit', thdc.has_jit)" 2>&1 | grep -v -i warn; } > "$out/machine.txt"
cat "$out/machine.txt"
if [ "${1:-}" = tests ]; then
  shift
  echo "== pytest"
  (cd test/python && timeout 300 python3 -m pytest -q -rs -p no:cacheprovider \
    test_iteration_graphs_gpu.py test_iteration_graphs_cpu.py test_megatron_example.py \
    > "$out/pytest.txt" 2>&1)
  echo "   rc $?"; tail -n 15 "$out/pytest.txt"
fi
for run in ${1:-}; do
  IFS=: read -r preset C steps warmup limit modes rest <<< "$run"
  extra=(); IFS=: read -r -a words <<< "${rest:-}"
  for word in "${words[@]}"; do  # rerun, or train.py's own --option=value
    if [ "$word" = rerun ]; then extra+=(--repeat-eager); else extra+=("$word"); fi
  done
  name=$preset-C$C
  echo "== $name ($modes)"
  timeout "$limit" python3 examples/megatron/train.py --preset "$preset" --C "$C" --N 64 \
    --steps "$steps" --warmup "$warmup" --modes "$modes" "${extra[@]}" \
    ${PROFILE:+--profile-dir "$out/profile-$name"} \
    --json "$out/$name.json" > "$out/$name.log" 2>&1
  echo "   rc $?"; grep -v -i "warn" "$out/$name.log" | tail -n 25
done
# one file for every profile (a run brings back only so many files)
if ls "$out"/profile-* > /dev/null 2>&1; then
  tar -czf "$out/profiles.tar.gz" -C "$out" $(cd "$out" && ls -d profile-*) && rm -rf "$out"/profile-*
fi
