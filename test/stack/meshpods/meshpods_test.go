package meshpods

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJudge(t *testing.T) {
	hello := map[string]string{"hello-b-1": "10.2.224.4"}
	type want struct {
		pod, seen string
		err       string // a part of the error; empty for none
	}
	cases := map[string]struct {
		reason string
		answer string
		kind   Kind
		want   want
	}{
		"PodUntranslated": {
			reason: "A pod of the target that saw the probe pod's own address passes.",
			answer: "200\nhello from pod hello-b-1 (uid 65532), you are 10.1.224.9:41234\n",
			kind:   ToPod,
			want:   want{pod: "hello-b-1", seen: "10.1.224.9"},
		},
		"PodTranslated": {
			reason: "A request to a pod that arrives from another address was translated on the way (a masquerade): no proof that pod addresses are routed.",
			answer: "200\nhello from pod hello-b-1 (uid 65532), you are 10.201.0.1:41234\n",
			kind:   ToPod,
			want:   want{pod: "hello-b-1", seen: "10.201.0.1", err: "not from the probe pod 10.1.224.9"},
		},
		"ServiceMasqueraded": {
			reason: "Through a ClusterIP the other member's kube-proxy masquerades what comes from outside its clusterCIDR: the address seen does not matter.",
			answer: "200\nhello from pod hello-b-1 (uid 65532), you are 10.2.224.1:5555\n",
			kind:   ToService,
			want:   want{pod: "hello-b-1", seen: "10.2.224.1"},
		},
		"AnotherPod": {
			reason: "An answer from a pod that is no hello pod of the target (the client's own member, say) fails.",
			answer: "200\nhello from pod hello-a-1 (uid 65532), you are 10.1.224.9:41234\n",
			kind:   ToService,
			want:   want{pod: "hello-a-1", seen: "10.1.224.9", err: "no hello pod of the target"},
		},
		"ProbeError": {
			reason: "The probe's own error (the request failed inside the pod) fails, and says why.",
			answer: "Get \"http://10.2.224.4:8080/\": context deadline exceeded\n",
			kind:   ToPod,
			want:   want{err: "context deadline exceeded"},
		},
		"OtherStatus": {
			reason: "Another status than 200 fails.",
			answer: "503\nno endpoints\n",
			kind:   ToService,
			want:   want{err: "503"},
		},
		"NoHello": {
			reason: "A 200 from something that is not the hello server fails.",
			answer: "200\nprobe ok\n",
			kind:   ToPod,
			want:   want{err: `"probe ok"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, seen, err := judge(tc.answer, tc.kind, "10.1.224.9", hello)
			got := want{pod: pod, seen: seen}
			if err != nil {
				if !errors.Is(err, errAnswer) {
					t.Errorf("the error is no errAnswer: %v", err)
				}
				got.err = tc.want.err
				if tc.want.err == "" || !strings.Contains(err.Error(), tc.want.err) {
					got.err = err.Error()
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\njudge(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMatrixWrite(t *testing.T) {
	m := Matrix{Results: []Result{
		{Pair: Pair{From: "cluster-a", To: "cluster-b", Kind: ToPod}, URL: "http://10.2.224.4:8080/", Pod: "hello-b-1", Seen: "10.1.224.9"},
		{Pair: Pair{From: "cluster-a", To: "cluster-b", Kind: ToService}, URL: "http://10.101.9.24:80/", Err: errAnswer, Tries: 15},
		{Pair: Pair{From: "cluster-b", To: "cluster-a", Kind: ToPod}, URL: "http://10.1.224.8:8080/", Pod: "hello-a-1", Seen: "10.2.224.3"},
		{Pair: Pair{From: "cluster-b", To: "cluster-a", Kind: ToService}, URL: "http://10.102.54.21:80/", Pod: "hello-a-1", Seen: "10.1.224.1"},
	}}
	want := `  from \ to  cluster-a  cluster-b
  cluster-a  -          pod SVC-FAIL
  cluster-b  pod svc    -
  requests 4, passed 3
  cluster-a -> cluster-b (pod): GET http://10.2.224.4:8080/ answered by hello-b-1, which saw 10.1.224.9 (0.0s)
  FAILED cluster-a -> cluster-b (service): GET http://10.101.9.24:80/: unexpected answer (15 tries)
  cluster-b -> cluster-a (pod): GET http://10.1.224.8:8080/ answered by hello-a-1, which saw 10.2.224.3 (0.0s)
  cluster-b -> cluster-a (service): GET http://10.102.54.21:80/ answered by hello-a-1, which saw 10.1.224.1 (0.0s)
`
	if diff := cmp.Diff(want, m.String()); diff != "" {
		t.Errorf("Write: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]Pair{{From: "cluster-a", To: "cluster-b", Kind: ToService}}, m.Failed()); diff != "" {
		t.Errorf("Failed: -want, +got:\n%s", diff)
	}
}
