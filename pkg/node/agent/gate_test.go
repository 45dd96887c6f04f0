package agent

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// TestPatchGateGuardsTheUID: the gate's patch names the UID of the Pod it was computed
// for, so a Pod of the same name made again (on another Node) is not written; the API
// server's refusal of that UID is a lost race, not a failed sync. Another refusal is an
// error.
func TestPatchGateGuardsTheUID(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "old-uid"}}
	r := Readiness{Pod: pod, Types: []string{v1alpha1.PodConditionElasticIP}, Reason: v1alpha1.ReasonNotProgrammed, Message: "waiting"}
	for _, tc := range []struct {
		name    string
		refusal error
		wantErr bool
	}{
		{"made again", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "old-uid", "field is immutable")}), false},
		{"gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web"), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", errors.New("another Node's Pod")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			var patch []byte
			kube.PrependReactor("patch", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				patch = action.(k8stesting.PatchAction).GetPatch()
				return true, nil, tc.refusal
			})
			a := &Agent{kube: kube, cfg: Config{Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
			err := a.patchGate(context.Background(), r)
			if (err != nil) != tc.wantErr {
				t.Errorf("patchGate: %v, want error %v", err, tc.wantErr)
			}
			if !bytes.Contains(patch, []byte(`"uid":"old-uid"`)) {
				t.Errorf("patch %s does not name the Pod's UID", patch)
			}
		})
	}
}
