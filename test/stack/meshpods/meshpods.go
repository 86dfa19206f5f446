// Package meshpods runs real pods on the real nodes of the local stack's
// members (STACK_REAL_NODES=1, test/stack/node.sh) and checks, with
// ordinary HTTP requests from a client pod in every member, that they reach
// the other members across a mesh: a pod by its address, and a Service by
// Kilo's multi-cluster Services recipe (Kilo's docs/multi-cluster-services):
// in the client's member a Service without a selector, whose Endpoints name
// the other member's ClusterIP, which the other member's anchor Peer routes
// through WireGuard to a node whose kube-proxy serves it.
//
// Every member gets, in namespace Namespace: Deployment and Service hello
// (stack.local/hello:v1, one replica, port 80 to 8080), pod probe
// (stack.local/probe:v1, whose /get makes the request from inside the pod),
// and for every other member M a Service hello-M with its Endpoints. The
// requests reach the probe pods from the machine, through the route to
// every real node's pod CIDR that node.sh gives the host.
package meshpods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// Namespace holds the pods and Services of the check in every member.
const Namespace = "mesh-pods"

// waitTimeout bounds a wait for the pods or an EndpointSlice, for a node
// that hangs; the caller's context may end it sooner.
const waitTimeout = 5 * time.Minute

const (
	helloPort = 8080
	probePort = 8080
	// servicePort is the port of hello's Service and of its mirrors.
	servicePort = 80
)

// A Kind is what a request is addressed to.
type Kind string

// The kinds of requests.
const (
	// ToPod asks the other member's hello pod at its pod IP.
	ToPod Kind = "pod"
	// ToService asks the mirror of the other member's hello Service in the
	// client's member, at the mirror's ClusterIP.
	ToService Kind = "service"
)

// A member is what Deploy found in one member.
type member struct {
	client    client.Client
	probe     string            // the probe pod's IP
	hello     map[string]string // hello pods' IPs, by name
	clusterIP string            // hello's ClusterIP
	mirrors   map[string]string // ClusterIP of hello-<other>, by other
}

// Pods are the pods and Services of the check, as Deploy left them.
type Pods struct {
	members map[string]*member
	names   []string
	// HTTP asks the probe pods; http.DefaultClient when nil.
	HTTP *http.Client
}

// Deploy writes the check's objects into every member of clients and
// waits until the pods are ready (at most as long as ctx lets it). It
// needs no mesh: the pods can be running before the mesh is applied.
func Deploy(ctx context.Context, clients map[string]client.Client) (*Pods, error) {
	p := &Pods{members: map[string]*member{}}
	for name, c := range clients {
		p.names = append(p.names, name)
		p.members[name] = &member{client: c, hello: map[string]string{}, mirrors: map[string]string{}}
	}
	sort.Strings(p.names)
	for _, name := range p.names {
		if err := create(ctx, p.members[name].client, workload()...); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, name := range p.names {
		if err := p.members[name].ready(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, name := range p.names {
		for _, other := range p.names {
			if other == name {
				continue
			}
			if err := p.mirror(ctx, name, other); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return p, nil
}

// HelloPods are the names of the hello pods of a member that have an
// address and are not being deleted: those an answer may come from.
func HelloPods(ctx context.Context, c client.Client) ([]string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(Namespace), client.MatchingLabels{"app": "hello"}); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hello pod in %s", Namespace)
	}
	return out, nil
}

// Delete removes the check's namespace from every member of clients.
func Delete(ctx context.Context, clients map[string]client.Client) error {
	var errs []error
	for name, c := range clients {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
		if err := client.IgnoreNotFound(c.Delete(ctx, ns)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// workload is what every member runs: the hello Deployment and Service and
// the client pod.
func workload() []client.Object {
	labels := map[string]string{"app": "hello"}
	// Both images run as 65532, with nothing to write and no privilege.
	pod := corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)}
	ctr := func(name, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:            name,
			Image:           image,
			ImagePullPolicy: corev1.PullNever,
			Ports:           []corev1.ContainerPort{{ContainerPort: port}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(port)}},
				PeriodSeconds: 2,
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: Namespace, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{SecurityContext: &pod, Containers: []corev1.Container{ctr("hello", "stack.local/hello:v1", helloPort)}},
				},
			},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: Namespace},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Port: servicePort, TargetPort: intstr.FromInt32(helloPort)}},
			},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: Namespace, Labels: map[string]string{"app": "probe"}},
			Spec:       corev1.PodSpec{SecurityContext: &pod, Containers: []corev1.Container{ctr("probe", "stack.local/probe:v1", probePort)}},
		},
	}
}

