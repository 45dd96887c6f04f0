package jsonwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
	"github.com/loutres/juneau/test/apiwire"
)

var eventCases = []string{
	`{"type":"ADDED","object":{"apiVersion":"v1","kind":"A","x":"}{\""}}`,
	` {"object" : {"kind":"A"} , "type" : "DELETED" } ` + "\n",
	`{"type":"BOOKMARK","object":{}}`,
	`{"type":"ADDED","object":null}`,                // not an object: the serializer's
	`{"type":"ADDED","object":[1]}`,                 // not an object
	`{"type":"ADDED"}`,                              // no object
	`{"type":"ADDED","object":{},"extra":1}`,        // a third key
	`{"type":"ADDED","type":"DELETED","object":{}}`, // twice
	`{"Type":"ADDED","object":{}}`,                  // another case: not the type
	`{"type":"ADD\u0045D","object":{}}`,             // an escape
	`{"type":5,"object":{}}`,                        // not a string: an error
	`{"type":"ADDED","object":{}}x`, `{"type":"ADDED","object":{}`, `{"type":"ADDED","object":{}}}`,
	`{"type":"ADDED" "object":{}}`, `{"type":"ADDED",,"object":{}}`, `[]`, `null`, ``,
}

// sameEvent fails unless events decodes data as the JSON serializer does: the same
// event, or an error from both.
func sameEvent(t *testing.T, s events, data []byte) {
	t.Helper()
	plain := serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{})
	var want, got metav1.WatchEvent
	wantObj, wantKind, wantErr := plain.Decode(data, nil, &want)
	gotObj, gotKind, err := s.Decode(data, nil, &got)
	if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) ||
		(err == nil && (gotObj != &got || wantObj != &want || *gotKind != *wantKind)) {
		t.Errorf("decoding %.200q: %+v %v %v; the JSON serializer: %+v %v %v", data, got, gotKind, err, want, wantKind, wantErr)
	}
}

func newTestEvents(t testing.TB) events {
	s, err := newEvents(serjson.NewSerializerWithOptions(Meta{}, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{}), scheme.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEventsAsSerializer(t *testing.T) {
	s := newTestEvents(t)
	for _, c := range eventCases {
		sameEvent(t, s, []byte(c))
	}
	e := apiwire.Event(t, "MODIFIED", apiwire.ElasticIP(9))
	sameEvent(t, s, e)
	defaults := &schema.GroupVersionKind{Group: "example.com", Version: "v9", Kind: "Other"}
	var got, want metav1.WatchEvent
	_, gotKind, err := s.Decode(e, defaults, &got)
	_, wantKind, wantErr := s.Serializer.Decode(e, defaults, &want)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotKind, wantKind) || !reflect.DeepEqual(got, want) {
		t.Errorf("with defaults: %v %v, the JSON serializer: %v %v", gotKind, err, wantKind, wantErr)
	}
	if _, object, ok := plainEvent(e); !ok || !bytes.Equal(object, apiwire.Object(t, apiwire.ElasticIP(9))) {
		t.Errorf("an event as the API server writes it: not read plainly (%v) or another object", ok)
	}
}

// FuzzEvents: on every valid JSON text events and the JSON serializer agree.
func FuzzEvents(f *testing.F) {
	for _, c := range eventCases {
		f.Add([]byte(c))
	}
	s := newTestEvents(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			sameEvent(t, s, data)
		}
	})
}
