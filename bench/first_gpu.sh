#!/usr/bin/env bash
# The first lent GPU after packed runs landed (issue 52): everything it must measure, as two calls.
#
# Here, before: python -m calibook pack cifar10h && python -m calibook paper --carry .packs/cifar10h
# Call 1 (fresh machine, carry .packs/cifar10h, timeout_s 570):  bash bench/first_gpu.sh measure
#   the engine's self-test of packs against runs alone on CUDA (bf16), then bench_epoch's packs of
#   16, 8 and 32 runs of Vanilla and FGR, eager and compiled (per run-step ms, fraction of bf16 peak,
#   compile seconds; saved after each, so a cut keeps what it measured), then what packing gains for
#   PACS's Lite0 and the WRNs (bench_pack_nets.py).
# Call 2 (at once, warm, same carry, timeout_s = budget left - 60): bash bench/first_gpu.sh compare MINUTES
#   the published CIFAR-10H runs of seeds 0 and 1 (Vanilla, FGR) trained again as packs, compiled
#   where call 1 measured compiled packs cheaper, compared with their records (accuracy within 0.5
#   points, ECE within 0.01).
# Here, after: cp FILES_AT/epoch_cuda-*.json FILES_AT/pack_nets_*.json bench/results/; commit; the
#   note of issue 52 quotes bench.log's pack lines, nets.log and compare.log.
set -u
OUT="${OUT:-.}"
export PYTHONUNBUFFERED=1
case "${1:-}" in
measure)
  python3 -c "from calibook.gpu.packs import unpack_all; print(*unpack_all(), sep='\n')"
  timeout 60 python3 -c "from calibook.gpu.selftest import run_selftest; print(run_selftest(force=True))" 2>&1 | tail -n 3
  timeout 330 python3 bench/bench_epoch.py --pack 16 8 32 --skip-pacs --methods vanilla fgr --cifar-steps 40 \
    --out "$OUT" >"$OUT/bench.log" 2>&1
  grep -E "^bench |FAILED" "$OUT/bench.log" | tail -n 20
  timeout 120 python3 bench/bench_pack_nets.py --packs 4 8 --out "$OUT" >"$OUT/nets.log" 2>&1
  tail -n 8 "$OUT/nets.log"
  ;;
compare)
  minutes="${2:-6}"
  flag=$(python3 -c "from calibook.gpu.projection import bench; print('--compile' if bench(device=__import__('torch').cuda.get_device_name()).compiled else '')")
  python3 -c "from calibook.gpu.packs import unpack_all; print(*unpack_all(), sep='\n')"
  python3 bench/packed_vs_published.py --minutes "$minutes" $flag --out "$OUT" >"$OUT/compare.log" 2>&1
  tail -n 8 "$OUT/compare.log"
  ;;
*)
  echo "usage: bash bench/first_gpu.sh measure | compare [MINUTES]" >&2
  exit 2
  ;;
esac
