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

// Package servicesync reconciles ServiceSyncs: managed resources that keep
// one member of a ClusterSet in step with the others by the Multi-Cluster
// Services API.
package servicesync

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/ownership"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

const (
	errObserve     = "cannot read the shared namespaces of the member"
	errClient      = "cannot create a client for the member"
	errFmtWrite    = "cannot write %d of %d objects"
	errFmtNetworks = "%s: Invalid value: %q: not a network in CIDR form"
	errFmtApply    = "cannot apply %s %s/%s"
	errFmtDelete   = "cannot delete %s %s/%s"
	errFmtStatus   = "cannot write the conditions of ServiceExport %s/%s"

	errFmtIncomplete      = "nothing is written nor deleted while a watch leaves objects out past its bounds: %s"
	errFmtNodesIncomplete = "the member's Nodes are not known whole (%s): no endpoint is imported while an address of the member itself may be missing"
	errFmtSourceIdentity  = "%s: %s is refused as a source: the member's own config is a namespaced ProviderConfig, which may not carry the identity of provider-kilomesh, so its sources may not either"

	// ReasonFeedIncomplete: a watch left objects out, past its bounds.
	ReasonFeedIncomplete = "FeedIncomplete"

	partMember    = "member"
	partSource    = "source/"
	fieldManager  = remote.ServicesFieldManager
	workers       = 16
	writeDeadline = 20 * time.Second
)

// Setup adds a controller that reconciles ServiceSyncs.
func Setup(mgr ctrl.Manager, o controller.Options, reg *remote.Registry, usage *clients.UsageTracker, res *clients.Resolver, now func() time.Time) error {
	name := managed.ControllerName(v1alpha1.ServiceSyncKind)
	c := &connector{resolver: res, usage: usage, registry: reg, now: now, unreachable: map[string]time.Time{}}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.ServiceSync](c),
		managed.WithInitializers(),
		managed.WithFinalizer(releasing{remote.ReleasingFinalizer{
			Finalizer: resource.NewAPIFinalizer(mgr.GetClient(), managed.FinalizerName),
			Kind:      v1alpha1.ServiceSyncKind,
			Usage:     usage,
			Registry:  reg,
		}}),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))), //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		managed.WithPollInterval(o.PollInterval),
	}
	if o.MetricOptions != nil && o.MetricOptions.MRMetrics != nil {
		opts = append(opts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
	}
	r := managed.NewReconciler(mgr, resource.ManagedKind(v1alpha1.ServiceSyncGroupVersionKind), opts...)
	co := o.ForControllerRuntime()
	co.RateLimiter = remote.ControllerRateLimiter()
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(co).
		For(&v1alpha1.ServiceSync{}, builder.WithPredicates(resource.DesiredStateChanged())).
		WatchesRawSource(reg.Source(v1alpha1.ServiceSyncKind)).
		Complete(ratelimiter.NewReconciler(name, errors.WithSilentRequeueOnConflict(r), o.GlobalRateLimiter))
}

// releasing releases every cluster of a ServiceSync, not only its own.
type releasing struct{ remote.ReleasingFinalizer }

func (f releasing) RemoveFinalizer(ctx context.Context, obj resource.Object) error {
	f.Registry.ReleaseParts(v1alpha1.ServiceSyncKind, types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, nil)
	if cr, ok := obj.(*v1alpha1.ServiceSync); ok {
		if err := f.Usage.Untrack(ctx, cr, sourceRefs(cr)...); err != nil {
			return err
		}
	}
	return f.ReleasingFinalizer.RemoveFinalizer(ctx, obj)
}

// sourceRefs are the configs the sources of a ServiceSync name, as far as
// they name one.
func sourceRefs(cr *v1alpha1.ServiceSync) []clients.ConfigRef {
	out := make([]clients.ConfigRef, 0, len(cr.Spec.ForProvider.Sources))
	for _, s := range cr.Spec.ForProvider.Sources {
		if r, err := sourceRef(cr, s); err == nil {
			out = append(out, r)
		}
	}
	return out
}

func sourceRef(cr *v1alpha1.ServiceSync, s v1alpha1.ServiceSource) (clients.ConfigRef, error) {
	return clients.RefOf(asSource(cr, s))
}

// asSource is a copy of the ServiceSync that names the source's config as
// its own, as the resolver and the usage tracker read a config.
func asSource(cr *v1alpha1.ServiceSync, s v1alpha1.ServiceSource) *v1alpha1.ServiceSync {
	src := cr.DeepCopy()
	ref := s.ProviderConfigRef
	src.SetProviderConfigReference(&ref)
	return src
}

