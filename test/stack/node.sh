#!/usr/bin/env bash
# The plan's variables (NODE, CGROOT, ...) come from load_plan.
# shellcheck disable=SC2153
# One real node per cluster of the stack: containerd, the CNI plugins and a
# kubelet that run real pods, each node in a network namespace and a mount
# namespace of its own. up.sh runs it when STACK_REAL_NODES=1, down.sh tears
# the nodes down; see README.md ("Real nodes").
#
#   node.sh plan CLUSTER INDEX  write and print the node's plan (addresses,
#                               names, tokens); up.sh calls it before the
#                               cluster's apiserver starts
#   node.sh packages            install Debian's containerd, runc, CNI
#                               plugins and nftables when missing
#   node.sh images              build the pod images into <run>/images
#   node.sh up CLUSTER          start the node (its apiserver must be ready)
#   node.sh addons CLUSTER      the MCS CRDs, kube-proxy (DaemonSet) and CoreDNS
#                               with the clusterset plugin (Deployment) on
#                               the cluster, waited for
#   node.sh forward CLUSTER NAME PORT
#                               127.0.0.1:PORT of the host (an apiserver,
#                               the registry) at 0.0.0.0:PORT in the node's
#                               namespace: its address, its pods' gateway
#   node.sh registry CLUSTER PORT
#                               the stack's registry (127.0.0.1:PORT) for
#                               the node's containerd and pods, at
#                               <node IP>:PORT, plain HTTP
#   node.sh import CLUSTER TARBALL...
#                               images into the node's containerd
#   node.sh down CLUSTER        stop the node and remove everything it made
#   node.sh leftovers           print what any node of this run left behind;
#                               exits 1 if anything
#   node.sh usage [SECONDS]     memory (RSS) and CPU (% of one core over
#                               SECONDS, default 60) of every node's
#                               containerd, kubelet, shims and pods'
#                               processes
#
# Everything a node listens on lives in its network namespace; the host end
# of its link carries an address that nothing listens on (README.md's
# address plan). Needs root.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

images=$STACK_DIR/images
pause_image=stack.local/pause:3.10
kube_version=v1.34.4
coredns_version=v1.14.7

# run_id: six hex digits of the run folder, in every machine-wide name
# (namespaces, links, cgroups) of this run's nodes.
run_id() { printf '%s' "$STACK_DIR" | sha256sum | cut -c1-6; }

node_dir() { printf '%s/%s/node' "$STACK_DIR" "$1"; }

# load_plan CLUSTER reads the plan into the shell; false without one.
load_plan() {
  local f
  f=$(node_dir "$1")/plan
  [ -f "$f" ] || return 1
  # shellcheck disable=SC1090
  . "$f"
}

