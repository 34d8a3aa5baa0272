#!/usr/bin/env bash
# On the GPU machine, in one `device` call: the red team of the trust boundary (docs/run.md,
# "Threat model"), on the CPU and on the GPU. Here, first:
#   bash scripts/device/prepare.sh
# then a device call with carry [".device-debs", ".device-shared"] and the command
#   bash scripts/device/red-team.sh [all|cpu|gpu]
# It builds fib and the tests and checks that the workers' sandbox can be made there
# (scripts/device/gpu-check.sh), then runs the suites: on the CPU Sandbox, SandboxCommand and
# RunTrust; on the GPU GpuRedTeam, GpuRedTeamBuild, GpuTrust, GpuSandbox and GpuRun. A GPU test
# skipped there (no device, no bubblewrap) counts as not shown. In $OUT: red-team.txt (each test
# and PASSED, FAILED or SKIPPED, then the totals), ctest.log (the tests' output), build.log.
# The first call on a fresh machine spends most of its time building; the build folder stays
# while the machine is warm, so a call cut off by its time limit can be run again, or split
# into `cpu` and `gpu`.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fib-out}
export OUT
mkdir -p "$OUT"
cpu='Sandbox|SandboxCommand|RunTrust'
gpu='GpuRedTeam|GpuRedTeamBuild|GpuTrust|GpuSandbox|GpuRun'
case "${1:-all}" in
  all) suites="$cpu|$gpu" ;;
  cpu) suites=$cpu ;;
  gpu) suites=$gpu ;;
  *) echo "usage: $0 [all|cpu|gpu]" >&2; exit 2 ;;
esac
bash scripts/device/gpu-check.sh "^($suites)\."
status=$?
summary="$OUT/red-team.txt"
{
  echo "red team: ^($suites)\\. on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
    head -1), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [ ! -f "$OUT/ctest.log" ]; then
    echo "no tests ran (the build failed: build.log)"
  else
    # ctest's result lines: "  3/12 Test #160: Suite.Name ......   Passed    2.48 sec", or
    # "***Failed", "***Skipped", "***Timeout", "***Exception: ...".
    awk '/ Test +#[0-9]+: / {
           sub(/.*Test +#[0-9]+: /, "")
           name = $1
           rest = substr($0, length($1) + 1)
           gsub(/[.*]+/, " ", rest)
           split(rest, w, " ")
           s = w[1] == "Passed" ? "PASSED" : w[1] == "Skipped" ? "SKIPPED" : "FAILED (" w[1] ")"
           printf "%-90s %s\n", name, s
           n[substr(s, 1, 6)]++
         }
         END {
           printf "passed %d, failed %d, skipped %d\n", n["PASSED"], n["FAILED"], n["SKIPPE"]
         }' "$OUT/ctest.log"
  fi
} >"$summary"
cat "$summary"
grep -q '^Gpu.* SKIPPED$' "$summary" && echo "red-team: GPU tests were skipped (see ctest.log): not shown"
exit $status
