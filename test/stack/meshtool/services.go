package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/meshpods"
)

// ServicesCmd asks, from the probe pod of every importer, for a Service
// that another member exports on the mesh (docs/services.md): by its
// clusterset.local name, which the importer's CoreDNS answers with the
// ClusterSet IP of its ServiceImport, which the importer's kube-proxy sends
// across the mesh to the exporter's pods.
type ServicesCmd struct {
	Exporter  string        `default:"cluster-a" help:"The member that exports the Service."`
	Importers []string      `arg:"" optional:"" help:"Members to ask from (default: every other cluster of the stack with a real node)."`
	Name      string        `default:"hello" help:"The exported Service, in meshpods' namespace."`
	Timeout   time.Duration `default:"3m" help:"How long the import, the name and the answer may take."`
}

var mcsServiceImport = schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1beta1", Kind: "ServiceImport"}

// errServicesUnreached says that some importer does not reach the
// exported Service.
var errServicesUnreached = errors.New("some members do not reach the exported Service")

// Run waits for every importer's ServiceImport, then asks for the Service
// by name from each importer's probe pod, and prints what answered.
func (c *ServicesCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	importers := c.Importers
	if len(importers) == 0 {
		importers = realNodeClusters(env, c.Exporter)
	}
	if len(importers) == 0 {
		return errors.New("no member with a real node to ask from (STACK_REAL_NODES=1)")
	}
	clients, err := clientsOf(env, append([]string{c.Exporter}, importers...))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	// The pods are there already (pods --deploy-only): this finds them.
	pods, err := meshpods.Deploy(ctx, clients)
	if err != nil {
		return err
	}
	hello, err := meshpods.HelloPods(ctx, clients[c.Exporter])
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s.%s.svc.clusterset.local", c.Name, meshpods.Namespace)
	start := time.Now()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Printf("\nA Service across the mesh: %s/%s exported by %s (ServiceExport), asked by name from each member's probe pod:\n", meshpods.Namespace, c.Name, c.Exporter)
	fmt.Fprintln(w, "  MEMBER\tCLUSTERSET IP\tDNS ANSWER\tHTTP GET http://"+name+"/\t")
	failed := false
	for _, imp := range importers {
		ip, dns, answer, err := c.ask(ctx, clients[imp], pods, imp, name, hello)
		if err != nil {
			failed = true
			answer = "FAILED: " + err.Error()
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t\n", imp, ip, dns, answer)
	}
	_ = w.Flush()
	fmt.Printf("  (%.1fs)\n", time.Since(start).Seconds())
	if failed {
		return errServicesUnreached
	}
	return nil
}

// ask waits for the importer's ServiceImport and its ClusterSet IP, for the
// name to resolve to it in the importer's probe pod, and for a hello pod of
// the exporter to answer a GET by name.
func (c *ServicesCmd) ask(ctx context.Context, kube client.Client, pods *meshpods.Pods, imp, name string, hello []string) (ip, dns, answer string, err error) {
	err = wait.Poll(ctx, "", c.Timeout, 500*time.Millisecond, func() (bool, error) {
		if ip == "" {
			si := &unstructured.Unstructured{}
			si.SetGroupVersionKind(mcsServiceImport)
			if err := kube.Get(ctx, client.ObjectKey{Namespace: meshpods.Namespace, Name: c.Name}, si); err != nil {
				return false, fmt.Errorf("no ServiceImport yet: %w", err)
			}
			ips, _, _ := unstructured.NestedStringSlice(si.Object, "spec", "ips")
			if len(ips) == 0 {
				return false, errors.New("the ServiceImport has no ClusterSet IP yet")
			}
			ip = ips[0]
		}
		if dns == "" {
			// The rooted name skips the pod's search path.
			out, err := pods.Ask(ctx, imp, "/dns?name="+name+".")
			switch got := strings.Fields(out); {
			case err != nil:
				return false, err
			case !slices.Contains(got, ip):
				return false, fmt.Errorf("%s resolves to %q, not yet to %s", name, strings.TrimSpace(out), ip)
			default:
				dns = strings.Join(got, " ")
			}
		}
		out, err := pods.Ask(ctx, imp, "/get?url=http://"+name+"/")
		status, body, _ := strings.Cut(strings.TrimSpace(out), "\n")
		pod, _, _ := strings.Cut(strings.TrimPrefix(body, "hello from pod "), " ")
		switch {
		case err != nil:
			return false, err
		case status == "200" && slices.Contains(hello, pod):
			answer = status + " from " + c.Exporter + "'s pod " + pod
			return true, nil
		default:
			return false, fmt.Errorf("answer %q", strings.ReplaceAll(strings.TrimSpace(out), "\n", " "))
		}
	})
	return ip, dns, answer, err
}