// checkSource refuses a source whose credentials the member's own config
// could not carry: the identity of provider-kilomesh, which only a
// ClusterProviderConfig may carry, for a ServiceSync whose member is a
// namespaced ProviderConfig. Whoever may write such a ServiceSync would
// otherwise read a member with the provider's own identity.
func checkSource(cr *v1alpha1.ServiceSync, i int, creds *clients.Credentials) error {
	member := cr.GetProviderConfigReference()
	if creds.Key == clients.InjectedIdentityKey && (member == nil || member.Kind != clients.KindClusterProviderConfig) {
		return errors.Errorf(errFmtSourceIdentity, field.NewPath("spec", "forProvider", "sources").Index(i).Child("providerConfigRef").String(), creds.Origin)
	}
	return nil
}

type connector struct {
	resolver *clients.Resolver
	usage    *clients.UsageTracker
	registry *remote.Registry
	now      func() time.Time

	mu sync.Mutex
	// unreachable remembers since when a source of a ServiceSync cannot be
	// read, by ServiceSync and source; the status keeps it across restarts.
	unreachable map[string]time.Time
}

// source is one source as Connect found it.
type source struct {
	spec    v1alpha1.ServiceSource
	user    remote.User
	cluster *remote.Cluster
	err     error
}

// Connect resolves the credentials of the member and of every source.
func (c *connector) Connect(ctx context.Context, cr *v1alpha1.ServiceSync) (managed.TypedExternalClient[*v1alpha1.ServiceSync], error) {
	nn := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	creds, deps, err := c.resolver.Resolve(ctx, cr)
	keep := map[string]bool{partMember: true}
	sources := make([]source, 0, len(cr.Spec.ForProvider.Sources))
	srcDeps := make([]clients.Source, 0, 2*len(cr.Spec.ForProvider.Sources))
	var refused error
	for i, s := range cr.Spec.ForProvider.Sources {
		sc, sdeps, serr := c.resolver.Resolve(ctx, asSource(cr, s))
		srcDeps = append(srcDeps, sdeps...)
		if serr == nil {
			if rerr := checkSource(cr, i, sc); rerr != nil {
				serr, refused = rerr, errors.Join(refused, rerr)
			}
		}
		out := source{spec: s, err: serr, user: remote.User{Kind: v1alpha1.ServiceSyncKind, NamespacedName: nn, Part: partSource + s.Name}}
		if serr == nil {
			keep[out.user.Part] = true
			out.cluster = c.registry.Acquire(out.user, sc)
		}
		sources = append(sources, out)
	}
	c.registry.Depend(remote.User{Kind: v1alpha1.ServiceSyncKind, NamespacedName: nn}, append(deps, srcDeps...)) //nolint:contextcheck // The watches outlive the reconcile.
	c.registry.ReleaseParts(v1alpha1.ServiceSyncKind, nn, keep)
	if err != nil {
		return nil, err
	}
	if refused != nil && !meta.WasDeleted(cr) {
		return nil, refused
	}
	if !meta.WasDeleted(cr) {
		if err := c.usage.Track(ctx, cr); err != nil {
			return nil, err
		}
		if err := c.usage.TrackOthers(ctx, cr, sourceRefs(cr)); err != nil {
			return nil, err
		}
	}
	user := remote.User{Kind: v1alpha1.ServiceSyncKind, NamespacedName: nn, Part: partMember}
	member := c.registry.Acquire(user, creds)
	kc, err := member.Client()
	if err != nil {
		return nil, errors.Wrap(err, errClient)
	}
	return &external{c: c, key: nn.String(), user: user, member: member, origin: creds.Origin, kube: kc, sources: sources}, nil
}

type external struct {
	c       *connector
	key     string
	user    remote.User
	member  *remote.Cluster
	origin  string
	kube    client.Client
	sources []source

	plan Plan
	// writes are the writes of each import of the plan, found by Observe
	// for Update: comparing thousands of imports twice a reconcile was a
	// third of the provider's CPU during endpoint churn.
	writes   [][]write
	selector map[string]string
	// manager is the mesh's field manager of the conditions of exports.
	manager string
	views   map[string]*remote.ServiceView
}

