package cniserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

// FuzzRequest sends what a peer on the socket could send — any method, path, query and
// body — to the server's handler. Nothing panics; every answer is one of the protocol's
// statuses, and every error answer is an ErrorResponse; the observer hears exactly the
// reports that decode in full and name a Pod, and hears them as sent (a report that
// reaches it encodes and decodes back to itself, an empty list being no list); a body over the bound is refused
// before it is read in full.
func FuzzRequest(f *testing.F) {
	f.Add("GET", PathInterfaces, "namespace=shop&pod=web&uid=9c0e", []byte{})
	f.Add("POST", PathPlumbed, "", []byte(`{"namespace":"shop","pod":"web","uid":"9c0e","containerID":"abc","interfaces":[{"interface":"eth0","elasticIP":"web-eip","address":"10.225.51.6/32","hostInterface":"jnu1","routes":[{"destination":"0.0.0.0/0","gateway":"169.254.1.1"}]}]}`))
	f.Add("POST", PathUnplumbed, "", []byte(`{"namespace":"shop","pod":"web","containerID":"abc","interfaces":[]}`))
	f.Add("POST", PathPlumbed, "", []byte(`{"namespace":"shop","pod":"web","extra":1}`))
	f.Add("POST", PathPlumbed, "", []byte(`{"namespace":"shop","pod":"web"}{"namespace":"x"}`))
	f.Add("DELETE", PathPlumbed, "", []byte{})
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path+query, " \r\n\x00#") {
			return // not a request line a client can send
		}
		obs := &fakeObserver{}
		src := &fakeSource{nics: map[string][]Interface{"shop/web": {{Interface: "eth0", ElasticIP: "web-eip"}}}}
		req, err := http.NewRequest(method, "http://juneau"+path+"?"+query, bytes.NewReader(body))
		if err != nil {
			return // not a URL a client can send
		}
		rec := httptest.NewRecorder()
		New(src, WithObserver(obs)).Handler().ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusOK, http.StatusNoContent:
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			// The mux's redirect to the cleaned path ("/./v1/x" → "/v1/x"): nothing served.
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
			http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusRequestEntityTooLarge:
			if rec.Header().Get("Content-Type") == "application/json" {
				var e ErrorResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
					t.Fatalf("%s %s: status %d with body %q, not an ErrorResponse", method, path, rec.Code, rec.Body.Bytes())
				}
			}
		default:
			t.Fatalf("%s %s?%s: status %d is not the protocol's", method, path, query, rec.Code)
		}

		heard := append(append([]Plumbing(nil), obs.plumbed...), obs.unplumbed...)
		if len(heard) > 1 {
			t.Fatalf("one request, %d reports heard", len(heard))
		}
		if len(heard) == 1 {
			p := heard[0]
			if p.Namespace == "" || p.Pod == "" {
				t.Fatalf("a report without a Pod reached the observer: %+v", p)
			}
			if len(body) > maxBodyBytes {
				t.Fatalf("a body of %d bytes (bound %d) reached the observer", len(body), maxBodyBytes)
			}
			if rec.Code != http.StatusNoContent {
				t.Fatalf("report heard, yet answered %d", rec.Code)
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var again Plumbing
			if err := json.Unmarshal(b, &again); err != nil || !equality.Semantic.DeepEqual(p, again) {
				t.Fatalf("the report heard does not survive a round trip: %+v → %s → %+v (%v)", p, b, again, err)
			}
		} else if rec.Code == http.StatusNoContent {
			t.Fatalf("%s %s answered 204 without the observer hearing the report", method, path)
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, r := range m {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}
