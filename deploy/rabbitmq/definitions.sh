#!/bin/sh
# Prints, as RabbitMQ definitions (JSON for `rabbitmqctl import_definitions -`),
# what an administrator sets up before the EQ services start (issue 27: least
# privilege on the broker):
#
# - one user per role, with no tags (no management UI, no HTTP API);
# - each role's permissions on vhost "/";
# - the topology of common/messages.h with the arguments that
#   common/amqp.cc (Connection::declareTopology) gives it.
#
# The services then only check the topology (passive declares) and never need
# the configure permission: none of them can declare, delete or rebind a
# queue or exchange. Read is granted only on the queues a role consumes.
# Write is needed on amq.default, through which every message is published;
# the default exchange routes to any queue by name, so write there cannot be
# narrowed per queue: which publisher may feed which queue is enforced by the
# message signatures (EQ_INTERNAL_KEY, docs/architecture.md).
#
# Used by scripts/lib/broker.sh (scripts/run, scripts/test, the test cluster)
# and by docker-compose.yml. Environment:
#   EQ_AMQP_API_PASSWORD, EQ_AMQP_WORKER_PASSWORD, EQ_AMQP_DISPATCHER_PASSWORD
#       the roles' passwords; letters, digits and . _ ~ - only (they go into
#       URLs and into this JSON unescaped), e.g. `openssl rand -hex 24`.
#   EQ_BROKER_SYNC_QUEUE_TYPE
#       classic (one broker, the default) or quorum (a cluster): the type the
#       services expect for eq.sync.* (common/amqp.cc). On a cluster, import
#       once every node has joined, or the quorum queues get fewer replicas.
set -eu

sync_type="${EQ_BROKER_SYNC_QUEUE_TYPE:-classic}"
case "$sync_type" in
classic | quorum) ;;
*)
    echo "definitions.sh: EQ_BROKER_SYNC_QUEUE_TYPE must be classic or quorum" >&2
    exit 2
    ;;
esac

password() {
    # ${!name} is bash-only: eval on a name from this file, not from input.
    eval "pw=\${$1:-}"
    if [ -z "$pw" ]; then
        echo "definitions.sh: set $1" >&2
        exit 2
    fi
    case "$pw" in
    *[!A-Za-z0-9._~-]*)
        echo "definitions.sh: $1 may only hold letters, digits and . _ ~ -" >&2
        exit 2
        ;;
    esac
    printf '%s' "$pw"
}
api_pw="$(password EQ_AMQP_API_PASSWORD)"
worker_pw="$(password EQ_AMQP_WORKER_PASSWORD)"
dispatcher_pw="$(password EQ_AMQP_DISPATCHER_PASSWORD)"

work_args='{"x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": "eq.dlx"}'
queue() { # name arguments
    printf '    {"name": "%s", "vhost": "/", "durable": true, "auto_delete": false, "arguments": %s}' "$1" "$2"
}

cat <<JSON
{
  "users": [
    {"name": "eq-api", "password": "$api_pw", "tags": ""},
    {"name": "eq-worker", "password": "$worker_pw", "tags": ""},
    {"name": "eq-dispatcher", "password": "$dispatcher_pw", "tags": ""}
  ],
  "vhosts": [{"name": "/"}],
  "permissions": [
    {"user": "eq-api", "vhost": "/", "configure": "^\$", "write": "^amq\\\\.default\$", "read": "^\$"},
    {"user": "eq-worker", "vhost": "/", "configure": "^\$", "write": "^amq\\\\.default\$",
     "read": "^eq\\\\.(jobs|sync)\\\\.(fast|standard|perfect|analyze)\$"},
    {"user": "eq-dispatcher", "vhost": "/", "configure": "^\$", "write": "^amq\\\\.default\$",
     "read": "^eq\\\\.(task-events|dead)\$"}
  ],
  "exchanges": [
    {"name": "eq.dlx", "vhost": "/", "type": "fanout", "durable": true, "auto_delete": false,
     "internal": false, "arguments": {}}
  ],
  "queues": [
$(queue eq.dead '{"x-queue-type": "quorum"}'),
$(queue eq.jobs.fast "$work_args"),
$(queue eq.jobs.standard "$work_args"),
$(queue eq.jobs.perfect "$work_args"),
$(queue eq.jobs.analyze "$work_args"),
$(queue eq.task-events "$work_args"),
$(queue eq.sync.fast "{\"x-queue-type\": \"$sync_type\"}"),
$(queue eq.sync.standard "{\"x-queue-type\": \"$sync_type\"}"),
$(queue eq.sync.perfect "{\"x-queue-type\": \"$sync_type\"}"),
$(queue eq.sync.analyze "{\"x-queue-type\": \"$sync_type\"}")
  ],
  "bindings": [
    {"source": "eq.dlx", "vhost": "/", "destination": "eq.dead", "destination_type": "queue",
     "routing_key": "", "arguments": {}}
  ]
}
JSON
