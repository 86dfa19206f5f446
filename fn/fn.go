package main

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// maxResponseBytes is where the function stops: Crossplane rejects a
// response above 4 MiB (gRPC's default limit, raised by neither Crossplane
// nor the SDK), and a response near it leaves no room for what the next
// reconcile adds.
const maxResponseBytes = 3 << 20

// settleTTL is the response TTL while composed resources become ready.
const settleTTL = 15 * time.Second

const (
	errDecodeMesh   = "cannot decode the ClusterMesh"
	errObserved     = "cannot read observed resources"
	errCompose      = "cannot compose resources"
	errStatus       = "cannot write the ClusterMesh status"
	errPlan         = "cannot plan the mesh"
	errFmtTooLarge  = "the mesh needs a %d KiB response, over the %d KiB this function allows (Crossplane rejects responses above 4 MiB): %s"
	hintUsePeerSet  = "set spec.delivery: PeerSet, which composes one PeerSet per member instead of one Object per Peer (it can be changed on the live mesh: the PeerSets take the Peers over and none is deleted)"
	hintSplitOrSkip = "split the mesh, or select fewer nodes with spec.clusters[].nodeSelector, or use Location granularity"
)

// Function is function-kilomesh.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log logging.Logger
	ttl time.Duration
	// maxResponse and maxPeerSet override maxResponseBytes and
	// maxPeerSetBytes; benchmarks raise them to measure meshes past the
	// limits.
	maxResponse, maxPeerSet int
	// shareAbove overrides DefaultShareAbove: the bytes of inline Peers
	// above which a mesh's PeerSets take the shared form.
	shareAbove int
	// now is the clock; time.Now when nil.
	now func() time.Time
	// metrics records every call, meshes what each mesh's last plan said;
	// nil records nothing.
	metrics *metrics
	meshes  *meshMetrics
}

// RunFunction plans the mesh of the observed ClusterMesh and composes its
// NodeInventories and Peers.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	start := time.Now()
	rsp, result, size := f.run(req)
	f.metrics.observe(result, time.Since(start), size)
	return rsp, nil
}

// run answers one call, and says how it ended and how large the planned
// response was (0 when nothing was planned).
func (f *Function) run(req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, string, int) {
	ttl := f.ttl
	if ttl == 0 {
		ttl = response.DefaultTTL
	}
	rsp := response.To(req, ttl)

	xr, err := decodeMesh(req.GetObserved().GetComposite().GetResource())
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errDecodeMesh))
		return rsp, resultInvalid, 0
	}
	log := f.log.WithValues("xr", xr.Namespace+"/"+xr.Name)
	threshold, err := shareAbove(xr, f.shareAbove)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errDecodeMesh))
		return rsp, resultInvalid, 0
	}

	others, resolved := siblings(rsp, req, xr)
	if !resolved {
		// Crossplane calls again with what is required.
		return rsp, resultWaiting, 0
	}

	obs, err := readObserved(req, xr)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errObserved))
		return rsp, resultError, 0
	}

	now := time.Now
	if f.now != nil {
		now = f.now
	}
	plan, err := mesh.Do(&mesh.Input{
		Now:          now(),
		Namespace:    xr.Namespace,
		Name:         xr.Name,
		Spec:         xr.Spec,
		Observations: obs.inventories,
		Others:       others,
		Delivered:    obs.delivered,
		PeerRefs:     true,
	})
	var invalid *mesh.InvalidSpecError
	var overlap *mesh.OverlapError
	switch {
	case errors.As(err, &invalid):
		response.Fatal(rsp, err)
		f.meshes.frozen(xr)
		return rsp, resultInvalid, 0
	case errors.As(err, &overlap):
		log.Info("Freezing the mesh: its networks overlap", "overlaps", len(overlap.Overlaps))
		f.meshes.frozen(xr)
		if err := freeze(rsp, req, obs, overlap); err != nil {
			response.Fatal(rsp, errors.Wrap(err, errCompose))
			return rsp, resultError, 0
		}
		return rsp, resultFrozen, proto.Size(rsp)
	case err != nil:
		response.Fatal(rsp, errors.Wrap(err, errPlan))
		return rsp, resultError, 0
	}

	sizes, err := compose(rsp, xr, obs, plan, f.maxPeerSet, threshold)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, errCompose))
		return rsp, resultError, 0
	}
	steadyLastObserved(req.GetObserved().GetComposite().GetResource(), plan)
	problems := deliveryProblems(xr, obs)
	for member, msg := range plan.Withheld {
		addProblem(problems, member, msg)
	}
	settle := settling(rsp, obs)
	if err := writeStatus(rsp, plan, problems); err != nil {
		response.Fatal(rsp, errors.Wrap(err, errStatus))
		return rsp, resultError, 0
	}
	limit := maxResponseBytes
	if f.maxResponse > 0 {
		limit = f.maxResponse
	}
	n := sizes.response(rsp)
	if n > limit {
		hint := hintUsePeerSet
		if xr.delivery() == deliveryPeerSet {
			hint = hintSplitOrSkip
		}
		return tooLarge(req, ttl, n, hint), resultTooLarge, n
	}
	if settle && ttl > settleTTL {
		rsp.Meta.Ttl = durationpb.New(settleTTL)
	}
	if wait := holdFirstDelivery(xr, obs, now()); wait > 0 {
		log.Debug("Waiting for every member's first report before delivering", "wait", wait)
		withhold(rsp, wait)
	}
	f.meshes.planned(xr, plan)
	log.Debug("Planned the mesh", "peers", plan.Status.PeerCount, "skipped", plan.Status.SkippedNodeCount)
	return rsp, resultPlanned, n
}
