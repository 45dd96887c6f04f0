package jsonwire

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// events decodes a watch stream's events: one the API server writes —
// {"type":"…","object":{…}} with a plain type, the two keys in either order and no
// other — by cutting out its object without parsing it, since the watch decodes that
// object next (and so parses and validates it); any other text, a decoding into
// anything but a metav1.WatchEvent, or one given defaults, with the JSON serializer.
type events struct {
	runtime.Serializer
	kind schema.GroupVersionKind // what the serializer returns for a WatchEvent
}

func newEvents(s runtime.Serializer, scheme *runtime.Scheme) (events, error) {
	kinds, _, err := scheme.ObjectKinds(&metav1.WatchEvent{})
	if err != nil {
		return events{}, fmt.Errorf("the scheme has no watch event: %w", err)
	}
	return events{Serializer: s, kind: kinds[0]}, nil
}

func (e events) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if event, ok := into.(*metav1.WatchEvent); ok && defaults == nil {
		if typ, object, ok := plainEvent(data); ok {
			event.Type = typ
			event.Object.Raw = append(event.Object.Raw[:0], object...)
			kind := e.kind
			return event, &kind, nil
		}
	}
	return e.Serializer.Decode(data, defaults, into)
}

// plainEvent reads the type and the object's text of a watch event in data, if it has
// the API server's plain form (see events).
func plainEvent(data []byte) (typ string, object []byte, ok bool) {
	i := space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", nil, false
	}
	haveType, haveObject := false, false
	// Two members: the first followed by a comma, the second by the closing brace.
	for _, after := range []byte{',', '}'} {
		key, at, ok := member(data, space(data, i+1))
		if !ok {
			return "", nil, false
		}
		i = at
		switch {
		case !haveType && string(key) == "type":
			value, end, ok := plainString(data, i)
			if !ok {
				return "", nil, false
			}
			typ, i, haveType = string(value), end, true
		case !haveObject && string(key) == "object" && i < len(data) && data[i] == '{':
			end := skipValue(data, i)
			if end < 0 {
				return "", nil, false
			}
			object, i, haveObject = data[i:end], end, true
		default:
			return "", nil, false
		}
		i = space(data, i)
		if i >= len(data) || data[i] != after {
			return "", nil, false
		}
	}
	return typ, object, space(data, i+1) == len(data)
}
