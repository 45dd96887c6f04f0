// Package juneauclient builds juneau's generated clientset decoding JSON through
// jsonwire, so what every role's informers receive is parsed once instead of three
// times (docs/performance.md#decoding-with-fewer-passes).
package juneauclient

import (
	"k8s.io/client-go/rest"

	"github.com/loutres/juneau/pkg/apis/juneau/jsonwire"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
)

// NewForConfig is versioned.NewForConfig with jsonwire's JSON decoding: the same
// group, API path, rate limits and user agent, one REST client for the one group.
func NewForConfig(c *rest.Config) (*versioned.Clientset, error) {
	cfg := rest.CopyConfig(c)
	gv := v1alpha1.SchemeGroupVersion
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	ns, err := jsonwire.Serializer(rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), scheme.Scheme)
	if err != nil {
		return nil, err
	}
	cfg.NegotiatedSerializer = ns
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return versioned.New(rc), nil
}