// create creates objects, leaving those that exist as they are.
func create(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !kerrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// ready waits until the member's probe pod and hello pod are ready, and
// reads their addresses and hello's ClusterIP.
func (m *member) ready(ctx context.Context) error {
	return wait.Poll(ctx, "the pods of namespace "+Namespace+" ready", waitTimeout, 500*time.Millisecond, func() (bool, error) {
		why, err := m.read(ctx)
		if err != nil {
			return false, err
		}
		return why == "", errors.New(why)
	})
}

// read reads the member's pods and says why they are not ready yet, or
// nothing.
func (m *member) read(ctx context.Context) (string, error) {
	pods := &corev1.PodList{}
	if err := m.client.List(ctx, pods, client.InNamespace(Namespace)); err != nil {
		return "", err
	}
	m.probe, m.hello = "", map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || !isReady(p) {
			continue
		}
		switch p.Labels["app"] {
		case "probe":
			m.probe = p.Status.PodIP
		case "hello":
			m.hello[p.Name] = p.Status.PodIP
		}
	}
	svc := &corev1.Service{}
	if err := m.client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "hello"}, svc); err != nil {
		return "", err
	}
	m.clusterIP = svc.Spec.ClusterIP
	switch {
	case m.probe == "":
		return "pod probe is not ready", nil
	case len(m.hello) == 0:
		return "no pod of Deployment hello is ready", nil
	case m.clusterIP == "":
		return "Service hello has no ClusterIP", nil
	}
	return "", nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.Status.PodIP != ""
		}
	}
	return false
}

// mirror writes Kilo's recipe into member name for member other: Service
// hello-<other> without a selector, and its Endpoints naming other's hello
// ClusterIP (the controller-manager mirrors them into an EndpointSlice,
// which kube-proxy reads). It waits for the EndpointSlice.
func (p *Pods) mirror(ctx context.Context, name, other string) error {
	m, target := p.members[name], p.members[other].clusterIP
	svcName := "hello-" + other
	if err := create(ctx, m.client, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: Namespace},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: servicePort}}},
	}); err != nil {
		return err
	}
	want := recipeEndpoints(svcName, target)
	err := m.client.Create(ctx, want)
	if kerrors.IsAlreadyExists(err) {
		got := want.DeepCopy()
		if err = m.client.Get(ctx, client.ObjectKeyFromObject(want), got); err == nil {
			got.Subsets = want.Subsets
			err = m.client.Update(ctx, got)
		}
	}
	if err != nil {
		return fmt.Errorf("cannot write Endpoints %s: %w", svcName, err)
	}
	svc := &corev1.Service{}
	if err := m.client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: svcName}, svc); err != nil {
		return err
	}
	m.mirrors[other] = svc.Spec.ClusterIP
	return wait.Poll(ctx, fmt.Sprintf("the Endpoints of %s (%s) mirrored into an EndpointSlice", svcName, target), waitTimeout, 250*time.Millisecond, func() (bool, error) {
		list := &discoveryv1.EndpointSliceList{}
		if err := m.client.List(ctx, list, client.InNamespace(Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svcName}); err != nil {
			return false, err
		}
		return mirrored(list.Items, target), nil
	})
}

// recipeEndpoints are the Endpoints of Kilo's recipe: the other member's
// ClusterIP, port 80. Kilo's docs write Endpoints, as users of older
// clusters do; the controller-manager mirrors them into the EndpointSlice
// that kube-proxy reads.
//
//nolint:staticcheck // SA1019: the recipe's Endpoints, on purpose
func recipeEndpoints(name, clusterIP string) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: clusterIP}},
			Ports:     []corev1.EndpointPort{{Port: servicePort}},
		}},
	}
}

// mirrored tells whether an EndpointSlice names address.
func mirrored(items []discoveryv1.EndpointSlice, address string) bool {
	for _, s := range items {
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, address) {
				return true
			}
		}
	}
	return false
}

