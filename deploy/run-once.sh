#!/usr/bin/env bash
# Cron-style run on a Spark cluster (YARN, Kubernetes, standalone): one tick per configured table.
# The config's spark.master (or spark.connect_url) says where Spark runs; this script only provides
# the Python environment, e.g. from cron:  */30 * * * * /opt/deltaopt/deploy/run-once.sh
set -euo pipefail
CONFIG=${DELTAOPT_CONFIG:-/etc/deltaopt/config.yaml}
VENV=${DELTAOPT_VENV:-/opt/deltaopt/.venv}
exec "$VENV/bin/deltaopt" serve --once --config "$CONFIG"
