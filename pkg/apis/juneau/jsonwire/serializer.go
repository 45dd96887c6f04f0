package jsonwire

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Serializer is base with its JSON media type decoded through Meta, its JSON streams
// cut by Framer and their watch events read by events; every other media type, and
// encoding, are base's. The JSON serializers are apimachinery's own
// (json.NewSerializerWithOptions), built on scheme, which must know metav1.WatchEvent.
func Serializer(base runtime.NegotiatedSerializer, scheme *runtime.Scheme) (runtime.NegotiatedSerializer, error) {
	infos := append([]runtime.SerializerInfo(nil), base.SupportedMediaTypes()...)
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		plain := json.NewSerializerWithOptions(Meta{}, scheme, scheme, json.SerializerOptions{})
		info.Serializer = plain
		info.StrictSerializer = json.NewSerializerWithOptions(Meta{}, scheme, scheme, json.SerializerOptions{Strict: true})
		stream, err := newEvents(plain, scheme)
		if err != nil {
			return nil, err
		}
		info.StreamSerializer = &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: stream, Framer: Framer}
		infos[i] = info
	}
	return negotiated{NegotiatedSerializer: base, infos: infos}, nil
}

type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }
