// Package apis holds the API types of kilomesh and generates everything
// derived from them: deep-copy and managed-resource methods, the CRDs of
// provider-kilomesh, the CRD of Kilo's Peer used in tests, and the
// ClusterMesh XRD of the Configuration package.
//
// Run `make generate` (it builds the generators first); CI fails when the
// committed output differs from what these directives produce.
package apis

// Deep-copy methods and managed-resource method sets.
//go:generate ../.cache/bin/controller-gen object:headerFile=header.go.txt paths=./...
//go:generate ../.cache/bin/angryjet generate-methodsets --header-file=header.go.txt ./kube/...

// CRDs: provider-kilomesh's managed resources, Kilo's Peer (for tests and
// dry-run validation), and the ClusterMesh (only as input of the XRD).
//go:generate rm -rf ../package/provider/crds ../.cache/gen/xr
//go:generate ../.cache/bin/controller-gen crd:crdVersions=v1 paths=./kube/... output:crd:artifacts:config=../package/provider/crds
//go:generate ../.cache/bin/controller-gen crd:crdVersions=v1 paths=./kilo/... output:crd:artifacts:config=../test/crds
//go:generate ../.cache/bin/controller-gen crd:crdVersions=v1 paths=./mesh/... output:crd:artifacts:config=../.cache/gen/xr

// The ClusterMesh XRD, from the ClusterMesh CRD.
//go:generate go run ./internal/xrdgen -crd ../.cache/gen/xr/kilomesh.io_clustermeshes.yaml -out ../package/configuration/xrd.yaml

// The configuration reference, from the XRD and the CRDs.
//go:generate go run ./internal/docgen -xrd ../package/configuration/xrd.yaml -crds ../package/provider/crds -out ../docs/reference.md
