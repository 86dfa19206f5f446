// Package stack reads the env file of a local stack started by up.sh and
// crossplane-up.sh (see README.md), and makes clients for its clusters.
package stack

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// An Env is the env file of a running stack.
type Env struct {
	// Dir is the run folder.
	Dir string
	// Vars are the file's variables.
	Vars map[string]string
}

// Load reads dir/env.
func Load(dir string) (*Env, error) {
	f, err := os.Open(filepath.Join(dir, "env")) //nolint:gosec // the run folder is the caller's choice
	if err != nil {
		return nil, fmt.Errorf("cannot read the stack's env file (is the stack up?): %w", err)
	}
	defer f.Close()
	e := &Env{Dir: dir, Vars: map[string]string{}}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if !ok {
			continue
		}
		e.Vars[k] = strings.Trim(v, "'")
	}
	return e, s.Err()
}

// Var is the value of a variable of cluster c, e.g. Var("cluster-a",
// "KUBECONFIG") reads CLUSTER_A_KUBECONFIG.
func (e *Env) Var(c, suffix string) string {
	return e.Vars[strings.ReplaceAll(strings.ToUpper(c), "-", "_")+"_"+suffix]
}

// Clusters are the clusters of the stack, the management cluster first.
func (e *Env) Clusters() []string { return strings.Fields(e.Vars["STACK_CLUSTERS"]) }

// Management is the name of the management cluster.
func (e *Env) Management() string { return e.Vars["STACK_MANAGEMENT"] }

// Kubeconfig is the path of the admin kubeconfig of cluster c.
func (e *Env) Kubeconfig(c string) string { return e.Var(c, "KUBECONFIG") }

// RESTConfig reaches cluster c as its admin.
func (e *Env) RESTConfig(c string) (*rest.Config, error) {
	path := e.Kubeconfig(c)
	if path == "" {
		return nil, fmt.Errorf("no cluster %q in the stack (clusters: %s)", c, e.Vars["STACK_CLUSTERS"])
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("cannot load the kubeconfig of %s: %w", c, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Scheme knows Kubernetes' own kinds and Kilo's Peer.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := kilov1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Client reaches cluster c as its admin.
func (e *Env) Client(c string) (client.WithWatch, error) {
	cfg, err := e.RESTConfig(c)
	if err != nil {
		return nil, err
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}