cmd_plan() {
  local c=$1 i=$2 id nd
  if ! [[ "$i" =~ ^[0-9]+$ ]] || [ "$i" -ge 16 ]; then
    stack_die "node.sh plan: the index must be 0 to 15"
  fi
  id=$(run_id)
  nd=$(node_dir "$c")
  mkdir -p "$nd"
  # Shim sockets must stay under 108 bytes.
  [ ${#nd} -le 60 ] || stack_die "STACK_DIR is too long for a real node's sockets: $STACK_DIR"
  {
    printf "NODE='%s'\n" "$c-node"
    printf "NODE_NETNS='%s'\n" "km$id-$c"
    printf "HOST_VETH='%s'\n" "km${id}h$i"
    printf "HOST_IP='10.%d.255.1'\n" $((224 + i))
    printf "NODE_IP='10.%d.255.2'\n" $((224 + i))
    # The pod CIDR is a free /24 of the member range that the stack's
    # meshes (examples/mesh.yaml, the fixture) declare for the cluster, so
    # that the node joins a mesh; kube-proxy's cluster CIDR is that range.
    printf "POD_CIDR='10.%d.224.0/24'\n" $((1 + i))
    printf "CLUSTER_CIDR='10.%d.0.0/16'\n" $((1 + i))
    printf "SVC_CIDR='10.%d.0.0/16'\n" $((101 + i))
    printf "DNS_IP='10.%d.0.10'\n" $((101 + i))
    printf "CGROOT='/km%s-%s'\n" "$id" "$c"
    printf "CNI_NET='km%s-%s'\n" "$id" "$c"
    printf "NODE_TOKEN='%s'\n" "$(openssl rand -hex 24)"
    printf "PROXY_TOKEN='%s'\n" "$(openssl rand -hex 24)"
  } >"$nd/plan"
  cat "$nd/plan"
}

cmd_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v nft >/dev/null || missing+=(nftables)
  command -v iptables >/dev/null || missing+=(iptables)
  [ ${#missing[@]} -gt 0 ] || return 0
  stack_log "installing Debian packages: ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

# image TAG OUT UID ENTRYPOINT FILE... writes one image tarball.
image() {
  local tag=$1 out=$2 uid=$3 entry=$4 f args=()
  shift 4
  for f in "$@"; do args+=(--file "$f"); done
  "$images/bin/podimage" --tag "$tag" --out "$images/$out.tar" --uid "$uid" --entrypoint "$entry" "${args[@]}"
}

cmd_images() {
  local p libs=() key mcs
  stack_log "building the pod images in $images (skipped when up to date)"
  "$STACK_TOP/test/tools/build.sh" kube-node coredns-mcs
  mkdir -p "$images/bin" "$images/crds"
  (
    cd "$STACK_TOP"
    for p in podimage pods/pause pods/hello pods/probe; do
      CGO_ENABLED=0 go build -trimpath -o "$images/bin/${p##*/}" "./test/stack/$p"
    done
    # The MCS CRDs (ServiceExport, ServiceImport) of the mcs-api version
    # kilomesh builds with, as the provider's tests install them.
    go mod download sigs.k8s.io/mcs-api
    mcs=$(go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)
    cp -f "$mcs/config/crd/multicluster.x-k8s.io_serviceexports.yaml" \
      "$mcs/config/crd/multicluster.x-k8s.io_serviceimports.yaml" "$images/crds/"
  )
  # The images are rebuilt when anything they are made of changed: a tool
  # rebuilt from new sources (CoreDNS with the clusterset plugin) goes in.
  key=$(cat "$images"/bin/* "$STACK_BIN/coredns-mcs" "$STACK_BIN/kube-proxy" /usr/sbin/nft | sha256sum | cut -c1-16)
  [ "$(cat "$images/.complete" 2>/dev/null || true)" != "$key" ] || return 0
  rm -f "$images/.complete"
  image "$pause_image" pause 65535 /pause "$images/bin/pause:/pause"
  image stack.local/hello:v1 hello 65532 /usr/local/bin/hello "$images/bin/hello:/usr/local/bin/hello"
  image stack.local/probe:v1 probe 65532 /usr/local/bin/probe "$images/bin/probe:/usr/local/bin/probe"
  # CoreDNS with kilomesh's clusterset plugin, at CoreDNS's usual path.
  image "stack.local/coredns:$coredns_version" coredns 65532 /usr/local/bin/coredns "$STACK_BIN/coredns-mcs:/usr/local/bin/coredns"
  # kube-proxy's nftables mode runs Debian's nft: it goes in with its libraries.
  mapfile -t libs < <(ldd /usr/sbin/nft | awk '/=>/ { print $3 } /ld-linux/ { print $1 }' | sort -u)
  image "stack.local/kube-proxy:$kube_version" kube-proxy 0 /usr/local/bin/kube-proxy \
    "$STACK_BIN/kube-proxy:/usr/local/bin/kube-proxy" /usr/sbin/nft "${libs[@]}"
  printf '%s\n' "$key" >"$images/.complete"
}

in_node() { nsenter --net="/var/run/netns/$NODE_NETNS" "$@"; }

# kc CLUSTER ARGS... runs kubectl as the cluster's admin.
kc() { stack_kubectl "$@"; }

cmd_up() {
  local c=$1 nd cd ap ap_var h
  load_plan "$c" || stack_die "no plan for $c's node (node.sh plan)"
  [ "$(id -u)" = 0 ] || stack_die "real nodes need root"
  stack_env_load
  nd=$(node_dir "$c")
  cd=$nd/containerd
  ap_var=$(stack_var "$c" PORT)
  ap=${!ap_var}
  if [ -n "$(ip -o route show root "$POD_CIDR")$(ip -o addr show to "$HOST_IP/30")" ]; then
    stack_die "$POD_CIDR or $HOST_IP is in use on this machine (another run's real node?): one real-node stack per machine"
  fi

  stack_log "$c: node $NODE in network namespace $NODE_NETNS ($NODE_IP, pods $POD_CIDR)"
  ip netns add "$NODE_NETNS"
  ip link add "$HOST_VETH" type veth peer name eth0 netns "$NODE_NETNS"
  ip addr add "$HOST_IP/30" dev "$HOST_VETH"
  ip link set "$HOST_VETH" up
  ip -n "$NODE_NETNS" addr add "$NODE_IP/30" dev eth0
  ip -n "$NODE_NETNS" link set eth0 up
  ip -n "$NODE_NETNS" link set lo up
  # A default route, as every real machine has (Kilo's agent refuses to
  # start without one: "failed to find default route"), into a TUN link
  # that no process reads and that has no address (a dummy link would do,
  # but machines without the dummy module exist): a packet for an address
  # the node does not know is dropped, never leaves the stack, and the
  # agent, finding no address on the default route's link, takes the
  # node's own (eth0's). The service CIDR needs a route for kube-proxy's
  # DNAT to apply to the node's own connections.
  ip -n "$NODE_NETNS" tuntap add dev nowhere mode tun
  ip -n "$NODE_NETNS" link set nowhere up
  ip -n "$NODE_NETNS" route add default dev nowhere
  ip -n "$NODE_NETNS" route add "$SVC_CIDR" dev eth0
  ip route add "$POD_CIDR" via "$NODE_IP" dev "$HOST_VETH"
  ip netns exec "$NODE_NETNS" sysctl -qw net.ipv4.ip_forward=1

  # The node's mount namespace, kept by a bind of its file: containerd, its
  # shims and the kubelet share it, so the kubelet's volumes are where
  # containerd mounts them from, and every mount of the node goes with the
  # namespace. Inside, /run is a tmpfs of its own (shim sockets, xtables
  # lock), /var/lib and /var/log are folders of the node (the kubelet's
  # hard-coded device-plugin socket and /var/log/containers links, the CNI
  # result cache), and the six kernel settings the kubelet sets at start
  # read as it wants them, so it changes none of the machine's.
  mkdir -p "$nd/ns" "$nd/host/var-lib" "$nd/host/var-log" "$nd/host/sysctl"
  mount --bind "$nd/ns" "$nd/ns"
  mount --make-private "$nd/ns"
  touch "$nd/ns/mnt"
  printf '1\n' >"$nd/host/sysctl/vm.overcommit_memory"
  printf '0\n' >"$nd/host/sysctl/vm.panic_on_oom"
  printf '10\n' >"$nd/host/sysctl/kernel.panic"
  printf '1\n' >"$nd/host/sysctl/kernel.panic_on_oops"
  printf '1000000\n' >"$nd/host/sysctl/kernel.keys.root_maxkeys"
  printf '25000000\n' >"$nd/host/sysctl/kernel.keys.root_maxbytes"
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount="$nd/ns/mnt" --propagation private -- bash -euc '
    nd=$1
    mount -t tmpfs -o mode=0755 tmpfs /run
    mount --bind "$nd/host/var-lib" /var/lib
    mount --bind "$nd/host/var-log" /var/log
    for f in "$nd"/host/sysctl/*; do
      k=${f##*/}
      mount --bind "$f" "/proc/sys/${k//.//}"
    done
  ' _ "$nd"

  # The apiserver, seen from the node: 0.0.0.0:<port> of the namespace (lo,
  # eth0, the bridge) relays to 127.0.0.1:<port> of the host.
  cmd_forward "$c" api "$ap"

  mkdir -p "$cd/cni/net.d" "$cd/certs.d" "$nd/cni-ipam"
  cat >"$cd/cni/net.d/10-stack.conflist" <<JSON
{"cniVersion":"0.4.0","name":"$CNI_NET","plugins":[
 {"type":"bridge","bridge":"kmcni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$POD_CIDR"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$nd/cni-ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}},
 {"type":"loopback"}]}
JSON
  cat >"$cd/config.toml" <<TOML
version = 2
root = "$cd/data"
state = "$cd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$cd/containerd.sock"
[ttrpc]
  address = "$cd/containerd.sock.ttrpc"
[debug]
  address = "$cd/debug.sock"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$pause_image"
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "$cd/certs.d"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$cd/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          Root = "$cd/runc"
          SystemdCgroup = false
  [plugins."io.containerd.internal.v1.opt"]
    path = "$cd/opt"
TOML
  stack_start "$c-containerd" nsenter --net="/var/run/netns/$NODE_NETNS" --mount="$nd/ns/mnt" \
    containerd --config "$cd/config.toml"
  stack_wait_for 60 "containerd of $NODE" test -S "$cd/containerd.sock"
  stack_wait_for 60 "containerd of $NODE" ctr --address "$cd/containerd.sock" version
  for h in pause hello probe coredns kube-proxy; do
    ctr --address "$cd/containerd.sock" -n k8s.io images import "$images/$h.tar" >/dev/null
  done

  # The kubelet's cgroup root, in every hierarchy but the unified one;
  # cpuset needs its cpus and mems before anything goes in.
  for h in /sys/fs/cgroup/*/; do
    case $h in */unified/) continue ;; esac
    mkdir -p "$h${CGROOT#/}"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$CGROOT/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$CGROOT/cpuset.mems"

  mkdir -p "$nd/kubelet-root" "$nd/kubelet-pki" "$nd/pod-logs" "$nd/manifests" "$nd/volume-plugins"
  # Pods with dnsPolicy Default get this: their own loopback, where nothing
  # answers; nothing of the machine's network.
  printf 'nameserver 127.0.0.1\n' >"$nd/resolv.conf"
  stack_write_kubeconfig "$nd/kubelet.kubeconfig" "$NODE" "$c" "https://127.0.0.1:$ap" \
    "$STACK_DIR/$c/ca.crt" "system:node:$NODE" "$NODE_TOKEN"
  cat >"$nd/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
healthzBindAddress: $NODE_IP
readOnlyPort: 0
containerRuntimeEndpoint: unix://$cd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $CGROOT
failCgroupV1: false
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $STACK_DIR/$c/ca.crt}
authorization: {mode: AlwaysAllow}
staticPodPath: $nd/manifests
podLogsDir: $nd/pod-logs
volumePluginDir: $nd/volume-plugins
resolvConf: $nd/resolv.conf
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 50
podCIDR: $POD_CIDR
serializeImagePulls: false
YAML
  stack_start "$c-kubelet" nsenter --net="/var/run/netns/$NODE_NETNS" --mount="$nd/ns/mnt" \
    "$STACK_BIN/kubelet" --config="$nd/kubelet.yaml" --kubeconfig="$nd/kubelet.kubeconfig" \
    --root-dir="$nd/kubelet-root" --cert-dir="$nd/kubelet-pki" \
    --hostname-override="$NODE" --node-ip="$NODE_IP" --v=1
  stack_wait_for 60 "the kubelet of $NODE to be healthy" \
    in_node curl -fsS --max-time 2 "http://$NODE_IP:10248/healthz"
  stack_wait_for 60 "Node $NODE to register" kc "$c" get node "$NODE"
  # Node IPAM does not run; the pod CIDR is the node's bridge subnet.
  kc "$c" patch node "$NODE" --type=merge -p "{\"spec\":{\"podCIDR\":\"$POD_CIDR\",\"podCIDRs\":[\"$POD_CIDR\"]}}" >/dev/null
  kc "$c" wait --for=condition=Ready --timeout=90s "node/$NODE" >/dev/null
  # The kubelet registers its Node with the not-ready taint, which the
  # node lifecycle controller takes off once the Node is Ready. That
  # controller does not run here (it would mark the stack's kubelet-less
  # fixture Nodes NotReady), so the taint is taken off as it would.
  kc "$c" taint node "$NODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  stack_log "$c: node $NODE Ready"
}

cmd_forward() {
  local c=$1 name=$2 port=$3 nd
  load_plan "$c" || stack_die "no plan for $c's node"
  nd=$(node_dir "$c")
  mkdir -p "$STACK_DIR/netns" "$nd/fwd"
  stack_proxy_script >"$STACK_DIR/netns/proxy.py"
  stack_start "$c-fwd-$name-bridge" python3 "$STACK_DIR/netns/proxy.py" unix "$nd/fwd/$name.sock" "$port"
  stack_wait_for 30 "the bridge of $name into $NODE" test -S "$nd/fwd/$name.sock"
  stack_start "$c-fwd-$name" nsenter --net="/var/run/netns/$NODE_NETNS" \
    python3 "$STACK_DIR/netns/proxy.py" tcp "$port" "$nd/fwd/$name.sock" 0.0.0.0
  stack_wait_for 30 "$name in $NODE at $NODE_IP:$port" in_node bash -c "exec 3<>/dev/tcp/$NODE_IP/$port"
}

cmd_registry() {
  local c=$1 port=$2 d
  load_plan "$c" || stack_die "no plan for $c's node"
  cmd_forward "$c" registry "$port"
  # containerd reads the hosts folder at every pull.
  d=$(node_dir "$c")/containerd/certs.d/$NODE_IP:$port
  mkdir -p "$d"
  cat >"$d/hosts.toml" <<TOML
server = "http://$NODE_IP:$port"
[host."http://$NODE_IP:$port"]
  capabilities = ["pull", "resolve"]
TOML
}

cmd_import() {
  local c=$1 f sock
  shift
  load_plan "$c" || stack_die "no plan for $c's node"
  sock=$(node_dir "$c")/containerd/containerd.sock
  for f in "$@"; do
    ctr --address "$sock" -n k8s.io images import "$f" >/dev/null
  done
}

cmd_addons() {
  local c=$1 nd ap_var
  load_plan "$c" || stack_die "no plan for $c's node"
  stack_env_load
  nd=$(node_dir "$c")
  ap_var=$(stack_var "$c" PORT)
  mkdir -p "$nd/kube-proxy"
  cp "$STACK_DIR/$c/ca.crt" "$nd/kube-proxy/ca.crt"
  stack_write_kubeconfig "$nd/kube-proxy/kubeconfig" kube-proxy "$c" "https://127.0.0.1:${!ap_var}" \
    "$STACK_DIR/$c/ca.crt" system:kube-proxy "$PROXY_TOKEN"
  # The pod reads it at the same path: point the CA there.
  sed -i "s#^    certificate-authority-data: .*#    certificate-authority: /var/lib/kube-proxy/ca.crt#" "$nd/kube-proxy/kubeconfig"
  # clusterCIDR is the member's pod range: kube-proxy leaves the source of
  # the cluster's own pods as it is on their way to a ClusterIP (a remote
  # member's ClusterIP behind a mirrored Service leaves through WireGuard
  # with the pod's address, which the other side's Peer allows), and
  # masquerades what comes from elsewhere, e.g. from another member through
  # WireGuard, so that replies come back through this node. kube-proxy
  # drops traffic to unallocated addresses of its own service CIDR only
  # (its ServiceCIDR objects), so the other members' ClusterIPs pass.
  cat >"$nd/kube-proxy/config.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: /var/lib/kube-proxy/kubeconfig}
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
nodePortAddresses: [$NODE_IP/32]
YAML
  # The MCS CRDs go in before CoreDNS: its clusterset plugin watches
  # ServiceImports, and counts ready only once that watch has synced.
  kc "$c" apply --server-side -f "$images/crds/" >/dev/null
  kc "$c" wait --for condition=established --timeout=60s \
    crd/serviceexports.multicluster.x-k8s.io crd/serviceimports.multicluster.x-k8s.io >/dev/null
  kc "$c" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system, labels: {k8s-app: kube-proxy}}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  template:
    metadata: {labels: {k8s-app: kube-proxy}}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      containers:
      - name: kube-proxy
        image: stack.local/kube-proxy:$kube_version
        imagePullPolicy: Never
        args: [--config=/var/lib/kube-proxy/config.yaml, --v=1]
        securityContext: {privileged: true}
        volumeMounts: [{name: config, mountPath: /var/lib/kube-proxy, readOnly: true}]
      volumes:
      - name: config
        hostPath: {path: $nd/kube-proxy, type: Directory}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [multicluster.x-k8s.io]
  resources: [serviceimports]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    clusterset.local:1053 {
        errors
        ready :8181
        clusterset clusterset.local
    }
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
      - name: coredns
        image: stack.local/coredns:$coredns_version
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_IP
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
YAML
  kc "$c" -n kube-system rollout status daemonset/kube-proxy --timeout=120s >/dev/null
  kc "$c" -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null
  stack_log "$c: kube-proxy and CoreDNS ready"
}

