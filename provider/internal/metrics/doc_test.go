/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package metrics_test

import (
	"testing"

	"github.com/kilomesh/kilomesh/internal/testing/metricsdoc"
	"github.com/kilomesh/kilomesh/provider/internal/metrics"
)

// TestMetricsDocumented holds the provider's collectors against the table
// of metrics of docs/observability.md.
func TestMetricsDocumented(t *testing.T) {
	diff, err := metricsdoc.Diff("../../../docs/observability.md", "provider", metrics.Collectors(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Errorf("docs/observability.md lists every metric family the provider registers (-guide, +registered):\n%s", diff)
	}
}
