#!/usr/bin/env bash
# LocalStack READY hook (mounted into /etc/localstack/init/ready.d/): create the demo
# Kinesis stream if it does not exist yet, then wait until it is ACTIVE.
# Idempotent: safe to run again by hand, e.g.
#   docker compose -f localstack/docker-compose.yml exec localstack \
#     /etc/localstack/init/ready.d/create-stream.sh
set -euo pipefail

STREAM="${KINESIS_STREAM:-sentences}"
SHARDS="${KINESIS_SHARDS:-4}"
TIMEOUT="${KINESIS_INIT_TIMEOUT:-240}"   # seconds; first start downloads kinesis-mock

# LocalStack 4 gives init hooks no default credentials; use the same dummy
# account and region as the demo (the stream lives in one account/region).
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_PAGER=""

log() { echo "[create-stream] $*"; }

case "$SHARDS" in
  '' | *[!0-9]* | 0) log "KINESIS_SHARDS must be a positive integer, got '$SHARDS'"; exit 1 ;;
esac

# Options after the service name: awslocal takes the first non-option word as the service.
kinesis() { awslocal kinesis "$@" --cli-read-timeout 120; }

err="$(mktemp)"
trap 'rm -f "$err"' EXIT

action="found existing"
deadline=$((SECONDS + TIMEOUT))
while :; do
  if status="$(kinesis describe-stream-summary --stream-name "$STREAM" \
      --query StreamDescriptionSummary.StreamStatus --output text 2>"$err")"; then
    [ "$status" = ACTIVE ] && break
    log "stream '$STREAM' is $status, waiting"
  elif grep -q ResourceNotFoundException "$err"; then
    if kinesis create-stream --stream-name "$STREAM" --shard-count "$SHARDS" 2>"$err"; then
      action="created"
      log "create-stream '$STREAM' ($SHARDS shards) requested"
    elif ! grep -q ResourceInUseException "$err"; then
      log "create-stream failed: $(tail -n 1 "$err")"
    fi
  else
    # Usually the Kinesis backend (kinesis-mock) is still being installed/started.
    log "describe-stream-summary failed, retrying: $(tail -n 1 "$err")"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    log "gave up: stream '$STREAM' not ACTIVE after ${TIMEOUT}s"
    exit 1
  fi
  sleep 1
done

open="$(kinesis describe-stream-summary --stream-name "$STREAM" \
  --query StreamDescriptionSummary.OpenShardCount --output text)"
log "$action stream '$STREAM' in $AWS_DEFAULT_REGION: ACTIVE, $open open shards"
if [ "$open" != "$SHARDS" ]; then
  log "note: KINESIS_SHARDS=$SHARDS differs; existing streams are not resharded"
fi
