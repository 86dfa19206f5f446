// Command hello is the tiny HTTP server of the real-node checks: on ADDR
// (default :8080) it answers every request with the pod's name (its
// hostname) and the caller's address.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from pod %s (uid %d), you are %s\n", host, os.Getuid(), r.RemoteAddr) //nolint:gosec // G705: plain text for tests
	})
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
