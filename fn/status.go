package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Conditions the function sets on a ClusterMesh, besides Crossplane's own
// Ready and Synced.
const (
	// typeNetworksOverlap is True while CIDRs of the mesh overlap; the mesh
	// is frozen meanwhile.
	typeNetworksOverlap = "NetworksOverlap"
	// typeClustersReachable is False while a member cannot be observed; the
	// mesh keeps its last known nodes meanwhile.
	typeClustersReachable = "ClustersReachable"
	// typePeersDelivered is False while Peers cannot be written into a
	// member (no Peer CRD, no permission, a Peer in the way).
	typePeersDelivered = "PeersDelivered"
	// typeConverged is False while nodes wait for Kilo (transient skips) or
	// members wait for their first observation.
	typeConverged = "Converged"

	reasonCIDROverlap         = "CIDROverlap"
	reasonNoOverlap           = "NoOverlap"
	reasonAllReachable        = "AllClustersReachable"
	reasonUnreachable         = "ClustersUnreachable"
	reasonObserving           = "Observing"
	reasonConverged           = "Converged"
	reasonDelivered           = "Delivered"
	reasonDeliveryFailed      = "DeliveryFailed"
	reasonNodesPending        = "NodesPending"
	reasonFrozen              = "MeshFrozen"
	maxConditionMessageLength = 1024
)

// lastObservedStep is how far a member's last observation may move before
// the mesh's status says so. Every observation of a member (a node added,
// a key rotated) would otherwise rewrite the mesh's status, and every
// write is a watch event of Crossplane's circuit breaker: under churn, the
// status follows within a minute, not at every change.
const lastObservedStep = time.Minute

// steadyLastObserved keeps every member's lastObserved as the observed mesh
// reports it while no member's new observation is lastObservedStep newer
// than the one reported (or new to the status): a member that changes
// rarely shows each observation exactly, and a mesh whose members change
// every few seconds moves them all together, at most once a minute.
func steadyLastObserved(xr *structpb.Struct, plan *mesh.Plan) {
	prev := map[string]time.Time{}
	for _, v := range get(xr, "status", "clusters").GetListValue().GetValues() {
		c := v.GetStructValue()
		if t, err := time.Parse(time.RFC3339, get(c, "lastObserved").GetStringValue()); err == nil {
			prev[get(c, "name").GetStringValue()] = t
		}
	}
	for _, c := range plan.Status.Clusters {
		p, ok := prev[c.Name]
		if c.LastObserved != nil && (!ok || c.LastObserved.Before(&metav1.Time{Time: p}) || c.LastObserved.Sub(p) >= lastObservedStep) {
			return // reported as observed, every member with it
		}
	}
	for i := range plan.Status.Clusters {
		c := &plan.Status.Clusters[i]
		if p, ok := prev[c.Name]; ok && c.LastObserved != nil {
			c.LastObserved = &metav1.Time{Time: p}
		}
	}
}

// setStatus merges status fields into the desired composite resource.
func setStatus(rsp *fnv1.RunFunctionResponse, status *structpb.Value) {
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Composite == nil {
		rsp.Desired.Composite = &fnv1.Resource{}
	}
	if rsp.Desired.Composite.Resource == nil {
		rsp.Desired.Composite.Resource = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if rsp.Desired.Composite.Resource.Fields == nil {
		rsp.Desired.Composite.Resource.Fields = map[string]*structpb.Value{}
	}
	rsp.Desired.Composite.Resource.Fields["status"] = status
}

// writeStatus reports a planned mesh: status, conditions and one Warning per
// problem kind per cluster. delivery names, by member, why its Peers cannot
// be written.
func writeStatus(rsp *fnv1.RunFunctionResponse, plan *mesh.Plan, delivery map[string]string) error {
	// The planner's message of a member is why it cannot be observed; the
	// delivery problems join it below.
	var unreachable, unobserved []string
	for _, c := range plan.Status.Clusters {
		switch {
		case c.UnreachableSince != nil:
			msg := c.Name + " (since " + c.UnreachableSince.UTC().Format("2006-01-02T15:04:05Z") + ")"
			if c.Message != "" {
				msg += ": " + cut(c.Message)
			}
			unreachable = append(unreachable, msg)
		case c.LastObserved == nil:
			unobserved = append(unobserved, c.Name)
		}
	}

	reportDelivery(plan, delivery)
	status, err := toValue(plan.Status)
	if err != nil {
		return errors.Wrap(err, "cannot convert the status")
	}
	setStatus(rsp, status)

	response.ConditionFalse(rsp, typeNetworksOverlap, reasonNoOverlap).TargetComposite()
	switch {
	case len(unreachable) > 0:
		response.ConditionFalse(rsp, typeClustersReachable, reasonUnreachable).
			WithMessage(limit("cannot observe " + strings.Join(unreachable, "; ") + "; Peers already written are kept")).TargetComposite()
	case len(unobserved) > 0:
		response.ConditionUnknown(rsp, typeClustersReachable, reasonObserving).
			WithMessage(limit("waiting for the first observation of " + strings.Join(unobserved, ", "))).TargetComposite()
	default:
		response.ConditionTrue(rsp, typeClustersReachable, reasonAllReachable).TargetComposite()
	}

	if len(delivery) > 0 {
		targets := make([]string, 0, len(delivery))
		for t := range delivery {
			targets = append(targets, t)
		}
		sort.Strings(targets)
		msgs := make([]string, len(targets))
		for i, t := range targets {
			msgs[i] = t + ": " + delivery[t]
		}
		response.ConditionFalse(rsp, typePeersDelivered, reasonDeliveryFailed).WithMessage(limit(strings.Join(msgs, "; "))).TargetComposite()
	} else {
		response.ConditionTrue(rsp, typePeersDelivered, reasonDelivered).TargetComposite()
	}

	if len(plan.Pending) > 0 {
		response.ConditionFalse(rsp, typeConverged, reasonNodesPending).WithMessage(limit(strings.Join(plan.Pending, "; "))).TargetComposite()
	} else {
		response.ConditionTrue(rsp, typeConverged, reasonConverged).TargetComposite()
	}

	for _, w := range plan.Warnings {
		response.Warning(rsp, errors.New(w.Message)).WithReason(w.Reason).TargetComposite()
	}
	return nil
}

// writeFrozenStatus reports a frozen mesh: the last status stays, the
// overlap is named.
func writeFrozenStatus(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, overlap *mesh.OverlapError) error {
	if st, ok := req.GetObserved().GetComposite().GetResource().GetFields()["status"]; ok && st.GetStructValue() != nil {
		kept := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for k, v := range st.GetStructValue().GetFields() {
			if k != "conditions" {
				kept.Fields[k] = v
			}
		}
		setStatus(rsp, structpb.NewStructValue(kept))
	}
	msg := limit(strings.Join(overlap.Overlaps, "; "))
	response.ConditionTrue(rsp, typeNetworksOverlap, reasonCIDROverlap).WithMessage(msg).TargetComposite()
	response.Warning(rsp, fmt.Errorf("the mesh is frozen, no Peer is changed until this is fixed: %s", msg)).WithReason(reasonFrozen).TargetComposite()
	return nil
}

// limit cuts a condition message to a readable length, on a character
// boundary: the response must stay valid UTF-8.
func limit(s string) string {
	return safetext.Message(s, maxConditionMessageLength)
}
