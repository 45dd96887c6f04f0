package admission

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestHandlerRejectsBadRequests(t *testing.T) {
	f := newFixture(t)
	valid := mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(),
		Request: request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil)})
	cases := []struct {
		name     string
		body     []byte
		wantCode int
		wantUID  string
		wantMsg  string
	}{
		{name: "not JSON", body: []byte("{"), wantCode: http.StatusBadRequest, wantMsg: "not an AdmissionReview"},
		{name: "no request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
			wantCode: http.StatusBadRequest, wantMsg: "no request"},
		{name: "v1beta1", body: []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u1"}}`),
			wantCode: http.StatusBadRequest, wantUID: "u1", wantMsg: "admission.k8s.io/v1"},
		{name: "no uid", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`),
			wantCode: http.StatusBadRequest, wantMsg: "no uid"},
		{name: "too large", body: append(append(valid[:len(valid)-1:len(valid)-1], []byte(`,"pad":"`)...), append(bytes.Repeat([]byte("x"), MaxRequestBytes), '"', '}')...),
			wantCode: http.StatusRequestEntityTooLarge, wantMsg: "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, review := post(t, f.handler.ForPath(PathJuneau), tc.body)
			if code != tc.wantCode {
				t.Fatalf("HTTP %d, want %d", code, tc.wantCode)
			}
			r := review.Response
			if r == nil || r.Allowed || r.Result == nil {
				t.Fatalf("want a denying AdmissionReview response, got %+v", r)
			}
			if string(r.UID) != tc.wantUID || !strings.Contains(r.Result.Message, tc.wantMsg) || r.Result.Code != int32(tc.wantCode) {
				t.Errorf("response uid=%q code=%d message=%q; want uid %q, code %d, message with %q",
					r.UID, r.Result.Code, r.Result.Message, tc.wantUID, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestHandlerHTTPRules(t *testing.T) {
	f := newFixture(t)
	h := f.handler.ForPath(PathJuneau)
	get := httptest.NewRecorder()
	h.ServeHTTP(get, httptest.NewRequest(http.MethodGet, PathJuneau, nil))
	if get.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: HTTP %d, want 405", get.Code)
	}
	text := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, PathJuneau, strings.NewReader("x"))
	r.Header.Set("Content-Type", "text/plain")
	h.ServeHTTP(text, r)
	if text.Code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: HTTP %d, want 415", text.Code)
	}
}

func TestHandlerDecisions(t *testing.T) {
	review := func(f *fixture, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		t.Helper()
		code, r := post(t, f.handler.ForPath(path), mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: req}))
		if code != http.StatusOK || r.Response == nil || r.Response.UID != req.UID {
			t.Fatalf("HTTP %d, response %+v, want 200 echoing uid %q", code, r.Response, req.UID)
		}
		return r.Response
	}
	t.Run("status subresource is not checked", func(t *testing.T) {
		f := newFixture(t)
		req := request(t, admissionv1.Update, eip("e", "other", ""), eip("e", "net", ""))
		req.SubResource = "status"
		allowed().check(t, review(f, PathJuneau, req))
	})
	t.Run("a Pod sent to the juneau path", func(t *testing.T) {
		f := newFixture(t)
		resp := review(f, PathJuneau, request(t, admissionv1.Create, pod("web", nil), nil))
		if resp.Allowed || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, "webhook configuration") {
			t.Errorf("got %+v, want a 400 denial naming the configuration", resp.Result)
		}
	})
	t.Run("a juneau kind sent to the Pod path", func(t *testing.T) {
		f := newFixture(t)
		resp := review(f, PathPods, request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil))
		if resp.Allowed {
			t.Error("allowed, want denied")
		}
	})
	t.Run("caches not synced", func(t *testing.T) {
		f := newFixture(t)
		f.handler = NewHandler(f.v, func() bool { return false })
		resp := review(f, PathJuneau, request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil))
		if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable {
			t.Errorf("got %+v, want 503", resp.Result)
		}
	})
	t.Run("undecodable object", func(t *testing.T) {
		f := newFixture(t)
		req := request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil)
		req.Object = runtime.RawExtension{Raw: []byte(`{"spec":{"addresses":"not a list"}}`)}
		resp := review(f, PathJuneau, req)
		if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("got %+v, want 400", resp.Result)
		}
	})
	t.Run("DELETE without oldObject still checks by name", func(t *testing.T) {
		f := newFixture(t)
		f.cached(attachment("att", "e", "web.eth0"))
		req := request(t, admissionv1.Delete, nil, eip("e", "net", ""))
		req.OldObject = runtime.RawExtension{}
		forbidden(`ElasticIPAttachment "att"`).check(t, review(f, PathJuneau, req))
	})
	t.Run("unknown kinds of our group pass", func(t *testing.T) {
		f := newFixture(t)
		req := request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil)
		req.Kind.Kind = "FutureKind"
		allowed().check(t, review(f, PathJuneau, req))
	})
}

// TestReviewBudget: a review ends before the API server stops waiting for it.
func TestReviewBudget(t *testing.T) {
	for query, want := range map[string]time.Duration{
		"?timeout=2s":   1800 * time.Millisecond,
		"?timeout=1s":   900 * time.Millisecond,
		"?timeout=10s":  reviewTimeout,
		"?timeout=0s":   reviewTimeout,
		"?timeout=fast": reviewTimeout,
		"":              reviewTimeout,
	} {
		r := httptest.NewRequest(http.MethodPost, PathJuneau+query, nil)
		if got := reviewBudget(r); got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
}
