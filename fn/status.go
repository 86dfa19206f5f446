package main

import (
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

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

// maxMemberMessage is how long a member's status message grows, its
// observation and delivery problems together.
const maxMemberMessage = 1024

// reportDelivery adds the delivery problems to the members' status.
func reportDelivery(plan *mesh.Plan, problems map[string]string) {
	for i := range plan.Status.Clusters {
		c := &plan.Status.Clusters[i]
		p, ok := problems[c.Name]
		if !ok {
			continue
		}
		if c.Message != "" {
			c.Message += "; "
		}
		c.Message = safetext.Message(c.Message+p, maxMemberMessage)
	}
}

// limit cuts a condition message to a readable length, on a character
// boundary: the response must stay valid UTF-8.
func limit(s string) string {
	return safetext.Message(s, maxConditionMessageLength)
}

// tooLarge is the answer when the mesh does not fit in a response: a fatal
// result, which leaves every composed resource as it is.
func tooLarge(req *fnv1.RunFunctionRequest, ttl time.Duration, n int, hint string) *fnv1.RunFunctionResponse {
	rsp := response.To(req, ttl)
	response.Fatal(rsp, errors.Errorf(errFmtTooLarge, n>>10, maxResponseBytes>>10, hint))
	return rsp
}
