# Sourced by the fib serve benchmark scripts. `serve_start NAME FIB DATASET [FLAGS...]` starts
# `fib serve` on DATASET on a free loopback port, its state (and token) in a temporary folder
# removed on exit, and sets $state, $log (the server's stderr), $server (its pid) and $port; NAME
# prefixes the message when the server does not start.
serve_start() {
  local name=$1 fib=$2 dataset=$3
  shift 3
  state=$(mktemp -d)
  log="$state/serve.log"
  "$fib" serve --local "$dataset" --port 0 --state "$state" "$@" 2>"$log" &
  server=$!
  trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$state"' EXIT
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's|.* on http://[^:]*:\([0-9]*\) .*|\1|p' "$log" | head -1)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  cat "$log"
  echo "$name: the server did not start"
  exit 1
}
