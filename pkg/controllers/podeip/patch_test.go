package podeip

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestEIPPatch(t *testing.T) {
	web := newPod("web", nil)
	tests := []struct {
		name string
		old  *v1alpha1.ElasticIP
		edit func(*v1alpha1.ElasticIP)
		want string
	}{
		{name: "nothing changed", old: ownEIP(web, "Follow"), edit: func(*v1alpha1.ElasticIP) {},
			want: `{"metadata":{"uid":"eip-uid-web"}}`},
		{name: "mark set", old: ownEIP(web, "10m0s"), edit: func(e *v1alpha1.ElasticIP) { e.Annotations[v1alpha1.AnnotationPodGoneSince] = "2026-03-04T05:06:07Z" },
			want: `{"metadata":{"annotations":{"juneau.loutres.me/pod-gone-since":"2026-03-04T05:06:07Z"},"uid":"eip-uid-web"}}`},
		{name: "mark cleared", old: ownEIP(web, "10m0s", goneSince("x")), edit: func(e *v1alpha1.ElasticIP) { delete(e.Annotations, v1alpha1.AnnotationPodGoneSince) },
			want: `{"metadata":{"annotations":{"juneau.loutres.me/pod-gone-since":null},"uid":"eip-uid-web"}}`},
		{name: "Follow to Never: owner dropped, guarded", old: ownEIP(web, "Follow"), edit: func(e *v1alpha1.ElasticIP) {
			e.Annotations[v1alpha1.AnnotationReleaseStrategy] = "Never"
			e.OwnerReferences = nil
		}, want: `{"metadata":{"annotations":{"juneau.loutres.me/pod-eip-release-strategy":"Never"},"ownerReferences":null,"resourceVersion":"1","uid":"eip-uid-web"}}`},
		{name: "bandwidth set and label", old: userEIP("web"), edit: func(e *v1alpha1.ElasticIP) {
			e.Labels = map[string]string{v1alpha1.LabelPod: "web"}
			e.Spec.BandwidthMbps = ptr.To[int32](7)
		}, want: `{"metadata":{"labels":{"juneau.loutres.me/pod":"web"},"uid":"eip-uid-web"},"spec":{"bandwidthMbps":7}}`},
		{name: "bandwidth removed", old: ownEIP(web, "Follow", func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = ptr.To[int32](7) }),
			edit: func(e *v1alpha1.ElasticIP) { e.Spec.BandwidthMbps = nil },
			want: `{"metadata":{"uid":"eip-uid-web"},"spec":{"bandwidthMbps":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.old.DeepCopy()
			tt.edit(want)
			got, err := eipPatch(tt.old, want)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("patch = %s\nwant    %s", got, tt.want)
			}
		})
	}
	// A new owner list is sent whole.
	old := ownEIP(web, "Never")
	want := old.DeepCopy()
	want.OwnerReferences = []metav1.OwnerReference{podOwnerRef(web)}
	got, _ := eipPatch(old, want)
	var p struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(got, &p); err != nil || len(p.Metadata.OwnerReferences) != 1 || p.Metadata.OwnerReferences[0].UID != web.UID {
		t.Errorf("patch %s does not carry the Pod's reference", got)
	}
}
