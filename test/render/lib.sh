# Shared by check.sh and demo.sh: builds the function and the Crossplane
# CLI, and serves the function on a free loopback port for the CLI's
# Development runtime. Sets $work, $BIN and writes $work/functions.yaml.
BIN=${BIN:-$top/.cache/bin}
work=$(mktemp -d)
fn_pid=
cleanup() {
  if [ -n "$fn_pid" ]; then kill "$fn_pid" 2>/dev/null || true; wait "$fn_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$top/test/tools/build.sh" crossplane-cli crossplane
go build -o "$work/function-kilomesh" ./fn
go build -o "$work/rendertool" ./test/rendertool

# The function, on a free loopback port.
port=$("$work/rendertool" freeport)
"$work/function-kilomesh" --insecure --address "127.0.0.1:$port" --metrics-address "" >"$work/function.log" 2>&1 &
fn_pid=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
cat >"$work/functions.yaml" <<YAML
apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: kilomesh-function-kilomesh
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: 127.0.0.1:$port
spec:
  package: xpkg.crossplane.io/kilomesh/function-kilomesh:v0.1.0
YAML

