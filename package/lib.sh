# What package/build.sh and package/push.sh know of each package.
#
# pkg_info PACKAGE sets, for provider, function, configuration or
# provider-kubernetes: name (of the package), registry (where it is
# published, with its organisation), version, root (its package folder),
# main (the Go package of its binary; empty without one, or when test/tools
# builds it), examples (folder of examples to embed, or empty) and ports
# (imagebuild flags). It reads VERSION and REGISTRY (see build.sh) and
# exits on a bad VERSION or an unknown package.
pkg_info() {
  version=${VERSION:-v0.0.0-dev}
  registry=${REGISTRY:-xpkg.crossplane.io/kilomesh}
  main= examples= ports=()
  case "$1" in
    provider)
      name=provider-kilomesh
      main=./provider/cmd/provider
      root=package/provider
      examples=examples/provider
      ports=(--port 8080/tcp --port 8081/tcp)
      ;;
    function)
      name=function-kilomesh
      main=./fn
      root=package/function
      ports=(--port 9443/tcp --port 8080/tcp)
      ;;
    configuration)
      name=configuration-kilomesh
      root=package/configuration
      ;;
    provider-kubernetes)
      local mod=github.com/crossplane-contrib/provider-kubernetes
      name=provider-kubernetes
      version=$(cd "$top/test/tools/provider-kubernetes" && go list -m -f '{{.Version}}' "$mod")
      root=$(cd "$top/test/tools/provider-kubernetes" && go list -m -f '{{.Dir}}' "$mod")/package
      registry=xpkg.crossplane.io/crossplane-contrib
      ports=(--port 8080/tcp --port 8081/tcp --port 9443/tcp)
      ;;
    *)
      echo "unknown package $1 (known: provider, function, configuration, provider-kubernetes)" >&2
      exit 2
      ;;
  esac
  [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
    { echo "VERSION $version is not a semantic version like v1.2.3" >&2; exit 2; }
}
