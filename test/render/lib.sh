# Shared by check.sh and demo.sh. Source it with $top set; it defines:
#
#   render_prepare   builds the Crossplane CLI and core (.cache/bin), and
#                    function-kilomesh and rendertool into $work, a temporary
#                    folder removed on exit
#   render_isolated CMD...
#                    runs CMD in a network namespace of its own (as root, or
#                    in a user namespace otherwise), with KILOMESH_RENDER_ISOLATED=1
#   render_function  (inside) starts function-kilomesh on 127.0.0.1:9443, the
#                    address every examples/render/*/functions.yaml names: in
#                    a namespace of its own the fixed port collides with
#                    nothing else on the machine
#   render_command DIR
#                    prints the command of DIR/README.md marked <!-- render -->
BIN=${BIN:-$top/.cache/bin}
fn_pid=
render_cleanup() {
  if [ -n "$fn_pid" ]; then kill "$fn_pid" 2>/dev/null || true; wait "$fn_pid" 2>/dev/null || true; fi
  if [ "${KILOMESH_RENDER_ISOLATED:-}" != 1 ] && [ -n "${work:-}" ]; then rm -rf "$work"; fi
}
trap render_cleanup EXIT

render_prepare() {
  work=$(mktemp -d)
  export work
  "$top/test/tools/build.sh" crossplane-cli crossplane
  go build -o "$work/function-kilomesh" ./fn
  go build -o "$work/rendertool" ./test/rendertool
}

render_isolated() {
  local user=()
  [ "$(id -u)" = 0 ] || user=(--map-root-user)
  KILOMESH_RENDER_ISOLATED=1 unshare --net "${user[@]}" -- "$@"
}

render_function() {
  ip link set lo up
  "$work/function-kilomesh" --insecure --address 127.0.0.1:9443 --metrics-address "" >"$work/function.log" 2>&1 &
  fn_pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/9443") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "function-kilomesh did not listen on 127.0.0.1:9443:" >&2
  cat "$work/function.log" >&2
  return 1
}

render_command() {
  awk '
    $0 == "<!-- render -->" { marked = 1; next }
    marked && /^```/ && !inside { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }
  ' "$1/README.md"
}
