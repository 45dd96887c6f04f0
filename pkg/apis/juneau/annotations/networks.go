package annotations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Field names of one entry of the networks annotation.
const (
	fieldInterface = "interface"
	fieldElasticIP = "elasticIP"
)

const networksExample = `[{"interface":"ext0","elasticIP":"gw-eip"}]`

// Limits of the networks annotation (docs/reference.md#limits): at most MaxNetworks
// extra NICs per Pod, in at most MaxNetworksBytes.
const (
	MaxNetworks      = 16
	MaxNetworksBytes = 4096
)

// networkEntry is one decoded entry; has* tell a missing field from an empty one.
type networkEntry struct {
	iface, elasticIP       string
	hasIface, hasElasticIP bool
}

// decodeNetworks reads the networks annotation: a JSON list of objects with exactly the
// fields "interface" and "elasticIP", string-valued, nothing after the list.
//
// It walks the tokens of a json.Decoder instead of decoding into a struct with
// DisallowUnknownFields, because encoding/json matches field names case-insensitively
// and lets a repeated key silently overwrite the first: "Interface" or a second
// "elasticIP" must be errors, not guesses. Structural problems stop decoding and are the
// only error returned; value problems of well-formed entries are left to the caller.
func decodeNetworks(path *field.Path, value string) ([]networkEntry, field.ErrorList) {
	if len(value) > MaxNetworksBytes {
		e := field.TooLong(path, "", MaxNetworksBytes)
		e.Detail = fmt.Sprintf("is %d bytes, may not be more than %d (a Pod has at most %d extra interfaces)", len(value), MaxNetworksBytes, MaxNetworks)
		return nil, field.ErrorList{e}
	}
	dec := json.NewDecoder(strings.NewReader(value))
	tok, err := dec.Token()
	if err != nil {
		return nil, field.ErrorList{syntaxError(path, value, err)}
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, field.ErrorList{field.Invalid(path, value,
			"must be a JSON list of objects, such as "+networksExample)}
	}
	var entries []networkEntry
	for i := 0; dec.More(); i++ {
		e, fieldErr := decodeEntry(dec, path, i, value)
		if fieldErr != nil {
			return nil, field.ErrorList{fieldErr}
		}
		entries = append(entries, e)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, field.ErrorList{syntaxError(path, value, err)}
	}
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		detail := "must hold one JSON list and nothing after it"
		if err == nil {
			detail += fmt.Sprintf(" (found %v after the list)", tok)
		}
		return nil, field.ErrorList{field.Invalid(path, value, detail)}
	}
	if len(entries) > MaxNetworks {
		return nil, field.ErrorList{field.TooMany(path, len(entries), MaxNetworks)}
	}
	return entries, nil
}

// decodeEntry reads one {"interface": ..., "elasticIP": ...} object.
// Syntax errors are reported on the whole annotation (top), whose value they concern.
func decodeEntry(dec *json.Decoder, top *field.Path, index int, whole string) (networkEntry, *field.Error) {
	var e networkEntry
	path := top.Index(index)
	tok, err := dec.Token()
	if err != nil {
		return e, syntaxError(top, whole, err)
	}
	if tok != json.Delim('{') {
		return e, field.Invalid(path, tokenValue(tok),
			`must be an object such as {"interface":"ext0","elasticIP":"gw-eip"}`)
	}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return e, syntaxError(top, whole, err)
		}
		key, _ := keyTok.(string) // the decoder only yields strings as object keys
		valTok, err := dec.Token()
		if err != nil {
			return e, syntaxError(top, whole, err)
		}
		if fe := e.set(path.Child(key), key, valTok); fe != nil {
			return e, fe
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return e, syntaxError(top, whole, err)
	}
	return e, nil
}

// set stores one field of an entry, refusing unknown, repeated and non-string fields.
func (e *networkEntry) set(path *field.Path, key string, tok json.Token) *field.Error {
	var seen *bool
	var dst *string
	switch key {
	case fieldInterface:
		seen, dst = &e.hasIface, &e.iface
	case fieldElasticIP:
		seen, dst = &e.hasElasticIP, &e.elasticIP
	default:
		detail := fmt.Sprintf("unknown field %q: an entry has only the fields %q and %q", key, fieldInterface, fieldElasticIP)
		if strings.EqualFold(key, fieldInterface) || strings.EqualFold(key, fieldElasticIP) {
			detail += " (field names are case-sensitive)"
		}
		return field.Forbidden(path, detail)
	}
	if *seen {
		return duplicate(path, tokenValue(tok), fmt.Sprintf("the field %q is given twice in this entry", key))
	}
	s, ok := tok.(string)
	if !ok {
		return field.Invalid(path, tokenValue(tok), "must be a JSON string")
	}
	*seen, *dst = true, s
	return nil
}

// tokenValue renders a token for an error message; delimiters stand for the nested
// value they open.
func tokenValue(tok json.Token) any {
	switch tok {
	case json.Delim('{'):
		return "{...}"
	case json.Delim('['):
		return "[...]"
	case nil:
		return "null"
	}
	return tok
}

func syntaxError(path *field.Path, value string, err error) *field.Error {
	reason := "unexpected end of the value"
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		reason = fmt.Sprintf("%v, at byte %d", se, se.Offset)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		reason = err.Error()
	}
	return field.Invalid(path, value, fmt.Sprintf("is not valid JSON (%s); expected a list such as %s", reason, networksExample))
}

// duplicate is field.Duplicate with an explanation.
func duplicate(path *field.Path, value any, detail string) *field.Error {
	e := field.Duplicate(path, value)
	e.Detail = detail
	return e
}
