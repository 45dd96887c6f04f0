// Package chart checks the Helm chart charts/juneau against the kustomize manifests it
// mirrors, and the monitoring assets of manifests/monitoring/ with the tools their users
// run: helm (lint, template) and promtool.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// HelmLabels are the labels the chart adds to every object's metadata besides those of
// the kustomize manifests (charts/juneau/templates/_helpers.tpl).
var HelmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// Objects decodes a multi-document YAML stream into objects keyed by
// "apiVersion kind namespace/name". Empty documents are skipped; a key seen twice is an
// error.
func Objects(stream []byte) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		k := Key(u)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s appears twice", k)
		}
		out[k] = u
	}
}

// Key names an object.
func Key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
}

// HelmAnnotations are the annotations the chart adds: the Namespace is kept by helm
// uninstall.
var HelmAnnotations = []string{"helm.sh/resource-policy"}

// Normalize removes the Helm labels and annotations from an object's metadata (a map
// left empty goes too), so a rendered chart object compares equal to its kustomize twin.
func Normalize(u *unstructured.Unstructured) {
	annotations := u.GetAnnotations()
	for _, a := range HelmAnnotations {
		delete(annotations, a)
	}
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	} else {
		u.SetAnnotations(annotations)
	}
	labels := u.GetLabels()
	for _, l := range HelmLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		return
	}
	u.SetLabels(labels)
}

// SortedKeys returns the keys of objs in order.
func SortedKeys(objs map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Missing lists the keys of a not in b.
func Missing(a, b map[string]*unstructured.Unstructured) []string {
	var out []string
	for _, k := range SortedKeys(a) {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// HasLabels reports whether every Helm label is set on u, for the caller to check
// before Normalize.
func HasLabels(u *unstructured.Unstructured) string {
	var missing []string
	for _, l := range HelmLabels {
		if _, ok := u.GetLabels()[l]; !ok {
			missing = append(missing, l)
		}
	}
	return strings.Join(missing, ", ")
}
