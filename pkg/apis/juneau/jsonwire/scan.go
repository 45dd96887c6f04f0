// Package jsonwire decodes the JSON the API server sends for juneau's kinds with fewer
// passes over each object than apimachinery's defaults: the kind and API version are
// found by reading an object's top-level keys instead of parsing it whole (Meta), and
// a watch stream is cut into events by matching brackets and quotes instead of parsing
// each event (Framer). What is decoded does not change: the JSON serializer still
// parses, and so validates, every object once (Serializer;
// docs/performance.md#decoding-with-fewer-passes).
package jsonwire

import "bytes"

// scanner finds where a JSON object, array or string ends, by its brackets and quotes
// alone: it does not check what lies between them, which the serializer's decoding,
// always next, does. Its state carries over from one call of next to the following
// one, so a value can be scanned as its bytes arrive.
type scanner struct {
	depth    int
	inString bool
	escaped  bool
}

// bracket marks the bytes that change the scanner's state outside a string.
var bracket = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// next scans data as the continuation of the value begun in earlier calls (or
// starting at data[0], which must be '{', '[' or '"') and returns the index just past
// the value's end, or -1 if data ends first. A closing bracket with none open ends
// the value too: a stream that malformed fails in the decoding that follows.
func (s *scanner) next(data []byte) int {
	i := 0
	for i < len(data) {
		if s.inString {
			if s.escaped {
				s.escaped = false
				i++
				continue
			}
			// Most of an object's bytes are in strings, and most strings have no
			// escape: find the closing quote, then look for a backslash before it.
			q := bytes.IndexByte(data[i:], '"')
			if q < 0 {
				q = len(data) - i
			}
			if b := bytes.IndexByte(data[i:i+q], '\\'); b >= 0 {
				s.escaped = true
				i += b + 1
				continue
			}
			i += q
			if i == len(data) {
				return -1
			}
			s.inString = false
			i++
			if s.depth == 0 {
				return i
			}
			continue
		}
		for i < len(data) && !bracket[data[i]] {
			i++
		}
		if i == len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
		default:
			s.depth--
			if s.depth <= 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// skipValue returns the index just past the value that starts at data[i], or -1 if it
// does not end within data. A number, true, false or null ends at the next comma,
// closing bracket or white space.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '{', '[', '"':
		var s scanner
		end := s.next(data[i:])
		if end < 0 {
			return -1
		}
		return i + end
	}
	for j := i; j < len(data); j++ {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
	}
	return -1
}

// space returns the index of the first byte at or after i that is not JSON white
// space.
func space(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// member reads the plain key (plainString) of the object member that starts at data[i]
// and its colon, and returns the key and the index where the member's value starts.
func member(data []byte, i int) (key []byte, value int, ok bool) {
	key, end, ok := plainString(data, i)
	if !ok {
		return nil, 0, false
	}
	i = space(data, end)
	if i >= len(data) || data[i] != ':' {
		return nil, 0, false
	}
	return key, space(data, i+1), true
}

// plainString reads the string that starts at data[i] if it is plain — printable
// ASCII, no escape — and returns its contents and the index just past it; ok is false
// for anything else (not a string, an escape, a byte outside printable ASCII), which
// the caller leaves to a full parse.
func plainString(data []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return nil, 0, false
		}
	}
	return nil, 0, false
}