func parseNetworks(path *field.Path, nets []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(nets))
	for i, n := range nets {
		p, err := netip.ParsePrefix(n)
		if err != nil || p.Masked() != p {
			return nil, errors.Errorf(errFmtNetworks, path.Index(i).String(), n)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkNamespaces refuses a namespace that is not a DNS label, whatever
// the CRD let through: an empty one would mean every namespace to a watch.
func checkNamespaces(path *field.Path, namespaces []string) error {
	for i, ns := range namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return field.Invalid(path.Index(i), ns, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// Observe reads the member and every source, and plans.
func (e *external) Observe(ctx context.Context, cr *v1alpha1.ServiceSync) (managed.ExternalObservation, error) {
	o, err := e.observe(ctx, cr)
	return o, remote.CutError(err)
}

func (e *external) observe(ctx context.Context, cr *v1alpha1.ServiceSync) (managed.ExternalObservation, error) {
	p := cr.Spec.ForProvider
	selector, err := ownership.Selector(cr.GetNamespace(), p.Selector)
	if err != nil {
		if meta.WasDeleted(cr) {
			return managed.ExternalObservation{ResourceExists: false}, nil
		}
		return managed.ExternalObservation{}, err
	}
	e.selector = selector
	e.manager = StatusManager([2]string{cr.GetNamespace(), selector[meshv1alpha1.LabelMesh]})
	spec := field.NewPath("spec", "forProvider")
	localNets, err := parseNetworks(spec.Child("networks"), p.Networks)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	if err := checkNamespaces(spec.Child("namespaces"), p.Namespaces); err != nil {
		return managed.ExternalObservation{}, err
	}
	e.member.UseServices(e.user, p.Namespaces)
	e.views = map[string]*remote.ServiceView{}
	for _, ns := range p.Namespaces {
		v, err := e.member.ServiceObjects(ctx, ns)
		if err != nil {
			return managed.ExternalObservation{}, errors.Wrap(clients.Explain(err, e.origin), errObserve)
		}
		e.views[ns] = v
	}
	if meta.WasDeleted(cr) {
		return managed.ExternalObservation{ResourceExists: len(e.owned()) > 0}, nil
	}
	now := e.c.now()
	in := Input{
		Selector:   selector,
		Owner:      [2]string{cr.GetNamespace(), selector[meshv1alpha1.LabelMesh]},
		Manager:    e.manager,
		Namespaces: p.Namespaces,
		Family:     p.Family,
		Local:      Exporter{Name: "", ClusterID: p.ClusterID, Networks: localNets, Views: e.views},
	}
	guarded, err := e.memberAddrs(ctx)
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(clients.Explain(err, e.origin), errObserve)
	}
	in.Guarded = guarded
	in.Now = metav1.NewTime(now.Truncate(time.Second))
	in.Seen = make(map[SeenKey]metav1.Time, len(cr.Status.AtProvider.FirstSeen))
	for _, s := range cr.Status.AtProvider.FirstSeen {
		in.Seen[SeenKey{Service: s.Service, Cluster: s.Cluster}] = s.Since
	}
	var unreachable []v1alpha1.UnreachableSource
	for i, s := range e.sources {
		nets, err := parseNetworks(spec.Child("sources").Index(i).Child("networks"), s.spec.Networks)
		if err != nil {
			return managed.ExternalObservation{}, err
		}
		ex := Exporter{Name: s.spec.Name, ClusterID: s.spec.ClusterID, Networks: nets}
		views, serr := s.read(ctx, p.Namespaces)
		key := e.key + "/" + s.spec.Name
		switch {
		case serr == nil:
			ex.Views = views
			e.c.forget(key)
		case errors.Is(serr, remote.ErrPending):
			// Not read yet: what it exported stays as it is.
		default:
			since := e.c.since(key, now, cr.Status.AtProvider.Unreachable, s.spec.Name)
			unreachable = append(unreachable, v1alpha1.UnreachableSource{Name: s.spec.Name, Since: metav1.NewTime(since)})
			if w := p.WithdrawAfter; w != nil && w.Duration > 0 {
				if left := since.Add(w.Duration).Sub(now); left <= 0 {
					ex.Views = map[string]*remote.ServiceView{}
				}
			}
		}
		in.Sources = append(in.Sources, ex)
	}
	e.plan = NewPlan(in)
	if e.plan.Incomplete != "" {
		// Nothing is written nor deleted: what the watches left out would
		// pass for deleted. The counts stay as they were.
		obs := cr.Status.AtProvider
		obs.Unreachable, obs.FirstSeen = unreachable, e.plan.Seen
		cr.Status.AtProvider = obs
		cr.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
			Reason: ReasonFeedIncomplete, Message: safetext.Message(fmt.Sprintf(errFmtIncomplete, e.plan.Incomplete), 1024)})
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	setStatus(cr, e.plan, unreachable)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: e.upToDate()}, nil
}

// memberAddrs returns the addresses of the member itself, which no
// endpoint imported from a source may have, whatever networks the
// ServiceSync declares for it: its API server's and its Nodes' (internal
// and external). Until the member's Nodes are listed, or while its watch
// of them left Nodes out, nothing is written: an address left out would
// let an endpoint point the member's pods at the member itself.
func (e *external) memberAddrs(ctx context.Context) ([]netip.Addr, error) {
	var out []netip.Addr
	if a, ok := e.member.ServerAddr(); ok {
		out = append(out, a)
	}
	nodes, err := e.member.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	if bound := e.member.NodesIncomplete(); bound != "" {
		return nil, errors.Errorf(errFmtNodesIncomplete, bound)
	}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// read returns the views of a source, or why it cannot be read.
func (s source) read(ctx context.Context, namespaces []string) (map[string]*remote.ServiceView, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.cluster.UseServices(s.user, namespaces)
	out := map[string]*remote.ServiceView{}
	for _, ns := range namespaces {
		v, err := s.cluster.ServiceObjects(ctx, ns)
		if err != nil {
			return nil, err
		}
		out[ns] = v
	}
	return out, nil
}

func (c *connector) since(key string, now time.Time, recorded []v1alpha1.UnreachableSource, name string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.unreachable[key]; ok {
		return t
	}
	t := now
	for _, u := range recorded {
		if u.Name == name {
			t = u.Since.Time
		}
	}
	c.unreachable[key] = t
	return t
}

func (c *connector) forget(key string) {
	c.mu.Lock()
	delete(c.unreachable, key)
	c.mu.Unlock()
}

// owned returns every object of the member the ServiceSync owns.
func (e *external) owned() []client.Object {
	var out []client.Object
	for _, v := range e.views {
		for _, s := range v.Slices {
			if Owns(e.selector, s.Labels) {
				out = append(out, s)
			}
		}
		for _, s := range v.Services {
			if Owns(e.selector, s.Labels) && madeByKilomesh(s) && s.Spec.Selector == nil {
				out = append(out, s)
			}
		}
		for _, i := range v.Imports {
			if Owns(e.selector, i.Labels) {
				out = append(out, i)
			}
		}
	}
	return out
}

// setStatus records counts that change with exports, never with endpoints.
func setStatus(cr *v1alpha1.ServiceSync, p Plan, unreachable []v1alpha1.UnreachableSource) {
	problems := p.Problems
	if len(problems) > v1alpha1.MaxServiceProblems {
		problems = problems[:v1alpha1.MaxServiceProblems]
	}
	for i := range problems {
		problems[i].Message = safetext.Message(problems[i].Message, 512)
	}
	sort.Slice(unreachable, func(i, j int) bool { return unreachable[i].Name < unreachable[j].Name })
	cr.Status.AtProvider = v1alpha1.ServiceSyncObservation{
		Exports: p.Exported, Imports: len(p.Imports), Refused: p.Refused, Unreachable: unreachable, Problems: problems,
		FirstSeen: p.Seen,
	}
	if len(p.Problems) > 0 {
		cr.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
			Reason: "ImportProblems", Message: fmt.Sprintf("%d Services cannot be imported (see status.atProvider.problems)", len(p.Problems))})
		return
	}
	cr.SetConditions(xpv2.Available())
}

