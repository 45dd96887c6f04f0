package jsonwire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
	"github.com/loutres/juneau/test/apiwire"
)

// sameAsSimple fails unless Meta gives for data what json.SimpleMetaFactory gives: the
// same kind, or an error from both.
func sameAsSimple(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := serjson.DefaultMetaFactory.Interpret(data)
	got, err := Meta{}.Interpret(data)
	if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
		t.Errorf("Interpret(%.200q) = %v, %v; json.SimpleMetaFactory: %v, %v", data, got, err, want, wantErr)
	}
}

var metaCases = []string{
	`{"apiVersion":"juneau.loutres.me/v1alpha1","kind":"ElasticIP","metadata":{"name":"a"}}`,
	`{"kind":"ElasticIP","apiVersion":"juneau.loutres.me/v1alpha1"}`,
	` { "apiVersion" : "v1" , "kind" : "Status" } ` + "\n",
	`{"type":"ADDED","object":{"apiVersion":"juneau.loutres.me/v1alpha1","kind":"ElasticIP"}}`,
	`{"apiVersion":"juneau.loutres.me/v1alpha1","items":[{"kind":"X","apiVersion":"y/v1"}],"kind":"ElasticIPList","metadata":{}}`,
	`{"APIVERSION":"v1","Kind":"Pod"}`,                    // keys matched without regard to case
	`{"apiVersion":"v1","kind":"A","kind":"B"}`,           // the last one counts
	`{"apiVersion":"v1","kind":"A","kind":null}`,          // null leaves it
	`{"apiVersion":"v1","kind":5}`,                        // not a string: an error
	`{"apiVersion":"a/b/c","kind":"A"}`,                   // not a group version: an error
	`{"api\u0056ersion":"v1","kind":"A"}`,                 // an escaped key
	`{"apiVersion":"v1","kind":"P\u006fd"}`,               // an escaped value
	`{"apiVersion":"v1","kind":"Pöd"}`,                    // beyond ASCII
	`{"apiVersion":"v1","kind":"A","x":"\"}{]["}`,         // brackets and quotes in a string
	`{"n":-1.5e3,"t":true,"f":false,"z":null,"kind":"A"}`, // scalars skipped
	`{}`, `{ }`, `[]`, `null`, `"x"`, `5`, ``, `{`, `{"kind":"A"`, `{"kind":"A"}x`, `{"kind":"A"}}`,
	`{"kind":"A",}`, `{"kind" "A"}`, `{kind:"A"}`, `{"kind":"A" "b":1}`, `{"kind":"A","b":}`,
}

func TestMetaAsSimpleMetaFactory(t *testing.T) {
	for _, c := range metaCases {
		sameAsSimple(t, []byte(c))
	}
	e := apiwire.ElasticIP(7)
	sameAsSimple(t, apiwire.Object(t, e))
	sameAsSimple(t, apiwire.Event(t, "MODIFIED", e))
	got, err := Meta{}.Interpret(apiwire.Object(t, e))
	if err != nil || got.Group != v1alpha1.GroupName || got.Version != "v1alpha1" || got.Kind != "ElasticIP" {
		t.Errorf("an ElasticIP as the API server writes it: %v, %v", got, err)
	}
}

// FuzzMeta: on every valid JSON text Meta and json.SimpleMetaFactory agree.
func FuzzMeta(f *testing.F) {
	for _, c := range metaCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			sameAsSimple(t, data)
		}
	})
}

// TestInvalidJSONStillRejected: what Meta skips unchecked, the serializer's decoding
// rejects.
func TestInvalidJSONStillRejected(t *testing.T) {
	s := serjson.NewSerializerWithOptions(Meta{}, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{})
	good := apiwire.Object(t, apiwire.ElasticIP(1))
	if _, _, err := s.Decode(good, nil, nil); err != nil {
		t.Fatalf("decoding a valid ElasticIP: %v", err)
	}
	for _, bad := range [][]byte{
		bytes.Replace(good, []byte(`"spec":{`), []byte(`"spec":{,`), 1),
		bytes.Replace(good, []byte(`"generation":1`), []byte(`"generation":1x`), 1),
		bytes.Replace(good, []byte(`"status":{`), []byte(`"status":{"a":tru,`), 1),
	} {
		if _, err := (Meta{}).Interpret(bad); err != nil {
			t.Fatalf("the test wants a text Meta passes: %v", err)
		}
		if _, _, err := s.Decode(bad, nil, nil); err == nil {
			t.Errorf("decoding %.120q: no error", bad)
		}
	}
}

// TestMetaReadsWithoutParse: what the API server writes takes Meta's own path, not the
// full parse it falls back to.
func TestMetaReadsWithoutParse(t *testing.T) {
	e := apiwire.ElasticIP(3)
	for _, data := range [][]byte{apiwire.Object(t, e), apiwire.Event(t, "ADDED", e),
		[]byte(`{"apiVersion":"juneau.loutres.me/v1alpha1","items":[` + string(apiwire.Object(t, e)) + `],"kind":"ElasticIPList","metadata":{"resourceVersion":"5"}}`)} {
		if _, _, ok := topLevel(data); !ok {
			t.Errorf("%.100q: left to the full parse", data)
		}
	}
}
