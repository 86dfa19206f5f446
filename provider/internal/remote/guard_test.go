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

package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// nodes returns Nodes named n-00 to n-(count-1), with big labels a slim
// Node drops.
func nodes(from, to int) []corev1.Node {
	out := make([]corev1.Node, 0, to-from)
	for i := from; i < to; i++ {
		n := nodefixture.New(fmt.Sprintf("n-%02d", i)).Label("big", strings.Repeat("v", 60)).Object()
		n.ResourceVersion = "1"
		n.Status.Images = []corev1.ContainerImage{{Names: []string{strings.Repeat("i", 1000)}}}
		out = append(out, *n)
	}
	return out
}

func nodeLimits(items int) Limits {
	return Limits{Items: items, Bytes: 1 << 30, PageSize: 2, Slim: slimNode, Weigh: weighNode}
}

// TestGuardList lists through a guard: pages of its own size, at the
// newest version, each slimmed as it arrives, stopping at the bound.
func TestGuardList(t *testing.T) {
	cases := map[string]struct {
		reason string
		items  int
		// want are the names listed and what the guard says.
		want      []string
		wantPages int
		wantCut   string
	}{
		"Fits": {
			reason:    "Every page is asked for and kept.",
			items:     10,
			want:      []string{"n-00", "n-01", "n-02", "n-03", "n-04"},
			wantPages: 3,
		},
		"Bounded": {
			reason:    "The list stops at the bound: no later page is asked for, and the guard names the bound.",
			items:     3,
			want:      []string{"n-00", "n-01", "n-02"},
			wantPages: 2,
			wantCut:   "more than 3 Nodes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			all := nodes(0, 5)
			var asked []metav1.ListOptions
			lw := lister{list: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
				asked = append(asked, o)
				from, _ := strconv.Atoi(o.Continue)
				to := min(from+int(o.Limit), len(all))
				l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: slices.Clone(all[from:to])}
				if to < len(all) {
					l.Continue = strconv.Itoa(to)
				}
				return l, nil
			}}
			g := newGuard("Nodes", nodeLimits(tc.items), func() {})
			list := g.lister(lw).list
			var got []string
			o := metav1.ListOptions{ResourceVersion: "0", Limit: 500}
			for {
				l, err := list(t.Context(), o)
				if err != nil {
					t.Fatal(err)
				}
				nl := l.(*corev1.NodeList)
				for _, n := range nl.Items {
					got = append(got, n.Name)
					if n.Labels == nil || n.Status.Images != nil {
						t.Errorf("\n%s\nNode %s is not slim: %+v", tc.reason, n.Name, n)
					}
				}
				if nl.Continue == "" {
					break
				}
				o = metav1.ListOptions{Continue: nl.Continue, Limit: 500}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nlisted: -want, +got:\n%s", tc.reason, diff)
			}
			if len(asked) != tc.wantPages {
				t.Errorf("\n%s\nasked for %d pages, want %d", tc.reason, len(asked), tc.wantPages)
			}
			if asked[0].ResourceVersion != "" || asked[0].Limit != 2 {
				t.Errorf("\n%s\nthe first page must be asked at the newest version and the guard's page size, got %+v", tc.reason, asked[0])
			}
			if got := g.incomplete(); got != tc.wantCut {
				t.Errorf("\n%s\nincomplete() = %q, want %q", tc.reason, got, tc.wantCut)
			}
		})
	}
}

