package jsonwire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/loutres/juneau/test/apiwire"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// frames reads every value of a frame reader with buffers of size n, joining the parts
// of one returned with io.ErrShortBuffer, until an error.
func frames(r io.Reader, n int) ([]string, error) {
	var out []string
	var cur []byte
	buf := make([]byte, n)
	for {
		k, err := r.Read(buf)
		cur = append(cur, buf[:k]...)
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			continue
		case err != nil:
			return out, err
		}
		out = append(out, string(cur))
		cur = nil
	}
}

// stream is a watch's worth of events with white space between them.
func stream(t *testing.T) []byte {
	var b bytes.Buffer
	for i := range 50 {
		b.Write(apiwire.Event(t, "ADDED", apiwire.ElasticIP(i)))
		if i%7 == 0 {
			b.WriteString(" \t\r\n")
		}
	}
	b.WriteString(`[1,"]",{"a":["}"]}]`)
	b.WriteString("\n\n")
	return b.Bytes()
}

// TestFramerAsJSONFramer: the same values as json.Framer, however the stream arrives
// and whatever the reader's buffer.
func TestFramerAsJSONFramer(t *testing.T) {
	data := stream(t)
	want, err := frames(serjson.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(data))), 1<<20)
	if !errors.Is(err, io.EOF) || len(want) != 51 {
		t.Fatalf("json.Framer: %d values, %v", len(want), err)
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"halves":   iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for name, wrap := range readers {
		for _, n := range []int{7, 1024, 1 << 20} {
			got, err := frames(Framer.NewFrameReader(io.NopCloser(wrap(bytes.NewReader(data)))), n)
			if !errors.Is(err, io.EOF) {
				t.Errorf("%s, buffer %d: ended with %v, want io.EOF", name, n, err)
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s, buffer %d: %d values, not json.Framer's %d", name, n, len(got), len(want))
			}
		}
	}
}

func TestFramerEnds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", io.EOF},
		{"  \n", io.EOF},
		{`{"a":1}{"b":`, io.ErrUnexpectedEOF},
		{`{"a":"}`, io.ErrUnexpectedEOF},
	} {
		_, err := frames(Framer.NewFrameReader(io.NopCloser(strings.NewReader(c.in))), 64)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.in, err, c.want)
		}
	}
	_, err := frames(Framer.NewFrameReader(io.NopCloser(strings.NewReader(`{"a":1} 5`))), 64)
	if err == nil || !strings.Contains(err.Error(), "object or an array") {
		t.Errorf("a number in the stream: %v", err)
	}
	boom := errors.New("connection reset")
	got, err := frames(Framer.NewFrameReader(io.NopCloser(iotest.TimeoutReader(strings.NewReader(`{"a":1}`)))), 64)
	if err == nil || len(got) != 1 {
		t.Errorf("a stream failing after one value: %q, %v", got, err)
	}
	_, err = frames(Framer.NewFrameReader(io.NopCloser(io.MultiReader(strings.NewReader(`{"a":`), iotest.ErrReader(boom)))), 64)
	if !errors.Is(err, boom) {
		t.Errorf("a stream failing inside a value: %v, want %v", err, boom)
	}
}