// A Pair is one request: from the probe pod of member From to member To.
type Pair struct {
	From, To string
	Kind     Kind
}

func (p Pair) String() string { return p.From + " -> " + p.To + " (" + string(p.Kind) + ")" }

// Pairs are every ordered pair of members, a request of each kind.
func (p *Pods) Pairs() []Pair {
	var out []Pair
	for _, from := range p.names {
		for _, to := range p.names {
			if from != to {
				out = append(out, Pair{From: from, To: to, Kind: ToPod}, Pair{From: from, To: to, Kind: ToService})
			}
		}
	}
	return out
}

// A Result is the outcome of one Pair.
type Result struct {
	Pair
	// URL is what the probe pod asked for.
	URL string
	// Pod is the hello pod that answered, Seen the address it saw the
	// request come from.
	Pod, Seen string
	// Err says why the pair failed; nil when it passed.
	Err error
	// Tries is how many requests it took, Took how long until the one that
	// passed came back.
	Tries int
	Took  time.Duration
}

// Probing is how hard a pair tries.
type Probing struct {
	// Tries is how many requests a pair makes at most, Wait the pause
	// after a failed one. Each request takes at most the probe's own
	// timeout (5 s) and a little more.
	Tries int
	Wait  time.Duration
	// Stagger delays the requests towards members whose names sort first:
	// two WireGuard peers that start a handshake with each other at the
	// same moment can both drop the other's answer and try again together
	// 5 s later (test/dataplane's Run staggers its probes alike).
	Stagger time.Duration
}

// DefaultProbing tries for about a minute and a half on a mesh that does
// not route: the tunnels of a member that was just configured take a few
// seconds, and kube-proxy takes its time to see a new EndpointSlice.
var DefaultProbing = Probing{Tries: 15, Wait: time.Second, Stagger: time.Second}

// errAnswer is a request that got an answer, but not the one wanted.
var errAnswer = errors.New("unexpected answer")

// Run asks every pair, all at once, and returns the results in the order of
// pairs.
func (p *Pods) Run(ctx context.Context, pairs []Pair, pr Probing) Matrix {
	out := make([]Result, len(pairs))
	var wg sync.WaitGroup
	for i, pair := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pair.From > pair.To {
				select {
				case <-time.After(pr.Stagger):
				case <-ctx.Done():
				}
			}
			out[i] = p.run(ctx, pair, pr)
		}()
	}
	wg.Wait()
	return Matrix{Results: out}
}

func (p *Pods) run(ctx context.Context, pair Pair, pr Probing) Result {
	r := Result{Pair: pair}
	from, to := p.members[pair.From], p.members[pair.To]
	if from == nil || to == nil {
		r.Err = fmt.Errorf("no pods in %s or %s", pair.From, pair.To)
		return r
	}
	switch pair.Kind {
	case ToPod:
		var ip string
		for _, v := range to.hello {
			ip = v
		}
		r.URL = "http://" + net.JoinHostPort(ip, strconv.Itoa(helloPort)) + "/"
	case ToService:
		r.URL = "http://" + net.JoinHostPort(from.mirrors[pair.To], strconv.Itoa(servicePort)) + "/"
	}
	start := time.Now()
	for r.Tries = 1; ; r.Tries++ {
		r.Err = p.ask(ctx, from, to, pair.Kind, &r)
		if r.Err == nil {
			r.Took = time.Since(start)
			return r
		}
		if r.Tries >= pr.Tries {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(pr.Wait):
		}
	}
}

// ask makes one request through the probe pod of from, and checks that a
// hello pod of to answered it; to a pod, also that it saw the probe pod's
// own address (nothing on the way translated it).
func (p *Pods) ask(ctx context.Context, from, to *member, kind Kind, r *Result) error {
	hc := p.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := "http://" + net.JoinHostPort(from.probe, strconv.Itoa(probePort)) + "/get?url=" + url.QueryEscape(r.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the probe pod: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	r.Pod, r.Seen, err = judge(string(b), kind, from.probe, to.hello)
	return err
}

// Ask asks the probe pod of member from for path, one of its handlers with
// its query (/get?url=..., /dns?name=...), and returns the answer as the
// probe gives it: "<status>\n<body>" for /get, the addresses for /dns.
func (p *Pods) Ask(ctx context.Context, from, path string) (string, error) {
	m := p.members[from]
	if m == nil || m.probe == "" {
		return "", fmt.Errorf("no probe pod in %s", from)
	}
	hc := p.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(m.probe, strconv.Itoa(probePort))+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot reach the probe pod of %s: %w", from, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("the probe pod of %s answered %d: %s", from, resp.StatusCode, firstLine(strings.TrimSpace(string(b))))
	}
	return string(b), nil
}