// upToDate tells whether the member holds what the plan wants, and keeps
// the writes each import needs for Update.
func (e *external) upToDate() bool {
	up := len(e.plan.DeleteImports)+len(e.plan.DeleteServices)+len(e.plan.DeleteSlices)+len(e.plan.Exports) == 0
	e.writes = make([][]write, len(e.plan.Imports))
	for i := range e.plan.Imports {
		e.writes[i] = writesOf(&e.plan.Imports[i])
		up = up && len(e.writes[i]) == 0
	}
	return up
}

// A write is one object to apply.
type write int

const (
	writeService write = iota
	writeImport
	writeImportStatus
	writeSlice
)

// writesOf says which objects of an import differ from what the member
// holds.
func writesOf(imp *Import) []write {
	var out []write
	if imp.Service != nil && (imp.HaveService == nil || !sameService(imp.Service, imp.HaveService)) {
		out = append(out, writeService)
	}
	ips := importIPs(imp)
	want := imp.Import.Spec
	want.IPs = ips
	if imp.HaveImport == nil || !equality.Semantic.DeepEqual(want, imp.HaveImport.Spec) || !labelsHeld(keptOf(imp.Import.Labels), imp.HaveImport.Labels) ||
		imp.Import.Annotations[meshv1alpha1.AnnotationExportedMetadata] != imp.HaveImport.Annotations[meshv1alpha1.AnnotationExportedMetadata] {
		out = append(out, writeImport)
	}
	if imp.HaveImport == nil || !equality.Semantic.DeepEqual(imp.Import.Status.Clusters, imp.HaveImport.Status.Clusters) {
		out = append(out, writeImportStatus)
	}
	for _, s := range imp.Slices {
		h := imp.HaveSlices[s.Name]
		if h == nil || !sameSlice(s, h) {
			out = append(out, writeSlice)
			break
		}
	}
	return out
}