// TestGuardWatch runs a feed against a server that streams its list and
// then adds more Nodes than the bound: the store never holds more, the
// feed says why, and once a deletion makes room the feed lists again and
// says nothing once everything fits.
func TestGuardWatch(t *testing.T) {
	watchers := make(chan *watch.FakeWatcher, 10)
	var streams atomic.Int64
	lw := lister{
		list: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents == nil || !*o.SendInitialEvents {
				return nil, kerrors.NewBadRequest("only streaming lists here")
			}
			streams.Add(1)
			w := watch.NewFakeWithChanSize(100, false)
			watchers <- w
			return w, nil
		},
	}
	var wakes atomic.Int64
	f := startFeed(t.Context(), feedConfig{
		what: "Nodes", lw: lw, obj: &corev1.Node{}, transform: SlimNode,
		changed: func() { wakes.Add(1) }, gone: func() {},
		limits: &Limits{Items: 3, Bytes: 1 << 30, PageSize: 2, Slim: slimNode, Weigh: weighNode},
	})
	t.Cleanup(f.stop)
	stream := func(ns []corev1.Node) *watch.FakeWatcher {
		t.Helper()
		var w *watch.FakeWatcher
		select {
		case w = <-watchers:
		case <-time.After(time.Minute):
			t.Fatal("the feed does not stream its list")
		}
		for i := range ns {
			w.Add(&ns[i])
		}
		w.Action(watch.Bookmark, &corev1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5", Annotations: map[string]string{initialEventsEnd: "true"}}})
		return w
	}
	w := stream(nodes(0, 2))
	if items, err := settled(t, f); err != nil || len(items) != 2 || f.incomplete() != "" {
		t.Fatalf("the first list: want 2 Nodes and nothing left out, got %d, %v, %q", len(items), err, f.incomplete())
	}

	// Three more: one fits.
	more := nodes(2, 5)
	for i := range more {
		w.Add(&more[i])
	}
	wait.Eventually(t.Context(), t, "the feed says what it left out", time.Minute, 20*time.Millisecond, func() (bool, error) {
		got := f.incomplete()
		return got == "more than 3 Nodes", fmt.Errorf("incomplete() = %q", got)
	})
	items, _ := f.items()
	if len(items) != 3 {
		t.Errorf("the store holds %d Nodes, want the bound of 3", len(items))
	}
	// A deletion of what was never kept is nothing to the store.
	w.Delete(&more[2])
	// Room: the feed lists again, and everything fits now.
	w.Delete(&more[0])
	stream(append(nodes(0, 2), more[1]))
	wait.Eventually(t.Context(), t, "the feed lists again and leaves nothing out", time.Minute, 20*time.Millisecond, func() (bool, error) {
		items, err := f.items()
		if err != nil || len(items) != 3 || f.incomplete() != "" {
			return false, fmt.Errorf("%d Nodes, incomplete %q: %w", len(items), f.incomplete(), err)
		}
		return true, nil
	})
	if streams.Load() != 2 {
		t.Errorf("the feed streamed its list %d times, want 2", streams.Load())
	}
}

// TestGuardBytes admits Nodes by the memory they take: one that grows
// past the bound is dropped from the store, and reported.
func TestGuardBytes(t *testing.T) {
	small := nodes(0, 2)
	g := newGuard("Nodes", Limits{Items: 10, Bytes: 2*weighNode(slimNode(&small[0])) + 10, Slim: slimNode, Weigh: weighNode}, func() {})
	type step struct {
		node *corev1.Node
		want admission
	}
	grown := small[1].DeepCopy()
	grown.Annotations = map[string]string{"kilo.squat.ai/discovered-endpoints": strings.Repeat("x", 1000)}
	for i, s := range []step{
		{node: &small[0], want: admitted},
		{node: &small[1], want: admitted},
		{node: grown, want: evicted},
		{node: &small[1], want: admitted},
	} {
		if got := g.admit(slimNode(s.node), false); got != s.want {
			t.Errorf("step %d: admit(%s) = %d, want %d", i, s.node.Name, got, s.want)
		}
	}
	if got, want := g.incomplete(), "more than 0 MiB of Nodes"; got != want {
		t.Errorf("incomplete() = %q, want %q", got, want)
	}
}

func TestLimitBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		line, _ := strconv.Atoi(r.URL.Query().Get("line"))
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		chunk := make([]byte, 32<<10)
		for i := range chunk {
			chunk[i] = 'x'
			if line > 0 && (i+1)%line == 0 {
				chunk[i] = '\n'
			}
		}
		for n > 0 {
			k, err := w.Write(chunk[:min(n, len(chunk))])
			if err != nil {
				return
			}
			n -= k
		}
	}))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: limitBodies(http.DefaultTransport)}
	cases := map[string]struct {
		reason string
		query  string
		want   string
	}{
		"AtTheBound": {
			reason: "A response of exactly MaxResponseBytes is read whole.",
			query:  fmt.Sprintf("bytes=%d", MaxResponseBytes),
		},
		"PastTheBound": {
			reason: "A response one byte larger fails, naming the bound.",
			query:  fmt.Sprintf("bytes=%d", MaxResponseBytes+1),
			want:   fmt.Sprintf(errFmtResponseTooLarge, MaxResponseBytes>>20),
		},
		"WatchOfManyEvents": {
			reason: "A watch may run on for ever, as long as each of its events is bounded.",
			query:  fmt.Sprintf("watch=true&type=application/json&line=1000&bytes=%d", 2*MaxResponseBytes),
		},
		"WatchEventTooLarge": {
			reason: "A JSON watch event larger than MaxEventBytes fails the watch, naming the bound.",
			query:  fmt.Sprintf("watch=1&type=application/json&bytes=%d", MaxEventBytes+1),
			want:   fmt.Sprintf(errFmtEventTooLarge, MaxEventBytes>>20),
		},
		"ProtobufWatch": {
			reason: "A protobuf watch is left to client-go, which bounds its events itself.",
			query:  fmt.Sprintf("watch=true&type=application/vnd.kubernetes.protobuf%%3Bstream=watch&bytes=%d", MaxEventBytes+1),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/?"+tc.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, err = io.Copy(io.Discard, resp.Body)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("\n%s\nreading the body: got error %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestCutError(t *testing.T) {
	long := fmt.Errorf("wrapped: %w", kerrors.NewForbidden(corev1.Resource("nodes"), "", fmt.Errorf("%s", strings.Repeat("é", 1<<20))))
	got := CutError(long)
	if n := len(got.Error()); n > MaxErrorBytes || !strings.HasSuffix(got.Error(), cutMark) {
		t.Errorf("CutError: %d bytes, want at most %d ending with %q", n, MaxErrorBytes, cutMark)
	}
	if !kerrors.IsForbidden(got) {
		t.Error("CutError: a cut error must still tell what it is")
	}
	if short := errors.New("short"); CutError(short) != short { //nolint:errorlint // The very error is returned.
		t.Error("CutError: a short error is returned as it is")
	}
	if !strings.HasPrefix(got.Error(), "wrapped: ") || strings.ContainsRune(got.Error(), '\uFFFD') {
		t.Errorf("CutError: the text is cut on a character boundary: %q", got.Error()[:20])
	}
}

// TestCutErrorSanitises pins that what a member's API server says reaches
// conditions, events and logs without control characters: an ESC sequence
// in an error, short or long, or in a watch's error event, is escaped.
func TestCutErrorSanitises(t *testing.T) {
	const hostile = "\x1b[2J\x1b]0;owned\x07\u009b31m\x7f\r"
	cases := map[string]struct {
		reason string
		err    error
		long   bool
	}{
		"Short": {
			reason: "A short error that holds control characters is escaped, and still tells what it is.",
			err:    kerrors.NewForbidden(corev1.Resource("nodes"), "", errors.New(hostile)),
		},
		"Long": {
			reason: "A long error is escaped, then cut: the escapes count in the bound.",
			err:    kerrors.NewForbidden(corev1.Resource("nodes"), "", errors.New(strings.Repeat(hostile, 1<<12))),
			long:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CutError(tc.err)
			if strings.ContainsFunc(got.Error(), safetext.Control) {
				t.Errorf("\n%s\nCutError(...) = %q holds control characters", tc.reason, got.Error())
			}
			if !strings.Contains(got.Error(), `\u001b[2J`) {
				t.Errorf("\n%s\nCutError(...) = %q: want the member's text escaped, not dropped", tc.reason, got.Error())
			}
			if n := len(got.Error()); n > MaxErrorBytes || tc.long != strings.HasSuffix(got.Error(), cutMark) {
				t.Errorf("\n%s\nCutError(...): %d bytes, cut %t; want at most %d, cut %t", tc.reason, n, strings.HasSuffix(got.Error(), cutMark), MaxErrorBytes, tc.long)
			}
			if !kerrors.IsForbidden(got) {
				t.Errorf("\n%s\nCutError(...): a sanitised error must still tell what it is", tc.reason)
			}
		})
	}
	t.Run("WatchError", func(t *testing.T) {
		gw := &guardedWatch{g: newGuard("Nodes", Limits{Slim: func(o runtime.Object) runtime.Object { return o }}, func() {})}
		listing := false
		ev, _ := gw.filter(watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "too old: " + hostile}}, &listing)
		st, ok := ev.Object.(*metav1.Status)
		if !ok || strings.ContainsFunc(st.Message, safetext.Control) || !strings.Contains(st.Message, "too old: ") {
			t.Errorf("a watch's error event: want its message escaped, got %#v", ev.Object)
		}
	})
}