// judge reads the probe's answer ("<status>\n<body>", or its own error):
// the hello pod that answered and the address it saw the request come
// from. It fails unless a hello pod of the target (hello, by name)
// answered, and, for a request to a pod, unless that pod saw the probe pod's
// own address: nothing on the way translated it.
func judge(answer string, kind Kind, probe string, hello map[string]string) (pod, seen string, err error) {
	text := strings.TrimSpace(answer)
	status, body, _ := strings.Cut(text, "\n")
	if status != "200" {
		// The probe's own error (the request failed inside the pod), or
		// the status it got.
		return "", "", fmt.Errorf("%w: %s", errAnswer, firstLine(text))
	}
	// "hello from pod NAME (uid N), you are HOST:PORT"
	rest, ok := strings.CutPrefix(body, "hello from pod ")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", errAnswer, firstLine(body))
	}
	pod, _, _ = strings.Cut(rest, " ")
	if _, addr, ok := strings.Cut(rest, "you are "); ok {
		seen = addr
		if host, _, err := net.SplitHostPort(addr); err == nil {
			seen = host
		}
	}
	if _, ok := hello[pod]; !ok {
		return pod, seen, fmt.Errorf("%w: answered by pod %s, which is no hello pod of the target", errAnswer, pod)
	}
	if kind == ToPod && seen != probe {
		return pod, seen, fmt.Errorf("%w: the hello pod saw the request come from %s, not from the probe pod %s", errAnswer, seen, probe)
	}
	return pod, seen, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// A Matrix is the outcome of a set of pairs.
type Matrix struct {
	Results []Result
}

// Failed are the pairs that failed.
func (m Matrix) Failed() []Pair {
	var out []Pair
	for _, r := range m.Results {
		if r.Err != nil {
			out = append(out, r.Pair)
		}
	}
	return out
}

// Write prints one row per client member, one column per target member,
// each cell the kinds of requests that passed ("pod svc") or failed (in
// capitals); then every result.
func (m Matrix) Write(w io.Writer) {
	cells := map[[2]string][]string{}
	var names []string
	for _, r := range m.Results {
		for _, n := range []string{r.From, r.To} {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		word := "pod"
		if r.Kind == ToService {
			word = "svc"
		}
		if r.Err != nil {
			word = strings.ToUpper(word) + "-FAIL"
		}
		k := [2]string{r.From, r.To}
		cells[k] = append(cells[k], word)
	}
	sort.Strings(names)
	rows := make([][]string, 0, 1+len(names))
	rows = append(rows, append([]string{"from \\ to"}, names...))
	for _, from := range names {
		row := []string{from}
		for _, to := range names {
			if from == to {
				row = append(row, "-")
			} else {
				row = append(row, strings.Join(cells[[2]string{from, to}], " "))
			}
		}
		rows = append(rows, row)
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			fmt.Fprintf(&b, "%-*s  ", width[i], c)
		}
		fmt.Fprintln(w, "  "+strings.TrimRight(b.String(), " "))
	}
	fmt.Fprintf(w, "  requests %d, passed %d\n", len(m.Results), len(m.Results)-len(m.Failed()))
	for _, r := range m.Results {
		if r.Err != nil {
			fmt.Fprintf(w, "  FAILED %s: GET %s: %v (%d tries)\n", r.Pair, r.URL, r.Err, r.Tries)
			continue
		}
		fmt.Fprintf(w, "  %s: GET %s answered by %s, which saw %s (%.1fs)\n", r.Pair, r.URL, r.Pod, r.Seen, r.Took.Seconds())
	}
}

// String is Write's text.
func (m Matrix) String() string {
	var b strings.Builder
	m.Write(&b)
	return b.String()
}