// importIPs are the ClusterIPs of the Service behind an import, as far as
// the member has allocated them: one per IP family of the import, in their
// order, as MCS says.
func importIPs(imp *Import) []string {
	if imp.Service == nil || imp.HaveService == nil {
		return nil
	}
	return ipsOf(imp.HaveService.Spec, imp.Import.Spec.IPFamilies)
}

// ipsOf returns a Service's ClusterIPs, one of each family, in their
// order; none unless every family has one.
func ipsOf(spec corev1.ServiceSpec, families []corev1.IPFamily) []string {
	all := spec.ClusterIPs
	if len(all) == 0 && spec.ClusterIP != "" {
		all = []string{spec.ClusterIP}
	}
	out := make([]string, 0, len(families))
	for _, f := range families {
		for _, ip := range all {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is4() == (f == corev1.IPv4Protocol) {
				out = append(out, a.String())
				break
			}
		}
	}
	if len(out) != len(families) || len(out) == 0 {
		return nil
	}
	return out
}

// keptOf returns the labels a slim object keeps: those a comparison with
// the member's objects may read.
func keptOf(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if remote.KeepsLabel(k) {
			out[k] = v
		}
	}
	return out
}

func labelsHeld(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func sameService(want, have *corev1.Service) bool {
	if !labelsHeld(want.Labels, have.Labels) || len(want.Spec.Ports) != len(have.Spec.Ports) || have.Spec.Selector != nil {
		return false
	}
	for i, p := range want.Spec.Ports {
		h := have.Spec.Ports[i]
		if p.Name != h.Name || p.Port != h.Port || protocol(p.Protocol) != protocol(h.Protocol) {
			return false
		}
	}
	if want.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && timeoutOf(want) != timeoutOf(have) {
		return false
	}
	return want.Spec.SessionAffinity == have.Spec.SessionAffinity || (want.Spec.SessionAffinity == corev1.ServiceAffinityNone && have.Spec.SessionAffinity == "")
}

func sameSlice(want, have *discoveryv1.EndpointSlice) bool {
	return labelsHeld(want.Labels, have.Labels) && want.AddressType == have.AddressType &&
		equality.Semantic.DeepEqual(want.Endpoints, have.Endpoints) && equality.Semantic.DeepEqual(want.Ports, have.Ports)
}

// Create writes the plan; see Update.
func (e *external) Create(ctx context.Context, cr *v1alpha1.ServiceSync) (managed.ExternalCreation, error) {
	_, err := e.Update(ctx, cr)
	return managed.ExternalCreation{}, err
}

// Update writes what differs, deletes what the mesh owns and no longer
// wants, and writes the conditions of the member's exports. A write the
// member refuses is reported; the others go on.
func (e *external) Update(ctx context.Context, cr *v1alpha1.ServiceSync) (managed.ExternalUpdate, error) {
	wctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	var (
		mu       sync.Mutex
		errs     []error
		problems []v1alpha1.ServiceProblem
		total    int
	)
	fail := func(err error, imp *Import) {
		mu.Lock()
		defer mu.Unlock()
		if imp != nil && (kerrors.IsNotFound(err) || kerrors.IsInvalid(err) || kerrors.IsAlreadyExists(err) || kerrors.IsForbidden(err)) {
			reason := v1alpha1.ReasonImportInvalid
			if kerrors.IsNotFound(err) {
				reason = v1alpha1.ReasonNoNamespace
			} else if kerrors.IsAlreadyExists(err) {
				reason = v1alpha1.ReasonImportNameConflict
			}
			problems = append(problems, v1alpha1.ServiceProblem{Service: imp.Namespace + "/" + imp.Name, Reason: reason, Message: err.Error()})
			return
		}
		errs = append(errs, err)
	}
	var jobs []func()
	for i := range e.plan.Imports {
		imp := &e.plan.Imports[i]
		// Update follows the Observe that planned and compared.
		if ws := e.writes[i]; len(ws) > 0 {
			total++
			jobs = append(jobs, func() {
				if err := e.writeImport(wctx, imp, ws); err != nil {
					fail(err, imp)
				}
			})
		}
	}
	for _, st := range e.plan.Exports {
		total++
		jobs = append(jobs, func() {
			if err := e.writeExportStatus(wctx, st); err != nil && !kerrors.IsNotFound(err) {
				fail(errors.Wrapf(err, errFmtStatus, st.Namespace, st.Name), nil)
			}
		})
	}
	for _, o := range e.deletions() {
		total++
		jobs = append(jobs, func() {
			if err := e.delete(wctx, o); err != nil {
				fail(err, nil)
			}
		})
	}
	run(jobs)
	if len(problems) > 0 {
		p := e.plan
		p.Problems = append(append([]v1alpha1.ServiceProblem(nil), p.Problems...), problems...)
		sort.SliceStable(p.Problems, func(i, j int) bool { return p.Problems[i].Service < p.Problems[j].Service })
		setStatus(cr, p, cr.Status.AtProvider.Unreachable)
	}
	if len(errs) > 0 {
		return managed.ExternalUpdate{}, remote.CutError(errors.Wrapf(errors.Join(errs...), errFmtWrite, len(errs), total))
	}
	return managed.ExternalUpdate{}, nil
}

// Delete deletes every object the ServiceSync owns in the member, and
// nothing else.
func (e *external) Delete(ctx context.Context, _ *v1alpha1.ServiceSync) (managed.ExternalDelete, error) {
	wctx, cancel := context.WithTimeout(ctx, writeDeadline)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
	)
	owned := e.owned()
	held := e.heldExports()
	jobs := make([]func(), 0, len(owned)+len(held))
	for _, o := range owned {
		jobs = append(jobs, func() {
			if err := e.delete(wctx, o); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	// The mesh releases the conditions it wrote: an empty apply drops
	// them, and another mesh that reads the export may write its own.
	for _, st := range held {
		jobs = append(jobs, func() {
			if err := e.releaseExportStatus(wctx, st); err != nil && !kerrors.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, errors.Wrapf(err, errFmtStatus, st.Namespace, st.Name))
				mu.Unlock()
			}
		})
	}
	run(jobs)
	if len(errs) > 0 {
		return managed.ExternalDelete{}, remote.CutError(errors.Join(errs...))
	}
	return managed.ExternalDelete{}, nil
}

// Disconnect does nothing: the watches are shared.
func (e *external) Disconnect(_ context.Context) error { return nil }

func (e *external) deletions() []client.Object {
	out := make([]client.Object, 0, len(e.plan.DeleteSlices)+len(e.plan.DeleteServices)+len(e.plan.DeleteImports))
	for _, s := range e.plan.DeleteSlices {
		out = append(out, s)
	}
	for _, s := range e.plan.DeleteServices {
		out = append(out, s)
	}
	for _, i := range e.plan.DeleteImports {
		out = append(out, i)
	}
	return out
}

// delete deletes an object only if it is still the one the watch saw: an
// object that lost the mesh's labels meanwhile is not touched.
func (e *external) delete(ctx context.Context, o client.Object) error {
	var obj client.Object
	kind := "EndpointSlice"
	switch o.(type) {
	case *corev1.Service:
		obj, kind = &corev1.Service{}, "Service"
	case *mcsv1beta1.ServiceImport:
		obj, kind = &mcsv1beta1.ServiceImport{}, "ServiceImport"
	default:
		obj = &discoveryv1.EndpointSlice{}
	}
	obj.SetNamespace(o.GetNamespace())
	obj.SetName(o.GetName())
	uid, rv := o.GetUID(), o.GetResourceVersion()
	err := e.kube.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if kerrors.IsConflict(err) {
		if gerr := e.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
			err = gerr
		} else if Owns(e.selector, obj.GetLabels()) {
			uid, rv = obj.GetUID(), obj.GetResourceVersion()
			err = e.kube.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		} else {
			err = nil
		}
	}
	if resource.IgnoreNotFound(err) != nil {
		return errors.Wrapf(err, errFmtDelete, kind, o.GetNamespace(), o.GetName())
	}
	return nil
}

