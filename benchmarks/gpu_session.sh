#!/usr/bin/env bash
# The GPU checks of one lent-device session, in one command (each step time-boxed, each result
# written under $OUT; a failing step does not stop the others). Run from the repository root:
#   OUT=/tmp/out bash benchmarks/gpu_session.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:?set OUT to a folder}
log=$OUT/gpu_session.log
run() { echo "=== $* ===" | tee -a "$log"; timeout "$@" 2>&1 | tee -a "$log"; echo "rc=${PIPESTATUS[0]}" | tee -a "$log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$log"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$log"
run 150 python3 benchmarks/cp_balance.py --device cuda --out "$OUT"
run 150 python3 benchmarks/gpu_step_profile.py --out "$OUT" --preset tiny --hidden 1024 --layers 8 \
    --heads 16 --kv-heads 8 --ffn 2816 --vocab 32000 --seq-len 1024 --micro-batch 4
if [ -f benchmarks/planner_memory.py ]; then
    run 180 python3 benchmarks/planner_memory.py --device cuda --out "$OUT"
fi
ls -la "$OUT" | tee -a "$log"
