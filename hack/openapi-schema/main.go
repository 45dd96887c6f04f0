// Command openapi-schema prints the OpenAPI v2 definitions of juneau's kinds (and the
// Kubernetes types they embed) as JSON. applyconfiguration-gen reads it so the generated
// apply configurations, and the fake clientset's server-side apply, know our schemas.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/loutres/juneau/pkg/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	refFor := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + util.ToRESTFriendlyName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(common.ReferenceCallback(refFor))
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "juneau", Version: "v1alpha1"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
	for name, def := range defs {
		doc.Definitions[util.ToRESTFriendlyName(name)] = def.Schema
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the schema: %w", err)
	}
	_, err = fmt.Fprintln(os.Stdout, string(out))
	return err
}
