#!/usr/bin/env bash
# Calibrate one CUDA GPU in one go (about 8 minutes): check the kernels against float64 on the GPU,
# time the GPU grid within BUDGET_S seconds, fit, write both result files to RUN_OUT (default
# calibrate_out/PROFILE) and install them (`kvsim calibrate --install`): calibration/PROFILE/measurements.csv
# and the `calibration` key of hardware_profiles/PROFILE.yaml. A fit worse than the stored one is not
# installed unless FORCE=1; the previous pair is kept in calibration/PROFILE/previous/. Needs python3
# with torch (CUDA), triton, numpy, pandas, scipy, pyyaml, typer and rich; kvsim itself runs from this
# checkout (no install needed).
#   bash calibration/run_gpu.sh [PROFILE=h200] [BUDGET_S=420] [MODEL=llama-3-8b]
# Environment: DEVICE (default cuda), GRID (default: gpu on cuda), SELFTEST_CASES (default 3), PYTHON,
# KVSIM_HARDWARE_DIR (profiles folder; measurements go to calibration/ beside it), RUN_OUT, FORCE. When
# $OUT is set (the device tool), the two result files and the log are copied there too. Tested on a CPU
# by tests/calibrate/test_run_gpu_script.py with DEVICE=cpu GRID=smoke.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-h200}"
BUDGET_S="${2:-420}"
MODEL="${3:-llama-3-8b}"
DEVICE="${DEVICE:-cuda}"
PY="${PYTHON:-python3}"
HW_DIR="${KVSIM_HARDWARE_DIR:-$PWD/hardware_profiles}"
CAL_DIR="$(dirname "$HW_DIR")/calibration/$PROFILE"
RUN_OUT="${RUN_OUT:-$(dirname "$HW_DIR")/calibrate_out/$PROFILE}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$CAL_DIR"
LOG="$CAL_DIR/run_gpu.log"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
  "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, \
'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
  echo "== kernels vs float64 on $DEVICE"
  timeout 180 "$PY" -m kvsim.calibrate.selftest --device "$DEVICE" --cases "${SELFTEST_CASES:-3}"
  echo "== measure ($BUDGET_S s budget) and fit"
  timeout $((BUDGET_S + 150)) "$PY" -m kvsim.cli calibrate --profile "$PROFILE" --device "$DEVICE" \
    --model "$MODEL" --budget-s "$BUDGET_S" ${GRID:+--grid "$GRID"} --out "$RUN_OUT" --install \
    ${FORCE:+--force}
} 2>&1 | tee "$LOG" && status=0 || status=$?
if [ -n "${OUT:-}" ]; then
  cp "$RUN_OUT/measurements.csv" "$RUN_OUT/$PROFILE.yaml" "$LOG" "$OUT"/ || true
fi
exit "$status"