// writeImport writes the Service behind an import first, since its
// ClusterIP is the import's IP, then the import and its EndpointSlices. A
// new object is created, never applied, so that one someone else made
// meanwhile is not taken over.
func (e *external) writeImport(ctx context.Context, imp *Import, ws []write) error {
	has := func(w write) bool {
		for _, x := range ws {
			if x == w {
				return true
			}
		}
		return false
	}
	ips := importIPs(imp)
	if has(writeService) {
		svc, err := e.putService(ctx, imp)
		if err != nil {
			return err
		}
		ips = ipsOf(svc.Spec, imp.Import.Spec.IPFamilies)
	}
	if imp.Service != nil && len(ips) == 0 {
		return errors.Errorf("the Service %s/%s behind the import has no ClusterIP yet", imp.Namespace, imp.Service.Name)
	}
	if has(writeImport) || has(writeImportStatus) || imp.HaveImport == nil || !equality.Semantic.DeepEqual(ips, imp.HaveImport.Spec.IPs) {
		want := imp.Import.DeepCopy()
		want.Spec.IPs = ips
		if err := e.putImport(ctx, imp, want); err != nil {
			return err
		}
	}
	for _, s := range imp.Slices {
		h := imp.HaveSlices[s.Name]
		if h != nil && sameSlice(s, h) {
			continue
		}
		if err := e.put(ctx, s, h == nil, "EndpointSlice"); err != nil {
			return err
		}
	}
	return nil
}

