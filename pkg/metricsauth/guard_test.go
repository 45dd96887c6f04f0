package metricsauth

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer is an API server that answers TokenReviews (token "reader" is user
// prometheus, token "nobody" is user nobody, any other token is invalid) and
// SubjectAccessReviews (prometheus may get /metrics, nobody may not), counting them.
func apiServer(t *testing.T, reviews *atomic.Int32) kubernetes.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authnv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			switch tr.Spec.Token {
			case "reader":
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "prometheus"}}
			case "nobody":
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "nobody"}}
			default:
				tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authzv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			nr := sar.Spec.NonResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "prometheus" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
}

func TestGuard(t *testing.T) {
	var reviews atomic.Int32
	g, err := New(apiServer(t, &reviews))
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := SelfSignedTLS("node-a:9091")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "juneau_up 1\n")
	})))
	srv.TLS = tlsConfig
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, token string
		code        int
		body        string
	}{
		{"/metrics", "", http.StatusUnauthorized, "bearer token"},
		{"/metrics", "stolen", http.StatusUnauthorized, "bearer token"},
		{"/metrics", "nobody", http.StatusForbidden, `user "nobody" may not get /metrics`},
		{"/other", "reader", http.StatusForbidden, `user "prometheus" may not get /other`},
		{"/metrics", "reader", http.StatusOK, "juneau_up 1"},
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with token %q: %d %q, want %d and %q", tc.path, tc.token, code, body, tc.code, tc.body)
		}
	}
	// The answers are cached: a scraper asking again costs the API server nothing.
	before := reviews.Load()
	for range 5 {
		if code, _ := get("/metrics", "reader"); code != http.StatusOK {
			t.Fatalf("GET /metrics again: %d", code)
		}
	}
	if n := reviews.Load() - before; n != 0 {
		t.Errorf("%d reviews for 5 repeated scrapes, want 0 (cached)", n)
	}
}

func TestSelfSignedTLSNames(t *testing.T) {
	cfg, err := SelfSignedTLS("10.0.0.7:9091")
	if err != nil {
		t.Fatal(err)
	}
	leaf := cfg.Certificates[0].Leaf
	if leaf == nil || leaf.VerifyHostname("10.0.0.7") != nil || leaf.VerifyHostname("localhost") != nil {
		t.Errorf("certificate %v: want it valid for 10.0.0.7 and localhost", leaf)
	}
}
