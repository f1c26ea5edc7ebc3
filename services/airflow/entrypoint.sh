#!/usr/bin/env bash
# `init`: migrate the metadata database and create the JWT secret every component shares (the
# scheduler's task tokens must be valid at the API server). Anything else: `airflow "$@"` with
# that secret.
set -euo pipefail
secret="$AIRFLOW_HOME/jwt_secret"
if [ "${1:-}" = init ]; then
  mkdir -p "$AIRFLOW_HOME"
  [ -s "$secret" ] || python -c 'import secrets; print(secrets.token_urlsafe(32))' > "$secret"
  exec airflow db migrate
fi
[ -s "$secret" ] || { echo "eoslab-airflow: $secret is missing; run the airflow-init service first" >&2; exit 1; }
AIRFLOW__API_AUTH__JWT_SECRET=$(cat "$secret")
export AIRFLOW__API_AUTH__JWT_SECRET
exec airflow "$@"
