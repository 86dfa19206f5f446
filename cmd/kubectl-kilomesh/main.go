// Command kubectl-kilomesh is a kubectl plugin that shows kilomesh meshes:
// the status of every member and whether a mesh converged (and waits for
// it), the whole mesh as a picture, and a diagnosis with fixes. It reads
// only what kilomesh publishes in the management cluster, with the user's
// kubeconfig; it never reaches a member cluster.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Exit codes scripts can use.
const (
	// exitOK: the command did what it was asked; with status --wait, every
	// mesh converged; with diagnose, no error was found.
	exitOK = 0
	// exitError: the command could not run (flags, kubeconfig, the
	// management cluster, a mesh that does not exist).
	exitError = 1
	// exitNotConverged: status --wait timed out before every mesh
	// converged, or diagnose found an error.
	exitNotConverged = 2
)

// version is set at build time (-ldflags "-X main.version=v0.1.0").
var version = "dev"

const errKubeconfig = "cannot load the kubeconfig"

// cli is the command line of kubectl-kilomesh: kubectl's connection flags
// and the commands.
type cli struct {
	Kubeconfig     string        `help:"Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)." type:"path"`
	Context        string        `help:"The kubeconfig context to use."`
	Cluster        string        `help:"The kubeconfig cluster to use."`
	User           string        `help:"The kubeconfig user to use."`
	Namespace      string        `help:"Namespace of the meshes (default: the context's namespace)." short:"n"`
	RequestTimeout time.Duration `help:"How long one request to the management cluster may take (0: no limit)." default:"0"`

	Status   statusCmd   `cmd:"" help:"Show the status of meshes: every member, its segments and leaders, its Peers, what it skipped; --wait waits until every mesh converged."`
	Graph    graphCmd    `cmd:"" help:"Draw a mesh: members, segments with their leaders and nodes, Peers with their routes, skipped nodes."`
	Diagnose diagnoseCmd `cmd:"" help:"Check a mesh as an operator would, and say how to fix each finding."`
	Peers    peersCmd    `cmd:"" help:"Print the Kilo Peers each member gets, from the output of crossplane composition render: those of Objects, and those of PeerSets with the SegmentSets they reference resolved."`
	Imports  importsCmd  `cmd:"" help:"Print what each member imports, from the output of crossplane composition render: the members whose exported Services it takes, in which namespaces."`
	Version  versionCmd  `cmd:"" help:"Print the version."`
}

// env is what the commands get from outside: where to write, and the parts
// tests replace.
type env struct {
	stdout, stderr io.Writer
	// stdin is what peers reads by default; os.Stdin when nil.
	stdin io.Reader
	// clock, when set, is the time of every snapshot instead of the
	// management cluster's clock.
	clock func() time.Time
	// lookPath finds Graphviz's dot.
	lookPath func(string) (string, error)
	// sleep waits between two reads of status --wait.
	sleep func(context.Context, time.Duration) error
	// reader, when set, sees the reader of every command: tests count
	// its requests.
	reader func(*snapshot.Reader)
}

// A codeError is an error that sets the exit code; its message, if any, is
// printed.
type codeError struct {
	code int
	msg  string
}

func (e *codeError) Error() string { return e.msg }

// config loads the client configuration and the namespace from the
// kubeconfig, as kubectl does.
func (c *cli) config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	overrides.Context.Cluster = c.Cluster
	overrides.Context.AuthInfo = c.User
	overrides.Context.Namespace = c.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", errors.Wrap(err, errKubeconfig)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", errors.Wrap(err, errKubeconfig)
	}
	cfg.Timeout = c.RequestTimeout
	return cfg, ns, nil
}

// reader returns a reader of the management cluster and the namespace.
func (c *cli) reader(e *env) (*snapshot.Reader, string, error) {
	cfg, ns, err := c.config()
	if err != nil {
		return nil, "", err
	}
	r, err := snapshot.NewReader(cfg)
	if err != nil {
		return nil, "", err
	}
	r.Clock = e.clock
	if e.clock != nil {
		r.LocalClock = e.clock
	}
	if e.reader != nil {
		e.reader(r)
	}
	return r, ns, nil
}

type versionCmd struct{}

func (versionCmd) Run(e *env) error {
	_, err := io.WriteString(e.stdout, "kubectl-kilomesh "+version+"\n")
	return err
}

// run runs the plugin with arguments and returns its exit code. What it
// writes passes through safetext: the text it shows comes from members and
// nodes, and a control character in it never reaches the terminal.
func run(ctx context.Context, args []string, e *env) int {
	stdout, stderr := safetext.NewWriter(e.stdout), safetext.NewWriter(e.stderr)
	defer func() {
		_ = stdout.Flush()
		_ = stderr.Flush()
	}()
	safe := *e
	safe.stdout, safe.stderr = stdout, stderr
	return runSafe(ctx, args, &safe)
}

func runSafe(ctx context.Context, args []string, e *env) int {
	var c cli
	code := -1
	parser, err := kong.New(&c,
		kong.Name("kubectl kilomesh"),
		kong.Description("See and wait on kilomesh meshes, from what kilomesh publishes in the management cluster."),
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(func(n int) { code = n }),
		kong.UsageOnError(),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(e),
	)
	if err != nil {
		_, _ = io.WriteString(e.stderr, "kubectl kilomesh: "+err.Error()+"\n")
		return exitError
	}
	kctx, err := parser.Parse(args)
	if code >= 0 {
		return code // --help
	}
	if err != nil {
		parser.Errorf("%s", err)
		return exitError
	}
	err = kctx.Run(&c)
	var ec *codeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ec):
		if ec.msg != "" {
			_, _ = io.WriteString(e.stderr, "kubectl kilomesh: "+ec.msg+"\n")
		}
		return ec.code
	}
	_, _ = io.WriteString(e.stderr, "kubectl kilomesh: error: "+err.Error()+"\n")
	return exitError
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, lookPath: lookPath, sleep: sleep})
	stop()
	os.Exit(code)
}
