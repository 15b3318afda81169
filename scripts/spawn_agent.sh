#!/usr/bin/env bash
# Seed 004 §10.2 entry point: spawn an agent with the PM's handoff.
#   scripts/spawn_agent.sh <agent> --task-dir <project>/tasks/<task> --handoff <file> [--runtime R]
set -euo pipefail
agent="${1:?usage: spawn_agent.sh <agent> --task-dir DIR --handoff FILE [--remote SPEC]}"; shift
task_dir="" ; args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --task-dir) task_dir="${2:?}"; shift 2 ;;
    --remote) echo "spawn_agent.sh: --remote is not supported by this build yet" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$task_dir" ] || { echo "spawn_agent.sh: --task-dir is required" >&2; exit 2; }
task_dir="$(cd "$task_dir" && pwd)"
exec "${TASK_BIN:-task}" spawn "$(basename "$task_dir")" "$agent" --project "$(dirname "$(dirname "$task_dir")")" "${args[@]}"
