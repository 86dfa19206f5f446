package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// TestSkipReasonsRendered keeps the render scenarios (above all
// examples/render/skip-reasons) showing the skip reasons: run through the
// function, they leave a node out for each.
func TestSkipReasonsRendered(t *testing.T) {
	dirs, err := filepath.Glob("../examples/render/*")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
	for _, dir := range dirs {
		s := loadScenario(t, dir)
		rsp := s.run(t, f, s.xr)
		for _, c := range get(rsp.GetDesired().GetComposite().GetResource(), "status", "clusters").GetListValue().GetValues() {
			for _, sk := range get(c.GetStructValue(), "skipped").GetListValue().GetValues() {
				if r := get(sk.GetStructValue(), "reason").GetStringValue(); seen[r] == "" || filepath.Base(dir) == "skip-reasons" {
					seen[r] = filepath.Base(dir)
				}
			}
		}
	}
	for _, r := range mesh.SkipReasons() {
		if seen[r] == "" {
			t.Errorf("A render scenario leaves a node out for every skip reason (examples/render/skip-reasons, unless another shows it): none for %s", r)
		}
	}
}
