package jsonwire

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Framer cuts a stream of JSON objects or arrays — a watch's events — into one per
// Read, as apimachinery's json.Framer does, but by matching brackets and quotes rather
// than parsing each one with encoding/json (each event is parsed once anyway, by the
// serializer that decodes it). Writing is json.Framer's.
var Framer runtime.Framer = framer{}

type framer struct{}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r}
}

func (framer) NewFrameWriter(w io.Writer) io.Writer { return json.Framer.NewFrameWriter(w) }

// readSize is the least room a frame reader asks the stream to fill at once.
const readSize = 16 << 10

// frameReader returns the stream's values one per Read. A value longer than the
// caller's buffer is returned in parts, each Read but the last with
// io.ErrShortBuffer, as the streaming decoder expects.
type frameReader struct {
	r io.ReadCloser
	// buf[start:] has been read from r and not returned yet.
	buf   []byte
	start int
	// rest is what is left of a value returned in part.
	rest []byte
	// err is r's error, kept until what was read before it is returned.
	err error
}

func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.rest) == 0 {
		frame, err := f.next()
		if err != nil {
			return 0, err
		}
		f.rest = frame
	}
	n := copy(data, f.rest)
	f.rest = f.rest[n:]
	if len(f.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the stream's next value. The slice is valid until next is called again.
func (f *frameReader) next() ([]byte, error) {
	var s scanner
	scanned, begun := 0, false
	for {
		data := f.buf[f.start:]
		if !begun {
			f.start += space(data, 0)
			data = f.buf[f.start:]
			if len(data) > 0 {
				if c := data[0]; c != '{' && c != '[' {
					return nil, fmt.Errorf("reading a JSON stream: a value must be an object or an array, not one starting with %q", c)
				}
				begun = true
			}
		}
		if begun {
			if end := s.next(data[scanned:]); end >= 0 {
				frame := data[:scanned+end]
				f.start += scanned + end
				return frame, nil
			}
			scanned = len(data)
		}
		if f.err != nil {
			if f.err == io.EOF && begun {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, f.err
		}
		f.fill()
	}
}

// fill reads once more from the stream, first moving what is left to the front of the
// buffer and growing it when less than readSize is free.
func (f *frameReader) fill() {
	left := len(f.buf) - f.start
	if f.start > 0 {
		copy(f.buf, f.buf[f.start:])
		f.buf, f.start = f.buf[:left], 0
	}
	if cap(f.buf)-left < readSize {
		grown := make([]byte, left, max(2*cap(f.buf), left+readSize))
		copy(grown, f.buf)
		f.buf = grown
	}
	n, err := f.r.Read(f.buf[left:cap(f.buf)])
	f.buf = f.buf[:left+n]
	f.err = err
}