# node_pids NODE_DIR CGROOT prints the processes of a node: those in its
# mount namespace (containerd, shims, kubelet) and those in its cgroups
# (the pods' processes).
node_pids() {
  local nd=$1 cgroot=$2 ino p
  case $cgroot in /km?*) ;; *) stack_die "node_pids: not a node's cgroup root: $cgroot" ;; esac
  if awk -v f="$nd/ns/mnt" '$5 == f { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    ino=$(stat -L -c %i "$nd/ns/mnt")
    if [ "$ino" != "$(stat -L -c %i /proc/self/ns/mnt)" ] && [ "$ino" != "$(stat -L -c %i /proc/1/ns/mnt 2>/dev/null || true)" ]; then
      for p in /proc/[0-9]*; do
        [ "$(stat -L -c %i "$p/ns/mnt" 2>/dev/null || true)" = "$ino" ] && printf '%s\n' "${p#/proc/}"
      done
    fi
  fi
  if [ -d "/sys/fs/cgroup/memory$cgroot" ]; then
    find "/sys/fs/cgroup/memory$cgroot" -name cgroup.procs -exec cat {} + 2>/dev/null
  fi
  return 0
}

cmd_down() {
  local c=$1 nd cd ids id pids i m f
  load_plan "$c" || return 0
  nd=$(node_dir "$c")
  cd=$nd/containerd
  stack_log "$c: removing node $NODE"
  STACK_GRACE=${STACK_GRACE:-10} stack_stop "$c-kubelet"
  if [ -S "$cd/containerd.sock" ] && stack_running "$c-containerd" >/dev/null; then
    ids=$(timeout 20 ctr --address "$cd/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null || true)
    for id in $ids; do timeout 10 ctr --address "$cd/containerd.sock" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
    for id in $ids; do timeout 10 ctr --address "$cd/containerd.sock" -n k8s.io tasks rm -f "$id" >/dev/null 2>&1 || true; done
    ids=$(timeout 20 ctr --address "$cd/containerd.sock" -n k8s.io containers ls -q 2>/dev/null || true)
    for id in $ids; do timeout 10 ctr --address "$cd/containerd.sock" -n k8s.io containers rm "$id" >/dev/null 2>&1 || true; done
  fi
  STACK_GRACE=${STACK_GRACE:-10} stack_stop "$c-containerd"
  # Whatever still runs in the node (shims, a pod's process) is killed:
  # these are processes of this node's own namespaces and cgroups.
  for i in $(seq 50); do
    pids=$(node_pids "$nd" "$CGROOT" | sort -u)
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086 # one PID a word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
  [ -z "$(node_pids "$nd" "$CGROOT")" ] || stack_log "$c: processes of $NODE are still running: $(node_pids "$nd" "$CGROOT" | tr '\n' ' ')"
  local fwd=()
  for f in "$STACK_DIR/pids/$c"-fwd-*.pid; do
    [ -e "$f" ] || continue
    fwd+=("$(basename "$f" .pid)")
  done
  [ ${#fwd[@]} -eq 0 ] || stack_stop "${fwd[@]}"
  # The mount namespace goes once its last process has gone and its file
  # is unbound; then any mount left under the node's folder (none
  # expected), deepest first.
  umount "$nd/ns/mnt" 2>/dev/null || true
  umount "$nd/ns" 2>/dev/null || true
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$nd/" 'index($5, d) == 1 || $5 == substr(d, 1, length(d) - 1) { print $5 }' /proc/self/mountinfo | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
  # The link, its host end, the host's route, the bridge, the node's nft
  # tables and its ip_forward all go with the network namespace.
  if [ -e "/run/netns/$NODE_NETNS" ]; then
    ip netns del "$NODE_NETNS"
  fi
  for i in $(seq 50); do
    ip link show "$HOST_VETH" >/dev/null 2>&1 || break
    sleep 0.1
  done
  for i in $(seq 50); do
    local left=0 h
    for h in /sys/fs/cgroup/*/; do
      [ -d "$h${CGROOT#/}" ] || continue
      find "$h${CGROOT#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ ! -d "$h${CGROOT#/}" ] || left=1
    done
    [ "$left" = 1 ] || break
    sleep 0.2
  done
  rm -rf "$cd" "$nd/kubelet-root" "$nd/cni-ipam" "$nd/ns" "$nd/host"
  rm -f "$nd/plan.up"
  mv "$nd/plan" "$nd/plan.down"
}

# cmd_leftovers prints, for every node this run planned, what is left.
cmd_leftovers() {
  local f c nd bad=0 h p
  for f in "$STACK_DIR"/*/node/plan "$STACK_DIR"/*/node/plan.down; do
    [ -f "$f" ] || continue
    nd=$(dirname "$f")
    c=$(basename "$(dirname "$nd")")
    # shellcheck disable=SC1090
    . "$f"
    if [ -e "/run/netns/$NODE_NETNS" ]; then echo "$c: network namespace $NODE_NETNS"; bad=1; fi
    if ip link show "$HOST_VETH" >/dev/null 2>&1; then echo "$c: link $HOST_VETH"; bad=1; fi
    if [ -n "$(ip -o route show "$POD_CIDR")" ]; then echo "$c: route to $POD_CIDR"; bad=1; fi
    for h in /sys/fs/cgroup/*/; do
      if [ -d "$h${CGROOT#/}" ]; then echo "$c: cgroup $h${CGROOT#/}"; bad=1; fi
    done
    for p in $(node_pids "$nd" "$CGROOT"); do echo "$c: process $p"; bad=1; done
  done
  if awk -v d="$STACK_DIR/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    echo "mounts under $STACK_DIR:"
    awk -v d="$STACK_DIR/" 'index($5, d) == 1 { print "  " $5 }' /proc/self/mountinfo
    bad=1
  fi
  [ "$bad" = 0 ]
}

# cmd_usage samples /proc/<pid>/stat (utime + stime) twice, SECONDS apart,
# and VmRSS at the end. A pod's processes are named by their pod (the
# kubelet's cgroup pod<uid>, looked up through the API).
cmd_usage() {
  local secs=${1:-60} f nd c pid line
  local -A name t0
  stack_env_load
  for f in "$STACK_DIR"/*/node/plan; do
    [ -e "$f" ] || continue
    nd=$(dirname "$f")
    c=$(basename "$(dirname "$nd")")
    load_plan "$c"
    if pid=$(stack_running "$c-containerd"); then name[$pid]="$c containerd"; fi
    if pid=$(stack_running "$c-kubelet"); then name[$pid]="$c kubelet"; fi
    while read -r pid; do
      if [ -z "$pid" ] || [ -n "${name[$pid]:-}" ]; then continue; fi
      case $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) in
        *containerd-shim*) name[$pid]="$c shim" ;;
      esac
    done < <(node_pids "$nd" "$CGROOT" | sort -u)
    local -A pods=()
    while read -r line; do
      pods[${line%% *}]=${line#* }
    done < <(kc "$c" get pods -A -o jsonpath='{range .items[*]}{.metadata.uid} {.metadata.namespace}/{.metadata.name}{"\n"}{end}')
    while read -r pid; do
      if [ -z "$pid" ] || [ -n "${name[$pid]:-}" ]; then continue; fi
      local uid comm
      uid=$(sed -n 's#.*/pod\([0-9a-f-]*\)/.*#\1#p' "/proc/$pid/cgroup" 2>/dev/null | head -n1)
      comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
      name[$pid]="$c pod ${pods[$uid]:-?} $comm"
    done < <(find "/sys/fs/cgroup/memory$CGROOT" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done
  for pid in "${!name[@]}"; do
    t0[$pid]=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
  done
  sleep "$secs"
  local hz t1 kb
  hz=$(getconf CLK_TCK)
  printf '%-60s %8s %8s %7s\n' PROCESS PID RSS_MB CPU_%
  for pid in "${!name[@]}"; do
    t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null) || continue
    kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || continue
    printf '%-60s %8s %8.1f %7.2f\n' "${name[$pid]}" "$pid" "$(echo "$kb / 1024" | bc -l)" \
      "$(echo "($t1 - ${t0[$pid]}) * 100 / $hz / $secs" | bc -l)"
  done | sort
}

case "${1:-}" in
  plan) cmd_plan "$2" "$3" ;;
  packages) cmd_packages ;;
  images) cmd_images ;;
  up) cmd_up "$2" ;;
  forward) cmd_forward "$2" "$3" "$4" ;;
  registry) cmd_registry "$2" "$3" ;;
  import) c=$2; shift 2; cmd_import "$c" "$@" ;;
  addons) cmd_addons "$2" ;;
  down) cmd_down "$2" ;;
  leftovers) cmd_leftovers ;;
  usage) cmd_usage "${2:-60}" ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
