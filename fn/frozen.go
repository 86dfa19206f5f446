package main

// The answer for a mesh whose networks overlap: every composed resource
// kept as observed, the last status kept, the overlap reported.

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// freeze keeps every composed resource exactly as observed: nothing is
// created, changed or deleted while the mesh is invalid.
func freeze(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, o *observed, overlap *mesh.OverlapError) error {
	desired := make(map[string]*fnv1.Resource, len(o.resources))
	names := make([]string, 0, len(o.resources))
	for name := range o.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		desired[name] = &fnv1.Resource{Resource: intent(o.resources[name].GetResource()), Ready: ready(o.resources[name])}
	}
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	rsp.Desired.Resources = desired
	return writeFrozenStatus(rsp, req, overlap)
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
