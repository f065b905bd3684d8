#!/bin/sh
# The compose healthcheck of the first RabbitMQ node (docker-compose.yml).
# Healthy when the node accepts connections on its listeners AND the cluster
# has as many running nodes as EQ_AMQP_URL lists addresses: one for a lone
# broker, three for the cluster profile, AND the per-role users and the
# topology of definitions.sh are in place: the first check to find the
# cluster whole imports them (they are cluster-wide), once per container.
#
# Why the count matters: the quorum queues are declared here, and a quorum
# queue gets its replicas on the nodes that are in the cluster at that
# moment. Declared before rabbitmq-2 and
# rabbitmq-3 have joined, every queue would have a single replica, and
# stopping the first node would stop them all. RabbitMQ 3.12 does not add
# replicas on nodes that join later by itself (`rabbitmq-queues grow` does;
# docs/scaling.md), so the EQ services, which depend on this check, must
# not start before the cluster is whole.
set -eu
rabbitmq-diagnostics -q check_port_connectivity >/dev/null
# EQ_AMQP_URL is the same setting the EQ services get: a comma-separated
# list, one address per node.
want=$(printf '%s\n' "${EQ_AMQP_URL:-one}" | tr ',' '\n' | grep -c '[^[:space:]]')
# cluster_status as JSON is one object whose "running_nodes" is a list of
# node names ("rabbit@host"); count the names in that list alone.
running=$(rabbitmq-diagnostics -q cluster_status --formatter json | tr -d '\n' |
  sed -n 's/.*"running_nodes":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | grep -c '@' || true)
if [ "${running:-0}" -lt "$want" ]; then
  echo "$running of $want nodes running in the cluster" >&2
  exit 1
fi

# The role users' passwords are those of the URLs the services get
# (EQ_AMQP_API_URL, ...; the first address of each).
password() { printf '%s\n' "$1" | sed -n '1s#^[[:space:]]*amqp://[^:]*:\([^@]*\)@.*#\1#p' | cut -d, -f1; }
# Where compose mounts definitions.sh, and the marker of a done import
# (tests/cluster/run moves both). The JSON, which holds the passwords, goes
# through a pipe: no file. definitions.sh prints nothing when it refuses
# (a missing password), and rabbitmqctl then fails on the empty input.
defs=${EQ_HC_DEFINITIONS:-/opt/eq/definitions.sh}
marker=${EQ_HC_STATE_DIR:-/tmp}/eq-definitions-imported
if [ ! -f "$marker" ]; then
  sync_type=classic
  [ "$want" -gt 1 ] && sync_type=quorum
  EQ_AMQP_API_PASSWORD=$(password "${EQ_AMQP_API_URL:-}") \
    EQ_AMQP_WORKER_PASSWORD=$(password "${EQ_AMQP_WORKER_URL:-}") \
    EQ_AMQP_DISPATCHER_PASSWORD=$(password "${EQ_AMQP_DISPATCHER_URL:-}") \
    EQ_BROKER_SYNC_QUEUE_TYPE=$sync_type sh "$defs" |
    rabbitmqctl -q import_definitions --format json >/dev/null
fi
# The import is asynchronous: healthy once its last user has permissions.
# Only then is the marker set: an import that did not take is tried again.
rabbitmqctl -q list_user_permissions eq-dispatcher | grep -q '^/'
touch "$marker"
