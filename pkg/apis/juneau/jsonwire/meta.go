package jsonwire

import (
	"bytes"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Meta finds the kind and API version of a JSON object as apimachinery's
// json.SimpleMetaFactory does, without parsing the whole object: it reads the top-level
// keys and skips their values by their brackets. The API server writes a custom
// resource's apiVersion and kind first, so an object costs a few dozen bytes read
// instead of a parse of every byte; a watch event (type and object) or a list (items
// before kind) costs one scan for brackets. Anything out of the ordinary — an escape
// or a byte outside printable ASCII in a key or in the two values, a value of theirs
// that is not a string, a top level that is not an object — goes to
// json.SimpleMetaFactory, so the result is the same for every valid JSON text. Unlike
// it, Meta does not check the values it skips: the serializer's decoding, which always
// follows, rejects a text that is not valid JSON.
type Meta struct{}

var _ json.MetaFactory = Meta{}

var (
	keyAPIVersion = []byte("apiVersion")
	keyKind       = []byte("kind")
)

// Interpret returns the group, version and kind the object's apiVersion and kind say.
func (Meta) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	apiVersion, kind, ok := topLevel(data)
	if !ok {
		return json.DefaultMetaFactory.Interpret(data)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// topLevel reads the apiVersion and kind among the top-level keys of the object in
// data, matching the keys without regard to case and keeping the last of each, as
// encoding/json does; ok is false when the text is not a plain case of that (see Meta).
func topLevel(data []byte) (apiVersion, kind string, ok bool) {
	i := space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", "", false
	}
	i = space(data, i+1)
	if i < len(data) && data[i] == '}' {
		return "", "", space(data, i+1) == len(data)
	}
	for {
		key, at, ok := member(data, i)
		if !ok {
			return "", "", false
		}
		i = at
		target := (*string)(nil)
		switch {
		case bytes.EqualFold(key, keyAPIVersion):
			target = &apiVersion
		case bytes.EqualFold(key, keyKind):
			target = &kind
		}
		if target != nil {
			value, end, ok := plainString(data, i)
			if !ok {
				return "", "", false
			}
			*target, i = string(value), end
		} else if i = skipValue(data, i); i < 0 {
			return "", "", false
		}
		i = space(data, i)
		if i >= len(data) {
			return "", "", false
		}
		switch data[i] {
		case ',':
			i = space(data, i+1)
		case '}':
			return apiVersion, kind, space(data, i+1) == len(data)
		default:
			return "", "", false
		}
	}
}