func (e *external) putService(ctx context.Context, imp *Import) (*corev1.Service, error) {
	want := imp.Service.DeepCopy()
	if imp.HaveService == nil {
		if err := e.kube.Create(ctx, want, client.FieldOwner(fieldManager)); err != nil {
			return nil, errors.Wrapf(err, errFmtApply, "Service", want.Namespace, want.Name)
		}
		return want, nil
	}
	if err := e.apply(ctx, want); err != nil {
		return nil, errors.Wrapf(err, errFmtApply, "Service", want.Namespace, want.Name)
	}
	got := &corev1.Service{}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return nil, errors.Wrapf(err, errFmtApply, "Service", want.Namespace, want.Name)
	}
	return got, nil
}

func (e *external) putImport(ctx context.Context, imp *Import, want *mcsv1beta1.ServiceImport) error {
	status := want.Status
	if imp.HaveImport == nil {
		c := want.DeepCopy()
		c.Status = mcsv1beta1.ServiceImportStatus{}
		if err := e.kube.Create(ctx, c, client.FieldOwner(fieldManager)); err != nil {
			return errors.Wrapf(err, errFmtApply, "ServiceImport", want.Namespace, want.Name)
		}
	} else if err := e.apply(ctx, want); err != nil {
		return errors.Wrapf(err, errFmtApply, "ServiceImport", want.Namespace, want.Name)
	} else if want.Annotations[meshv1alpha1.AnnotationExportedMetadata] != imp.HaveImport.Annotations[meshv1alpha1.AnnotationExportedMetadata] {
		if err := e.dropCarried(ctx, want); err != nil {
			return errors.Wrapf(err, errFmtApply, "ServiceImport", want.Namespace, want.Name)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(mcsv1beta1.SchemeGroupVersion.String())
	u.SetKind("ServiceImport")
	u.SetNamespace(want.Namespace)
	u.SetName(want.Name)
	clusters := make([]any, 0, len(status.Clusters))
	for _, c := range status.Clusters {
		clusters = append(clusters, map[string]any{"cluster": c.Cluster})
	}
	u.Object["status"] = map[string]any{"clusters": clusters}
	if err := e.kube.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return errors.Wrapf(err, errFmtApply, "ServiceImport status", want.Namespace, want.Name)
	}
	return nil
}

// dropCarried removes from an import the labels and annotations kilomesh
// carried there and no longer carries: the export no longer exports them.
// An apply alone would leave them, as the import was created, not applied,
// with them; a label someone else set is never removed.
func (e *external) dropCarried(ctx context.Context, want *mcsv1beta1.ServiceImport) error {
	got := &mcsv1beta1.ServiceImport{}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return err
	}
	if !Owns(e.selector, got.Labels) {
		return nil
	}
	labels, annotations := carriedKeys(got.ManagedFields)
	meta := map[string]any{"resourceVersion": got.ResourceVersion}
	for _, m := range []struct {
		name       string
		owned      []string
		have, keep map[string]string
	}{{"labels", labels, got.Labels, want.Labels}, {"annotations", annotations, got.Annotations, want.Annotations}} {
		drop := map[string]any{}
		for _, k := range m.owned {
			if _, ok := m.keep[k]; !ok {
				if _, ok := m.have[k]; ok {
					drop[k] = nil
				}
			}
		}
		if len(drop) > 0 {
			meta[m.name] = drop
		}
	}
	if len(meta) == 1 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	return e.kube.Patch(ctx, got, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager))
}

