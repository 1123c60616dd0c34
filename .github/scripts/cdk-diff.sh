#!/usr/bin/env bash
# `cdk diff` of one environment's stack against what is deployed, as Markdown for the pull request.
# Usage: cdk-diff.sh <env> <out.md>. Compares templates (--method template), which needs only the
# bootstrap lookup role (read-only), and never fails on a difference: the diff is information.
set -euo pipefail
env="$1" out="$2"
stack="AgentJobs-$env"
set +e
npx cdk diff "$stack" -c "env=$env" --method template --fail-on never --no-color > cdk-diff.txt 2>&1
status=$?
set -e
{
  echo "### cdk diff: $stack"
  echo
  if [ "$status" -ne 0 ]; then echo "cdk diff exited $status:"; echo; fi
  echo '```'
  # GitHub refuses a comment over 65,536 characters: keep the head of a long diff.
  head -c 60000 cdk-diff.txt
  echo '```'
} > "$out"
exit "$status"
