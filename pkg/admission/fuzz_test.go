package admission

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// checkWellFormed asserts what the API server relies on: a 200 carries an
// AdmissionReview response echoing the request's UID, with a Status when denied; any
// other answer is a 4xx, with an AdmissionReview when the body was JSON.
func checkWellFormed(t *testing.T, code int, review admissionv1.AdmissionReview, uid string) {
	t.Helper()
	switch {
	case code == http.StatusOK:
		r := review.Response
		if r == nil {
			t.Fatal("200 without a response")
		}
		if uid != "" && string(r.UID) != uid {
			t.Fatalf("response UID %q, want %q", r.UID, uid)
		}
		if !r.Allowed && (r.Result == nil || r.Result.Message == "" || r.Result.Code < 400) {
			t.Fatalf("denial without a proper status: %+v", r.Result)
		}
		if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
			t.Fatalf("answered with %q %q", review.APIVersion, review.Kind)
		}
	case code >= 400 && code < 500:
	default:
		t.Fatalf("HTTP %d", code)
	}
}

// FuzzReviewBody feeds arbitrary bodies to the handler.
func FuzzReviewBody(f *testing.F) {
	seeds := []any{
		request(f, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil),
		request(f, admissionv1.Update, pool("p", arp, "10.225.51.0/24", "10.225.52.0/24"), pool("p", arp, "10.225.51.0/24")),
		request(f, admissionv1.Delete, nil, network("net", arp, "a")),
		request(f, admissionv1.Create, eip("e", "net", "10.225.51.7"), nil),
		request(f, admissionv1.Create, attachment("att", "e", "web.eth0"), nil),
		request(f, admissionv1.Create, pod("web", direct("e")), nil),
		request(f, admissionv1.Create, arpAd("ad", "net", "10.225.51.7", "node-a"), nil),
		request(f, admissionv1.Create, claim("10.225.51.7", "a", ns, "e", "u"), nil),
	}
	for _, s := range seeds {
		f.Add(mustJSON(f, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: s.(*admissionv1.AdmissionRequest)}))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"juneau.loutres.me","kind":"ElasticIP"},"operation":"CREATE","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"juneau.loutres.me","kind":"ElasticIPAttachment"},"operation":"UPDATE","object":{"spec":{}},"oldObject":[]}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	fx := newFixture(f)
	fx.cached(pool("a", arp, "10.225.51.0/24"), network("net", arp, "a"), eip("e", "net", ""), nic("web", "eth0", ""), pod("web", nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{PathJuneau, PathPods} {
			code, review := post(t, fx.handler.ForPath(path), body)
			var in admissionv1.AdmissionReview
			uid := ""
			if json.Unmarshal(body, &in) == nil && in.Request != nil {
				uid = string(in.Request.UID)
			}
			checkWellFormed(t, code, review, uid)
		}
	})
}

// FuzzPodAnnotations feeds arbitrary annotation values to the Pod rules.
func FuzzPodAnnotations(f *testing.F) {
	f.Add("gw", `[{"interface":"ext0","elasticIP":"e"}]`, "true", "100", "5m")
	f.Add("e", `[{"interface":"eth0","elasticIP":"e"}]`, "false", "0", "Never")
	f.Add("", `[{"interface":"ext0"},{"interface":"ext0"}]`, "", "", "")
	f.Add("ns/e", `[{"Interface":"x"}] trailing`, "yes", "-1", "-5s")
	f.Add("e", `[{"interface":"ext0","elasticIP":"e"},{"interface":"ext1","elasticIP":"e"}]`, "true", "100000", "Follow")
	fx := newFixture(f)
	fx.cached(eip("e", "net", ""), pod("old", direct("e")), nic("old", "eth0", "e"), attachment("att", "gw", "api.eth0"))
	f.Fuzz(func(t *testing.T, elasticIP, networks, withEIP, bandwidth, release string) {
		ann := map[string]string{
			v1alpha1.AnnotationElasticIP:       elasticIP,
			v1alpha1.AnnotationNetworks:        networks,
			v1alpha1.AnnotationPodWithEIP:      withEIP,
			v1alpha1.AliasEIPBandwidth:         bandwidth,
			v1alpha1.AnnotationReleaseStrategy: release,
		}
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
			var old *corev1Pod
			if op == admissionv1.Update {
				old = pod("web", nil)
			}
			req := request(t, op, pod("web", ann), podOrNil(old))
			code, review := post(t, fx.handler.ForPath(PathPods), mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: req}))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d for a well-formed review", code)
			}
			checkWellFormed(t, code, review, string(req.UID))
			// The grammar is the reference: what it refuses, the webhook denies, naming
			// the annotation.
			if errs := annotations.ValidatePod(ann); len(errs) > 0 &&
				(review.Response.Allowed || !strings.Contains(review.Response.Result.Message, errs[0].Field)) {
				t.Fatalf("%s of a Pod the grammar refuses (%v): allowed=%v, message %q", op, errs, review.Response.Allowed, review.Response.Result)
			}
		}
	})
}
