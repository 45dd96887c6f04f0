package juneauclient

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/loutres/juneau/pkg/apis/juneau/jsonwire"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
	"github.com/loutres/juneau/test/apiwire"
)

// BenchmarkWatchDecode decodes a watch of 1,000 ElasticIPs as an informer does (the
// stream cut into events, each event and its object decoded), with client-go's JSON
// decoding (generated) and with jsonwire's (juneauclient); ns/op is per event. Compare
// the two lines: docs/performance.md#decoding-with-fewer-passes.
func BenchmarkWatchDecode(b *testing.B) {
	var stream bytes.Buffer
	for i := range 1000 {
		e, _ := json.Marshal(map[string]any{"type": "MODIFIED", "object": json.RawMessage(apiwire.Object(b, apiwire.ElasticIP(i)))})
		stream.Write(append(e, '\n'))
	}
	generated := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	mine, err := jsonwire.Serializer(generated, scheme.Scheme)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"generated", generated}, {"juneauclient", mine}} {
		b.Run(c.name, func(b *testing.B) {
			info, _ := runtime.SerializerInfoForMediaType(c.ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
			objects := c.ns.DecoderToVersion(info.Serializer, v1alpha1.SchemeGroupVersion)
			b.SetBytes(int64(stream.Len() / 1000))
			b.ReportAllocs()
			var decode func() (watch.EventType, runtime.Object, error)
			n := 0
			for b.Loop() {
				if n%1000 == 0 {
					frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream.Bytes())))
					d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), objects)
					decode = d.Decode
				}
				if _, _, err := decode(); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}
