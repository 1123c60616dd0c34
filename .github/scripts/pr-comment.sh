#!/usr/bin/env bash
# Posts <file> on pull request <number> as one comment per <title>, edited in place on the next
# run, so a pull request carries the latest diff of each environment and not one per push.
# Usage: pr-comment.sh <number> <title> <file>; needs GH_TOKEN with pull-requests: write.
set -euo pipefail
number="$1" title="$2" file="$3"
marker="<!-- agent-jobs: $title -->"
body="$(printf '%s\n%s\n' "$marker" "$(cat "$file")")"
existing="$(gh api "repos/$GITHUB_REPOSITORY/issues/$number/comments" --paginate \
  --jq ".[] | select(.body | startswith(\"$marker\")) | .id" | head -n 1)"
if [ -n "$existing" ]; then
  gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$existing" -f body="$body" > /dev/null
else
  gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$number/comments" -f body="$body" > /dev/null
fi