// carriedKeys returns the label and annotation keys that kilomesh's field
// manager holds, by its managed fields.
func carriedKeys(managed []metav1.ManagedFieldsEntry) (labels, annotations []string) {
	for _, m := range managed {
		if m.Manager != fieldManager || m.Subresource != "" || m.FieldsV1 == nil {
			continue
		}
		var f struct {
			Meta map[string]map[string]json.RawMessage `json:"f:metadata"`
		}
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		for k := range f.Meta["f:labels"] {
			labels = append(labels, strings.TrimPrefix(k, "f:"))
		}
		for k := range f.Meta["f:annotations"] {
			annotations = append(annotations, strings.TrimPrefix(k, "f:"))
		}
	}
	return labels, annotations
}

// put creates a new object or applies an owned one.
func (e *external) put(ctx context.Context, o client.Object, create bool, kind string) error {
	var err error
	if create {
		err = e.kube.Create(ctx, o.DeepCopyObject().(client.Object), client.FieldOwner(fieldManager)) //nolint:forcetypeassert // DeepCopyObject returns the type it is given.
	} else {
		err = e.apply(ctx, o)
	}
	return errors.Wrapf(err, errFmtApply, kind, o.GetNamespace(), o.GetName())
}

// apply applies an owned object with server-side apply, taking over the
// fields it sets.
func (e *external) apply(ctx context.Context, o client.Object) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	gvk, err := e.kube.GroupVersionKindFor(o)
	if err != nil {
		return err
	}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return e.kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership)
}

// writeExportStatus writes the conditions of one of the member's exports
// with server-side apply: it owns those four conditions and no other.
func (e *external) writeExportStatus(ctx context.Context, st ExportStatus) error {
	now := metav1.NewTime(e.c.now())
	conds := make([]any, 0, len(st.Conditions))
	for _, c := range st.Conditions {
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		conds = append(conds, map[string]any{
			"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
			"observedGeneration": c.ObservedGeneration, "lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		})
	}
	return e.applyExportStatus(ctx, st, map[string]any{"status": map[string]any{"conditions": conds}})
}

// releaseExportStatus applies nothing to the status of an export with
// the mesh's field manager: the conditions it held are removed.
func (e *external) releaseExportStatus(ctx context.Context, st ExportStatus) error {
	return e.applyExportStatus(ctx, st, map[string]any{})
}

// applyExportStatus applies the object's status to the export with the
// mesh's field manager.
func (e *external) applyExportStatus(ctx context.Context, st ExportStatus, object map[string]any) error {
	u := &unstructured.Unstructured{Object: object}
	u.SetAPIVersion(mcsv1beta1.SchemeGroupVersion.String())
	u.SetKind("ServiceExport")
	u.SetNamespace(st.Namespace)
	u.SetName(st.Name)
	return e.kube.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(e.manager), client.ForceOwnership)
}

// heldExports are the member's exports whose conditions the mesh holds.
func (e *external) heldExports() []ExportStatus {
	var out []ExportStatus
	for _, v := range e.views {
		for _, x := range v.Exports {
			for _, m := range x.ManagedFields {
				if m.Subresource == "status" && m.Manager == e.manager {
					out = append(out, ExportStatus{Namespace: x.Namespace, Name: x.Name})
					break
				}
			}
		}
	}
	return out
}

// run runs the jobs, several at a time.
func run(jobs []func()) {
	next := make(chan func())
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				j()
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
}
