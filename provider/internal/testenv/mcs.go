package testenv

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// mcsAPI is the module of the Multi-Cluster Services API's CRDs.
const mcsAPI = "sigs.k8s.io/mcs-api@v0.5.2"

// MCSCRDs returns the files of the ServiceExport and ServiceImport CRDs of
// the Multi-Cluster Services API, from the module kilomesh builds with.
func MCSCRDs(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", mcsAPI).Output()
	if err != nil {
		return nil, errors.Wrap(err, "cannot download "+mcsAPI)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, errors.Wrap(err, "cannot read go mod download output")
	}
	return []string{
		filepath.Join(m.Dir, "config", "crd", "multicluster.x-k8s.io_serviceexports.yaml"),
		filepath.Join(m.Dir, "config", "crd", "multicluster.x-k8s.io_serviceimports.yaml"),
	}, nil
}
