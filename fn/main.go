// Command function-kilomesh is a Crossplane composition function that turns
// a ClusterMesh into the Kilo Peers of every member cluster.
package main

import (
	"time"

	"github.com/alecthomas/kong"
	// The images have no CA bundle: the binary carries the roots it verifies
	// public certificates with, when the system offers none.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	function "github.com/crossplane/function-sdk-go"
)

// CLI of function-kilomesh.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network     string `default:"tcp"   help:"Network on which to listen for gRPC connections."`
	Address     string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir string `env:"TLS_SERVER_CERTS_DIR"           help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)."`
	Insecure    bool   `help:"Run without mTLS credentials. If you supply this flag --tls-certs-dir will be ignored."`

	MetricsAddress string `default:":8080" help:"Address at which to serve Prometheus metrics; empty disables them."`

	MaxRecvMessageSize int           `default:"64"  help:"Largest request to accept, in MiB. Crossplane sends every observed resource of a mesh."`
	ResponseTTL        time.Duration `default:"60s" help:"How long Crossplane may cache a response. It also re-runs the function this often, a safety net for missed events."`
	ShareSegmentsAbove int           `default:"65536" help:"Bytes of Peers that a mesh's PeerSets may take inline, all together, before each segment is written once in a SegmentSet that every PeerSet references. A mesh's kilomesh.io/share-segments-above annotation may lower it."`
}

// Run this function.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return function.Serve(&Function{log: log, ttl: c.ResponseTTL, shareAbove: c.ShareSegmentsAbove, metrics: newMetrics(registry), meshes: newMeshMetrics(registry, time.Now)},
		function.WithMetricsRegistry(registry),
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024),
		function.WithMetricsServer(c.MetricsAddress))
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Description("A Crossplane composition function that meshes Kilo clusters."))
	ctx.FatalIfErrorf(ctx.Run())
}
