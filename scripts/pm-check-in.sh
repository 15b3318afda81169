#!/usr/bin/env bash
# Seed 004 §10.2 entry point for cron: one check-in of a task.
#   scripts/pm-check-in.sh <task> [--project DIR]
# Exit 0 when the PM got the check-in, 5 when it was not confirmed (retried next time).
exec "${TASK_BIN:-task}" checkin "$@"
