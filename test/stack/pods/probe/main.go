// Command probe is the client pod of the real-node checks. On ADDR (default
// :8080) it serves:
//
//	/get?url=U    an ordinary HTTP GET of U from inside the pod; answers
//	              "<status code>\n<body>" (at most 4 KiB of it), or 502
//	              with the error
//	/api?path=P   a GET of P from the apiserver at the kubernetes Service,
//	              with the pod's ServiceAccount token and CA; answered as
//	              /get answers
//	/dns?name=N   N resolved with the pod's resolv.conf, one address a line
//	/             "probe ok"
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	// A new connection per request, so that a Service's replicas take
	// turns.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	http.HandleFunc("/get", func(w http.ResponseWriter, r *http.Request) {
		// Any URL: asking from inside the pod is what the probe is for.
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, r.URL.Query().Get("url"), nil) //nolint:gosec // G704: by design
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		relay(w, client, req)
	})
	http.HandleFunc("/api", func(w http.ResponseWriter, r *http.Request) {
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
		token, err := os.ReadFile(sa + "token")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		ca, err := os.ReadFile(sa + "ca.crt")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		u := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + r.URL.Query().Get("path")
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil) //nolint:gosec // G704: the apiserver at the kubernetes Service
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		relay(w, c, req)
	})
	http.HandleFunc("/dns", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, r.URL.Query().Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, strings.Join(addrs, "\n")) //nolint:gosec // G705: plain text for tests
	})
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "probe ok") })
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// relay sends req with c and writes "<status code>\n<body>" (at most 4 KiB
// of it), or 502 with the error.
func relay(w http.ResponseWriter, c *http.Client, req *http.Request) {
	resp, err := c.Do(req) //nolint:gosec // G704: by design, see /get
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(w, "%d\n%s", resp.StatusCode, body) //nolint:gosec // G705: plain text for tests
}
