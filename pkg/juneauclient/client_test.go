package juneauclient

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/apiwire"
)

// apiServer answers a list and a watch of n ElasticIPs in namespace shop as the API
// server writes them: the list whole, the watch one event per line.
func apiServer(t testing.TB, n int) *httptest.Server {
	items := make([]json.RawMessage, n)
	var events bytes.Buffer
	for i := range n {
		items[i] = apiwire.Object(t, apiwire.ElasticIP(i))
		b, _ := json.Marshal(map[string]any{"type": "ADDED", "object": items[i]})
		events.Write(append(b, '\n'))
	}
	list, _ := json.Marshal(map[string]any{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "items": items,
		"kind": "ElasticIPList", "metadata": map[string]any{"resourceVersion": "200000"}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/juneau.loutres.me/v1alpha1/namespaces/shop/elasticips" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = w.Write(events.Bytes())
			return
		}
		_, _ = w.Write(list)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// read lists and watches the ElasticIPs of the server with a clientset.
func read(t *testing.T, c versioned.Interface) ([]v1alpha1.ElasticIP, []watch.Event) {
	t.Helper()
	ctx := context.Background()
	list, err := c.JuneauV1alpha1().ElasticIPs("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w, err := c.JuneauV1alpha1().ElasticIPs("shop").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	var events []watch.Event
	for e := range w.ResultChan() {
		events = append(events, e)
	}
	return list.Items, events
}

// TestDecodesAsGenerated: a list and a watch decode to the same objects through this
// clientset as through the generated one.
func TestDecodesAsGenerated(t *testing.T) {
	srv := apiServer(t, 40)
	cfg := &rest.Config{Host: srv.URL}
	mine, err := NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	generated, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	items, events := read(t, mine)
	wantItems, wantEvents := read(t, generated)
	if len(items) != 40 || len(events) != 40 {
		t.Fatalf("%d listed, %d watched; want 40 each", len(items), len(events))
	}
	if !reflect.DeepEqual(items, wantItems) {
		t.Errorf("listed ElasticIPs differ from the generated clientset's:\n%+v\n%+v", items[0], wantItems[0])
	}
	if !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("watched events differ from the generated clientset's:\n%+v\n%+v", events[0], wantEvents[0])
	}
	if got := events[5].Object.(*v1alpha1.ElasticIP); events[5].Type != watch.Added || got.Status.Address != "10.225.0.5" {
		t.Errorf("the sixth event: %s %+v", events[5].Type, got)
	}
}
